"""The CLI as a process, when its user or its environment misbehaves.

* Ctrl-C during a request that hangs: the process leaves at once, long before the reply,
  with code 130, "interrupted", no traceback (a second Ctrl-C neither), and the trace file
  holds what was done;
* ``react-engine run ... | head -0``: a reader that goes away ends the process quietly
  (code 141), never with a ``BrokenPipeError`` traceback;
* ``--trace`` to a path that cannot be written: said before the run, not after it; and a
  trace that fails after the run does not cost the answer.

The processes talk to a loopback mock server only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine.cli import main
from react_engine.cli.exits import EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED
from react_engine.run.tracefile import TraceFile
from react_engine.testing import MockResponse, ScriptedServer, completion
from react_engine.testing import tool_calls_completion as calls

pytestmark = pytest.mark.slow  # the CLI as child processes, on pseudo-terminals

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "REACT_ENGINE_", "HYPOTHESIS_"))
    }
    env["OPENAI_API_KEY"] = "sk-test-cli-faults"
    env["PYTHONPATH"] = str(ROOT)
    env["NO_COLOR"] = "1"
    return env


def cli(url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "react_engine",
        "run",
        "What is the weather in Paris?",
        "--base-url",
        url,
        "--model",
        "mock-model",
        "--protocol",
        "function_calling",
        "--max-retries",
        "0",
        *extra,
    ]


class Script:
    """Answers the first request with a tool call, the next ones with ``then``."""

    def __init__(self, then: MockResponse) -> None:
        self.then = then
        self.seen = 0

    def __call__(self, body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        self.seen += 1
        if self.seen == 1:
            return calls(("get_weather", {"location": "Paris"}))
        return self.then


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


HANG = 600.0
"""How long the hanging request waits for its reply: far beyond any wait of the tests, so
that a process which waited for the reply cannot pass them."""


@pytest.fixture
def hanging() -> Iterator[ScriptedServer]:
    """A server that calls a tool, then hangs on the next request (for ``HANG`` seconds)."""
    with ScriptedServer(default=Script(MockResponse(body=completion("late"), delay=HANG))) as srv:
        yield srv


# --- Ctrl-C -------------------------------------------------------------------------------------


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_during_a_hanging_request_exits_at_once_with_the_trace(
    hanging: ScriptedServer, tmp_path: Path, presses: int
) -> None:
    trace = tmp_path / "trace.jsonl"
    proc = subprocess.Popen(
        cli(hanging.base_url, "--trace", str(trace)),
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(hanging.requests) >= 2)  # the second request is in flight
        time.sleep(0.3)
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.05)
        # The process ends before the reply it was waiting for (HANG): it did not wait for
        # it. 60 s only catches a process that does wait, however loaded the machine.
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert len(hanging.requests) == 2  # no retry after Ctrl-C either
    assert "interrupted" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = trace.read_text(encoding="utf-8").splitlines()
    records = [r for r in map(json.loads, lines) if r["type"] in ("run", "step", "result")]
    assert [r["type"] for r in records] == ["run", "step", "result"]
    assert records[-1]["stop_reason"] == "cancelled"
    assert records[1]["actions"][0]["tool"] == "get_weather"  # the step done before Ctrl-C
    assert "get_weather" in err  # the step was shown, on stderr
    assert out == ""  # no answer


# --- a reader that goes away --------------------------------------------------------------------------


def test_a_reader_gone_before_the_first_line_ends_quietly(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_engine", "run", "Weather?", "--dry-run"],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: nobody reads
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=20) == EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert "error" not in err and "══ result" in err  # only the run's progress


def test_a_reader_gone_in_the_middle_of_a_run_ends_quietly_and_keeps_the_trace(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.jsonl"
    slow_final = MockResponse(body=completion("Overcast, 14°C."), delay=0.5)
    with ScriptedServer(default=Script(slow_final)) as srv:
        proc = subprocess.Popen(
            cli(srv.base_url, "--trace", str(trace)),
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        try:
            seen = [proc.stderr.readline() for _ in range(2)]  # the header, the first call
            proc.stdout.close()  # the reader of the answer goes away while the model thinks
            err = b"".join(seen).decode() + proc.stderr.read().decode()
            code = proc.wait(timeout=20)
        finally:
            proc.stderr.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "→ calling get_weather" in seen[1].decode()
    assert code == EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert trace.exists() and "get_weather" in trace.read_text(encoding="utf-8")


# --- a trace file that cannot be written --------------------------------------------------------------


def test_an_unwritable_trace_path_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "no-such-dir" / "trace.jsonl"
    assert main(["run", "Weather?", "--dry-run", "--trace", str(path)]) == EXIT_CONFIG
    captured = capsys.readouterr()
    assert "answer" not in captured.out  # nothing ran
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "--trace" in lines[0] and str(path) in lines[0]


def test_a_trace_that_fails_after_the_run_keeps_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(self: TraceFile, line: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TraceFile, "_append", disk_full)
    path = tmp_path / "trace.jsonl"
    code = main(["run", "Weather?", "--dry-run", "--trace", str(path)])
    captured = capsys.readouterr()
    assert code == EXIT_CONFIG
    assert captured.out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"
    lines = captured.err.strip().splitlines()
    assert [line for line in lines if line.startswith("error")] == [
        f"error: the trace could not be written to {path}: No space left on device"
    ]
    assert lines[-1].startswith("error: ")  # said after the answer


def test_json_output_also_keeps_the_answer_when_the_trace_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: TraceFile, line: str) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(TraceFile, "_append", refuse)
    code = main(["run", "Weather?", "--dry-run", "--json", "--trace", str(tmp_path / "t")])
    captured = capsys.readouterr()
    assert code == EXIT_CONFIG
    assert json.loads(captured.out)["answer"].startswith("Beijing is sunny")
    assert "Permission denied" in captured.err


# --- on a terminal (a pseudo-terminal), as a person runs it ----------------------------------------


class Terminal:
    """A child process whose stdin and stderr (and stdout, unless it goes to a file) are a
    pseudo-terminal: what a person's shell gives it."""

    def __init__(self, argv: list[str], *, stdout: Path | None = None, **env: str) -> None:
        import pty

        self.master, slave = pty.openpty()
        self._out = stdout.open("wb") if stdout is not None else None
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**child_env(), "TERM": "xterm", **env},
            stdin=slave,
            stdout=self._out if self._out is not None else slave,
            stderr=slave,
            close_fds=True,
        )
        os.close(slave)
        self.seen = b""

    def read_until(self, text: str, count: int = 1, timeout: float = 20.0) -> str:
        """Read what the terminal shows until ``text`` was shown ``count`` times."""
        import select

        end = time.monotonic() + timeout
        while self.seen.count(text.encode()) < count:
            if time.monotonic() > end:
                raise AssertionError(f"no {text!r} on the terminal: {self.seen.decode()!r}")
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"no {text!r} before the end: {self.seen.decode()!r}")
                self.seen += chunk
        return self.seen.decode()

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self, timeout: float = 30.0) -> tuple[int, str]:
        """Wait for the end; the exit code and the lines the terminal showed."""
        import select

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            chunk = b""
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                self.seen += chunk
            if not chunk and self.proc.poll() is not None:
                break
        code = self.proc.wait(timeout=5)
        os.close(self.master)
        if self._out is not None:
            self._out.close()
        return code, screen(self.seen.decode())


