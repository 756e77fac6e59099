"""The command line and the streamed API as a person meets them: on a terminal.

On a terminal the CLI streams, and so do ``Agent.run_stream`` and ``Agent.iter`` always:
every request goes out with ``stream=True``, tools included. Piped output (what
``subprocess.run(capture_output=True)`` gives) does not stream, so a test off the terminal
cannot see a server that answers a streamed request with tools by an empty stream.

Here the commands run under a pseudo-terminal (``os.openpty``: stdout, stderr and stdin
are the pty's slave end, so ``isatty()`` is true), against the embedded llama.cpp server.
The assertions are the exit status and the answer's content (from the ``--trace`` file
and from what the terminal showed), never the wording of progress lines.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent, CapabilityCache, ModelSettings, RunResult
from react_engine.cli.agents import DEMO_TOOLS
from react_engine.local import LocalEndpoint
from react_engine.run.events import Event, RunDone, TextDelta

pytestmark = pytest.mark.e2e

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SETTINGS = ModelSettings(temperature=0.0, seed=42, max_tokens=96)
TEMPERATURE_KEYS = ("temperature_c", "temperature_f")


def in_terminal(
    argv: list[str], *, timeout: float = 300, stdout: Path | None = None
) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal for stdin, stdout and stderr (stdout to a file
    if given: ``> out.txt``); its exit status and everything the terminal showed, colours
    removed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.pop("REACT_ENGINE_MODEL", None)
    env.pop("NO_COLOR", None)
    env.setdefault("TERM", "xterm-256color")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    out = stdout.open("wb") if stdout is not None else None
    try:
        proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave if out is None else out,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(slave)
        if out is not None:
            out.close()
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"{argv[3:]} did not end in {timeout:g} s:\n{shown.decode()}")
            if select.select([master], [], [], 0.5)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not data:
                    break
                shown += data
            elif proc.poll() is not None:
                break  # it ended and everything it wrote was read
        status = proc.wait(timeout=30)
    finally:
        os.close(master)
    text = ANSI.sub("", shown.decode("utf-8", "replace")).replace("\r", "")
    return status, text


def read_trace(path: Path) -> tuple[str | None, list[float], list[dict[str, Any]]]:
    """From a trace file: the run's answer, the temperatures get_weather returned, and the
    steps."""
    answer: str | None = None
    temperatures: list[float] = []
    steps: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "result":
            answer = record["answer"]
        if record["type"] != "step":
            continue
        steps.append(record)
        for action in record["actions"]:
            if action["tool"] == "get_weather" and action["status"] == "ok":
                data = json.loads(action["observation"])
                temperatures += [float(data[k]) for k in TEMPERATURE_KEYS if k in data]
    return answer, temperatures, steps


def numbers(text: str) -> set[float]:
    return {float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text)}


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_the_demo_on_a_terminal_answers_from_the_tool(protocol: str, tmp_path: Path) -> None:
    """``react-engine demo`` as typed in a terminal: exit 0, and the answer it shows holds
    the temperature get_weather returned."""
    trace = tmp_path / "demo.jsonl"
    argv = [sys.executable, "-m", "react_engine", "demo", "--protocol", protocol]
    status, shown = in_terminal([*argv, "--trace", str(trace)])
    assert status == 0, shown
    answer, temperatures, steps = read_trace(trace)
    assert answer is not None and temperatures, shown
    carried = numbers(answer) & set(temperatures)
    assert carried, f"answer {answer!r}, get_weather returned {temperatures}"
    assert any(f"{t:g}" in shown for t in carried), shown
    for step in steps:
        assert step["usage"]["completion_tokens"] > 0, f"an empty reply: {step}"
        assert not [e for e in step["events"] if e.startswith("usage estimated")], step["events"]


def test_run_local_on_a_terminal_answers(tmp_path: Path) -> None:
    """A plain `run --local` in a terminal: the run ends with an answer (not judged here:
    docs/cli.md says a small model free to answer from memory may be wrong)."""
    trace = tmp_path / "run.jsonl"
    argv = [sys.executable, "-m", "react_engine", "run", "--local"]
    status, shown = in_terminal([*argv, "What is the weather in Paris?", "--trace", str(trace)])
    assert status == 0, shown
    answer, _, steps = read_trace(trace)
    assert answer, shown
    assert answer.strip().splitlines()[0][:40] in shown
    for step in steps:
        assert step["usage"]["completion_tokens"] > 0, f"an empty reply: {step}"


@pytest.mark.parametrize("where", ["terminal", "pipe"])
def test_run_local_redirected_leaves_exactly_the_answer(where: str, tmp_path: Path) -> None:
    """``react-engine run "What is the weather in Paris?" --local > out.txt``, typed in a
    terminal (stderr is the terminal) and in a script (nothing is): the file holds the
    answer and nothing else."""
    out, trace = tmp_path / "out.txt", tmp_path / "run.jsonl"
    argv = [sys.executable, "-m", "react_engine", "run", "What is the weather in Paris?"]
    argv += ["--local", "--trace", str(trace)]
    if where == "terminal":
        status, shown = in_terminal(argv, stdout=out)
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.pop("REACT_ENGINE_MODEL", None)
        with out.open("wb") as file:
            done = subprocess.run(
                argv, stdout=file, stderr=subprocess.PIPE, env=env, timeout=300, check=False
            )
        status, shown = done.returncode, done.stderr.decode()
    assert status == 0, shown
    answer, _, _ = read_trace(trace)
    assert answer, shown
    assert out.read_text(encoding="utf-8") == answer + "\n"
    assert "══ result" in shown  # the rest went to the terminal (or stderr)


def streamed_agent(ep: LocalEndpoint) -> Agent:
    return Agent(
        ep.model,
        DEMO_TOOLS,
        base_url=ep.base_url,
        api_key=ep.api_key,
        protocol="function_calling",
        capability_cache=CapabilityCache(),
        settings=SETTINGS,
        max_steps=2,
    )


def check_streamed(result: RunResult, events: list[Event]) -> None:
    assert result.stop_reason in {"final_answer", "max_steps"}, result.error
    assert result.answer, "the forced final answer came through the stream"
    assert result.steps[0].actions, "the first streamed reply is a tool call"
    for step in result.steps:
        assert step.usage.prompt_tokens > 0 and step.usage.completion_tokens > 0
        assert not any(
            e.startswith("usage estimated") for e in [n.message for n in step.notices]
        ), [n.message for n in step.notices]
    last = result.steps[-1].index
    pieces = [e.text for e in events if isinstance(e, TextDelta) and e.step == last]
    assert len(pieces) > 1, "the answer arrived in pieces, as the server wrote it"


def test_run_stream_with_tools_against_the_embedded_server(
    local_endpoint: LocalEndpoint,
) -> None:
    agent = streamed_agent(local_endpoint)
    events: list[Event] = []
    result: RunResult | None = None
    for event in agent.run_stream("What is the weather in Paris?", tool_choice="required"):
        events.append(event)
        if isinstance(event, RunDone):
            result = event.result
    assert result is not None
    check_streamed(result, events)
    assert "stream_tools" not in agent.capability_cache.get(local_endpoint.base_url, agent.model)


def test_iter_with_tools_against_the_embedded_server(local_endpoint: LocalEndpoint) -> None:
    agent = streamed_agent(local_endpoint)

    async def go() -> tuple[RunResult | None, list[Event]]:
        events: list[Event] = []
        result: RunResult | None = None
        async for event in agent.iter("Weather in Tokyo?", tool_choice="required"):
            events.append(event)
            if isinstance(event, RunDone):
                result = event.result
        return result, events

    result, events = asyncio.run(go())
    assert result is not None
    check_streamed(result, events)
