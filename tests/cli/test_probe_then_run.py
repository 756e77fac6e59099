"""``react-engine probe``, then ``react-engine run`` in another process: the run uses what the
probe learned, with no variable of react-engine's set, only a home directory, as on a
user's machine (the capability cache is a file in ``~/.local/state/react-engine``).
``REACT_ENGINE_CAPABILITY_CACHE=off`` keeps nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from react_engine.testing.server import ScriptedServer, completion
from react_engine.transport.probe import PROBE_TOOL

ROOT = Path(__file__).resolve().parents[2]


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """A server whose model ignores tools: the probe's named call comes back as prose."""
    if "tools" in body:
        return completion("I cannot call tools, but blue is a nice color.")
    return completion("Thought: I know this one.\nFinal Answer: sunny")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "REACT_ENGINE_", "XDG_"))
    }
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **extra}


def react_engine(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "react_engine", *argv],
        cwd=env["HOME"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def is_probe(request: dict[str, Any]) -> bool:
    choice = request.get("tool_choice")
    return isinstance(choice, dict) and choice["function"]["name"] == PROBE_TOOL


def test_a_run_in_a_new_process_uses_what_the_probe_learned(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    kept = tmp_path / "home" / ".local" / "state" / "react-engine" / "capabilities.json"
    with ScriptedServer(answer_probe=False) as server:  # `answer` answers the probe
        server.default = answer
        where = ["--base-url", server.base_url, "--model", "some-model"]
        probed = react_engine(env, "probe", *where)
        assert probed.returncode == 0, probed.stderr
        assert "tool calls:   ignored" in probed.stdout
        assert f"recorded:     {{'function_calling': False, 'stop': True}} in {kept}" in (
            probed.stdout
        )
        assert [is_probe(r) for r in server.requests] == [True]
        ran = react_engine(env, "run", "What is the weather in Paris?", *where)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "sunny\n"
    assert "protocol text (learned: function_calling=False" in ran.stderr
    run = server.requests[1:]
    assert run, "the run sent no request"
    assert not any("tools" in r or is_probe(r) for r in run)  # no tools, and no probe of its own
    assert kept.is_file()


def test_off_keeps_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = user_env(home, REACT_ENGINE_CAPABILITY_CACHE="off")
    with ScriptedServer(answer_probe=False) as server:  # `answer` answers the probe
        server.default = answer
        where = ["--base-url", server.base_url, "--model", "some-model"]
        probed = react_engine(env, "probe", *where)
        assert probed.returncode == 0, probed.stderr
        assert "in memory only (the cache is off)" in probed.stdout
        ran = react_engine(env, "run", "What is the weather in Paris?", *where)
    assert ran.returncode == 0, ran.stderr
    probe, *run = server.requests
    # The lesson was not kept: the run in a new process probes again (auto probes by default).
    assert is_probe(probe) and run and is_probe(run[0])
    assert list(home.iterdir()) == []  # no state directory, no file named "off"


def test_the_embedded_server_is_not_probed_and_leaves_no_lesson(tmp_path: Path) -> None:
    """`--local` starts a server of the engine's own on a new port each time: a probe of it
    would cost a request per run and leave an entry nobody can use again."""
    from react_engine.cli import build_parser
    from react_engine.cli.agents import make_agent
    from react_engine.cli.endpoint import Endpoint
    from react_engine.testing.tools import get_weather
    from react_engine.transport.learned import default_cache

    args = build_parser().parse_args(["run", "What is the weather in Paris?"])
    with ScriptedServer(answer_probe=False) as server:
        server.default = lambda body: completion("Final Answer: sunny")
        ep = Endpoint("some-model", base_url=server.base_url, api_key="k", local=True)
        result = make_agent(args, ep, [get_weather], "auto", None).run("Weather in Paris?")
    assert result.answer == "sunny"
    assert not any(is_probe(r) for r in server.requests)  # no probe of its own
    assert default_cache().entries() == []  # and nothing learned for later
    path = default_cache().path
    assert path is None or not path.exists()