def screen(shown: str) -> str:
    """The lines a terminal shows: each line's text after its last carriage return (what
    a ticker rewrote, it cleared with spaces first)."""
    lines = shown.replace("\r\n", "\n").split("\n")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in lines)


def weather(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
    """A tool call, then the answer; each after a short wait (a model thinking)."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return MockResponse(body=completion("Paris is overcast, 14°C."), delay=0.6)
    return MockResponse(body=calls(("get_weather", {"location": "Paris"})), delay=0.6)


@pytest.mark.parametrize("where", ["terminal", "file"])
def test_run_on_a_terminal_leaves_exactly_the_answer_in_a_redirected_file(
    tmp_path: Path, where: str
) -> None:
    """``react-engine run q > out.txt`` in a terminal (stderr is the terminal), and
    ``run q > out.txt 2> err.txt`` (neither is)."""
    out = tmp_path / "out.txt"
    with ScriptedServer(default=weather) as srv:
        if where == "terminal":
            term = Terminal(cli(srv.base_url), stdout=out)
            code, shown = term.finish()
            ticked = "… the model is thinking" in term.seen.decode()  # then wiped
        else:
            with out.open("wb") as stdout:
                done = subprocess.run(
                    cli(srv.base_url), cwd=ROOT, env=child_env(), stdout=stdout,
                    stderr=subprocess.PIPE, timeout=60,
                )  # fmt: skip
            code, shown = done.returncode, done.stderr.decode()
    assert code == 0, shown
    assert out.read_text(encoding="utf-8") == "Paris is overcast, 14°C.\n"
    assert "══ result" in shown and "Paris is overcast" in shown  # the progress went there
    if where == "terminal":  # streamed: a header per step, a ticker while the model thinks
        assert "── step 1 (function_calling)" in shown
        assert ticked and "thinking" not in shown
        assert '  → calling get_weather(location="Paris")' in shown
    else:  # plain lines, no ticker
        assert "step 1 [function_calling] action: get_weather" in shown
        assert "thinking" not in shown


def test_run_on_a_terminal_prints_each_step_once(tmp_path: Path) -> None:
    code, shown = Terminal(
        [sys.executable, "-m", "react_engine", "run", "Weather?", "--dry-run", "--protocol", "text"]
    ).finish()
    assert code == 0, shown
    assert shown.count("Action: get_weather") == 2  # the reply's two calls, streamed once
    assert shown.count("Thought: I need the weather in both cities.") == 1
    assert shown.count("Final Answer:") == 1
    assert shown.count("← get_weather: ") == 2  # what each call returned
    # the answer, alone on the last line (stdout)
    assert shown.rstrip("\n").splitlines()[-1] == (
        "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C."
    )


def test_retries_are_shown_on_a_terminal(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = cli(f"http://127.0.0.1:{port}/v1")
    argv[argv.index("--max-retries") + 1] = "1"
    code, shown = Terminal(argv).finish()
    assert code == 4, shown
    assert re.search(r"↻ retry 1/1 in \d\.\d s: cannot reach the chat API", shown), shown
    assert shown.rstrip("\n").splitlines()[-1].startswith("error: cannot reach")


def test_chat_on_a_terminal_edits_lines_and_keeps_a_history(tmp_path: Path) -> None:
    pytest.importorskip("readline")
    state = tmp_path / "state"
    with ScriptedServer(default=lambda body: completion("hello")) as srv:
        argv = [sys.executable, "-m", "react_engine", "chat", "--base-url", srv.base_url]
        term = Terminal([*argv, "--model", "m"], XDG_STATE_HOME=str(state))
        term.read_until("you> ")
        term.type("hi there\r")
        term.read_until("you> ", count=2)
        term.type("\x1b[A\x7f\x7f\x7f\x7f\x7fagain\r")  # up: the last line, edited
        term.read_until("you> ", count=3)
        term.type("\x04")  # Ctrl-D: leave
        code, shown = term.finish()
        questions = [r["messages"][-1]["content"] for r in srv.requests]
    assert code == 0, shown
    assert questions == ["hi there", "hi again"]
    assert "^[[A" not in shown
    history = state / "react-engine" / "chat_history"
    assert history.read_text(encoding="utf-8").splitlines()[-2:] == ["hi there", "hi again"]
