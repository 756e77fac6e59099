"""The library logs; the application decides where it goes.

``react_engine``'s logger has a ``NullHandler``, so a program that configures no logging
sees nothing on stderr (not Python's last-resort output), and one that configures logging
sees each warning once. The CLI prints the library's warnings itself, once each, and leaves
out the ones it already shows as a run's events. Each case runs in a fresh interpreter:
pytest's own logging handlers would hide the difference.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from react_engine.cli import main

ROOT = Path(__file__).resolve().parents[2]

RUN_WITH_A_WARNING = """
import logging, sys
if sys.argv[1] == "configured":
    logging.basicConfig(format="LOG %(levelname)s %(message)s")
from react_engine import Agent, ScriptedModel, reply, tool, tool_call_reply

@tool
def ping(n: int) -> str:
    \"\"\"Answer a ping.\"\"\"
    return f"pong {n}"

model = ScriptedModel([tool_call_reply(("ping", {"n": 1}), ("ping", {"n": 2})), reply("done")])
agent = Agent("m", tools=[ping], client=model, protocol="function_calling", max_calls_per_step=1)
result = agent.run("q")
print(result.answer, [n.message for n in result.notices])
"""


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REACT_ENGINE_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_COLOR"] = "1"
    return env


def run_python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_warning_prints_nothing_when_the_application_configured_no_logging() -> None:
    done = run_python("-c", RUN_WITH_A_WARNING, "unconfigured")
    assert done.returncode == 0, done.stderr
    assert "2 tool calls in one reply" in done.stdout  # the warning happened...
    assert done.stderr == ""  # ...and nothing reached stderr


def test_a_warning_is_logged_once_when_the_application_configured_logging() -> None:
    done = run_python("-c", RUN_WITH_A_WARNING, "configured")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("LOG WARNING 2 tool calls in one reply")


def test_the_cli_prints_each_warning_once(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    calls = [{"name": "get_weather", "arguments": {"location": f"city {i}"}} for i in range(17)]
    script.write_text(json.dumps([{"tool_calls": calls}, {"content": "all sunny"}]))
    cache = tmp_path / "cache.json"
    cache.write_text("{not json")
    env = child_env()
    env["REACT_ENGINE_CAPABILITY_CACHE"] = str(cache)
    done = run_python(
        "-m", "react_engine", "run", "q", "--scripted", str(script), "--protocol",
        "function_calling", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "all sunny\n"  # stdout is the answer; the rest is on stderr
    # A warning that is not one of the run's events: a "warning:" line, once.
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"warning: ignoring corrupt capability cache {cache}")
    # A warning that is one of the run's events: shown with the result, not as a warning
    # line of its own.
    assert "! 17 tool calls in one reply: the first 16 ran" in done.stderr


def test_the_cli_removes_its_handler_when_it_returns(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("react_engine")
    before = list(logger.handlers)
    assert any(isinstance(h, logging.NullHandler) for h in before)
    assert main(["run", "Weather?", "--dry-run"]) == 0
    assert main(["run", "Weather?", "--dry-run"]) == 0
    assert logger.handlers == before
    capsys.readouterr()
