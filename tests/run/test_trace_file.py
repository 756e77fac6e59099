"""The trace on disk as the run happens: a trace that survives the process.

A worker process runs an agent against the loopback scripted server with ``trace=``; its
tool blocks. The test kills the worker (SIGKILL, SIGTERM, SIGINT) while the tool runs and
reads the file back: the run, the paid request with its usage and the started call are
there. A finished run's records are the ones ``RunResult.to_jsonl`` gives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent, ConfigurationError, ScriptedModel, reply, tool_call_reply
from react_engine.testing import ScriptedServer, tool_calls_completion
from react_engine.testing.tools import get_weather

pytestmark = pytest.mark.slow  # worker processes killed mid-run

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from react_engine import Agent, tool

    started = Path(sys.argv[3])

    @tool
    def slow_lookup(city: str) -> str:
        \"\"\"Look a city up, slowly.

        Args:
            city: the city.
        \"\"\"
        started.write_text("started")
        time.sleep(60)
        return "never"

    agent = Agent("m", [slow_lookup], base_url=sys.argv[1], api_key="sk-test",
                  protocol="function_calling", trace=sys.argv[2])
    agent.run("Look Paris up.")
    """
)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_run_leaves_its_paid_requests_and_started_calls(
    tmp_path: Path, sig: signal.Signals
) -> None:
    trace = tmp_path / "run.jsonl"
    started = tmp_path / "started"
    call = tool_calls_completion(("slow_lookup", {"city": "Paris"}))
    call["usage"] = {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}
    with ScriptedServer(call) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, server.base_url, str(trace), str(started)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not started.exists():
                assert worker.poll() is None, "the worker died before its tool started"
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.05)
            worker.send_signal(sig)
            worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
    kinds = [r["type"] for r in records(trace)]
    assert kinds[:3] == ["run", "reply", "tool_started"]
    run, paid, begun = records(trace)[:3]
    assert run["question"] == "Look Paris up."
    assert paid["usage"]["prompt_tokens"] == 40 and paid["usage"]["completion_tokens"] == 7
    assert paid["tool_calls"][0]["name"] == "slow_lookup"
    assert begun["tool"] == "slow_lookup" and begun["arguments"] == {"city": "Paris"}
    if sig == signal.SIGINT:  # Ctrl-C: the run ends, and says so
        assert kinds[-1] == "result"
        assert records(trace)[-1]["answer"] is None


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_finished_run_writes_what_to_jsonl_gives_plus_its_replies(
    tmp_path: Path, protocol: str
) -> None:
    script: list[Any] = (
        [tool_call_reply(("get_weather", {"location": "Paris"})), reply("Overcast.")]
        if protocol == "function_calling"
        else [
            'Thought: t\nAction: get_weather\nAction Input: {"location": "Paris"}',
            "Thought: t\nFinal Answer: Overcast.",
        ]
    )
    trace = tmp_path / "run.jsonl"
    agent = Agent("m", [get_weather], client=ScriptedModel(script), protocol=protocol)
    result = agent.run("Weather in Paris?", trace=trace)
    written = records(trace)
    assert [r["type"] for r in written] == [
        "run",
        "reply",
        "tool_started",
        "step",
        "reply",
        "step",
        "result",
    ]
    expected = [json.loads(line) for line in result.to_jsonl().splitlines()]
    assert [r for r in written if r["type"] in ("run", "step", "result")] == expected


def test_a_trace_path_that_cannot_be_written_fails_before_the_run(tmp_path: Path) -> None:
    model = ScriptedModel([reply("never asked")])
    agent = Agent("m", client=model, trace=tmp_path / "missing" / "run.jsonl")
    with pytest.raises(ConfigurationError, match="cannot write it"):
        agent.run("q")
    assert model.payloads == []
    with pytest.raises(ConfigurationError, match="trace must be a file path"):
        Agent("m", client=model, trace=5)
