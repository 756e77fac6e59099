"""The command line, in-process: ``main(argv) -> int`` with captured streams.

Runs use the scripted model (``--dry-run`` / ``--scripted``) or the loopback mock server;
error paths check for one clear line on stderr, a non-zero code and no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent, AgentConfig
from react_engine.cli import build_parser, main
from react_engine.cli import chat as chat_cli
from react_engine.cli import endpoint as endpoint_cli
from react_engine.cli.agents import load_tools
from react_engine.cli.chat import ChatSession
from react_engine.cli.endpoint import Endpoint
from react_engine.cli.exits import EXIT_NO_ANSWER
from react_engine.cli.render import RunProgress, format_step, format_step_plain, use_color
from react_engine.cli.run import DEMO_QUESTION
from react_engine.testing import (
    MockResponse,
    ScriptedModel,
    ScriptedServer,
    completion,
    reply,
    tool_call_reply,
    tool_calls_completion,
)
from react_engine.types import ModelRequest, ModelResponse, Step, UserTurn

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "REACT_ENGINE_MODEL",
        "OPENAI_MODEL",
        "NO_COLOR",
    ):
        monkeypatch.delenv(name, raising=False)


def _err_line(err: str) -> str:
    """stderr ends with one line starting with ``error:``, the only one, with no traceback
    (a run's progress may come before it; an error found before the run is alone)."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("error")] == lines[-1:], err
    assert lines[-1].startswith("error: ")
    return lines[-1]


def _weather_responder(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("tools"):
        if any(m["role"] == "tool" for m in body["messages"]):
            return completion("Paris is overcast, 14°C.")
        return tool_calls_completion(("get_weather", {"location": "Paris"}))
    if any("<observation>" in (m.get("content") or "") for m in body["messages"][1:]):
        return completion("Thought: done\nFinal Answer: Paris is overcast, 14°C.")
    return completion('Thought: t\nAction: get_weather\nAction Input: {"location": "Paris"}')


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=_weather_responder) as srv:
        yield srv


# --- run -----------------------------------------------------------------------------------------


def test_run_dry_run_shows_steps_protocol_and_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "What's the weather in Beijing and Guangzhou?", "--dry-run"]) == 0
    captured = capsys.readouterr()
    # stdout is the answer and nothing else; the rest is on stderr.
    assert captured.out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"
    out = captured.err
    lines = out.splitlines()
    # The protocol and why, before the steps.
    assert lines[0] == (
        "model scripted · scripted replies, no server · protocol function_calling "
        "(registry: default)"
    )
    # Not a terminal: plain lines, no colour codes.
    assert "\x1b[" not in out
    assert 'step 1 [function_calling] action: get_weather {"location": "Beijing"}' in lines
    assert any(
        line.startswith("step 1 [function_calling] observation: ") and '"sunny"' in line
        for line in lines
    )
    assert any(line.startswith("step 1 [function_calling] tokens: ") for line in lines)
    assert "step 2 [function_calling] final answer: Beijing is sunny at 24°C; " in out
    assert "   protocol: function_calling (registry: default)" in lines
    assert "   stop reason: the model gave its final answer (final_answer)" in lines
    assert not any(line.startswith("   answer:") for line in lines)  # it is on stdout


def test_run_json_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    code = main(["run", "q", "--dry-run", "--protocol", "text", "--json", "--trace", str(trace)])
    assert code == 0
    payload = json.loads(capsys.readouterr().out)  # stdout is the JSON and nothing else
    assert payload["protocol"] == "text"
    assert payload["protocol_reason"] == "explicit"
    assert payload["answer"].startswith("Beijing is sunny")
    assert [s["kind"] for s in payload["steps"]] == ["action", "final"]
    assert len(payload["steps"][0]["actions"]) == 2  # a multi-action text step
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    records = [r for r in records if r["type"] in ("run", "step", "result")]  # not replies
    assert [r["type"] for r in records] == ["run", "step", "step", "result"]
    assert records[-1]["answer"] == payload["answer"]


def test_run_scripted_task_file_and_tools_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from react_engine import tool\n\n"
        "@tool\n"
        "def shout(text: str) -> str:\n"
        '    """Upper-case a text."""\n'
        "    return text.upper()\n\n"
        "def helper() -> None:\n"
        "    pass\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                'Thought: shout it\nAction: shout\nAction Input: {"text": "hi"}',
                "Thought: done\nFinal Answer: HI",
            ]
        ),
        encoding="utf-8",
    )
    code = main(
        ["run", "shout hi", "--tools", "my_tools", "--scripted", str(script), "--protocol", "text"]
    )
    assert code == 0
    out = capsys.readouterr().err
    assert 'step 1 [text] action: shout {"text": "hi"}' in out
    assert "step 1 [text] observation: HI" in out

    # A task file is a script too: its transcript for the protocol that runs.
    task = ROOT / "react_engine" / "compare" / "tasks" / "chinese_weather.json"
    assert main(["run", "上海天气？", "--scripted", str(task), "--protocol", "text"]) == 0
    captured = capsys.readouterr()
    assert "step 1 [text] repairs: fullwidth_colon" in captured.err
    assert "上海今天多云" in captured.out


def test_run_without_answer_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["Thought: hmm"] * 5), encoding="utf-8")
    code = main(["run", "q", "--scripted", str(script), "--protocol", "text"])
    captured = capsys.readouterr()
    assert code == 3
    assert captured.out == ""  # no answer: nothing on stdout
    err = captured.err.splitlines()
    assert "format error" in captured.err  # the steps were shown as they happened
    assert "   answer: (none)" in err
    assert err[-1].startswith("error: the run stopped without an answer")


def test_demo_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--dry-run"]) == 0
    assert capsys.readouterr().out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"


def test_demo_uses_a_configured_endpoint(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("REACT_ENGINE_MODEL", "gpt-4o-mini")
    assert main(["demo"]) == 0
    err = capsys.readouterr().err
    assert "protocol function_calling (registry: gpt-4o*)" in err.splitlines()[0]
    assert server.requests[0]["messages"][1]["content"] == DEMO_QUESTION


def test_demo_falls_back_to_the_local_model_without_a_model_name(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key in the environment but no model name: the demo runs the embedded model."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    started: list[bool] = []

    @contextlib.contextmanager
    def fake_local(quiet: bool = False) -> Iterator[Endpoint]:
        started.append(True)
        yield Endpoint("smollm2-135m-instruct", server.base_url, "sk-local", local=True)

    monkeypatch.setattr(endpoint_cli, "local_endpoint", fake_local)
    assert main(["demo"]) == 0
    assert started == [True]
    first = server.requests[0]
    assert first["model"] == "smollm2-135m-instruct"
    # The local model's repeatable defaults.
    assert (first["temperature"], first["seed"], first["max_tokens"]) == (0.0, 42, 256)
    assert "embedded local model at" in capsys.readouterr().err


def test_run_against_an_endpoint(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    argv = ["run", "Paris?", "--base-url", server.base_url, "--api-key-env", "MY_KEY"]
    code = main([*argv, "--model", "some-model", "--protocol", "text", "--max-tokens", "64"])
    assert code == 0
    assert capsys.readouterr().out == "Paris is overcast, 14°C.\n"
    assert "tools" not in server.requests[0]  # the text protocol: tools in the prompt
    assert server.requests[0]["max_tokens"] == 64
    assert "temperature" not in server.requests[0]  # not the local model: server defaults


# --- errors a user can cause -----------------------------------------------------------------------


def test_no_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q"]) == 2
    line = _err_line(capsys.readouterr().err)
    assert "no endpoint" in line and "--local" in line and "--dry-run" in line


def test_endpoint_without_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["run", "q"]) == 2
    assert "no model name" in _err_line(capsys.readouterr().err)


def test_model_without_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q", "--model", "gpt-4o"]) == 2
    assert "no endpoint" in _err_line(capsys.readouterr().err)


def test_api_key_env_not_set(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "q", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NOT_SET_X"]
    assert main([*argv, "--model", "m"]) == 2
    assert "NOT_SET_X" in _err_line(capsys.readouterr().err)


def test_bad_key_is_one_line_with_the_key_masked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def deny(body: dict[str, Any]) -> MockResponse:
        return MockResponse(401, {"error": {"message": "Incorrect API key provided", "code": 401}})

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedServer(default=deny) as srv:
        code = main(["run", "q", "--base-url", srv.base_url, "--model", "gpt-4o"])
    captured = capsys.readouterr()
    assert code == 4
    line = _err_line(captured.err)
    assert "rejected the API key ($OPENAI_API_KEY = sk-...cdef)" in line
    assert "HTTP 401: Incorrect API key provided" in line
    assert KEY not in captured.err + captured.out


def test_unknown_model(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def not_found(body: dict[str, Any]) -> MockResponse:
        message = f"The model `{body['model']}` does not exist"
        return MockResponse(404, {"error": {"message": message}})

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedServer(default=not_found) as srv:
        code = main(["run", "q", "--base-url", srv.base_url, "--model", "gpt-9"])
    assert code == 4
    line = _err_line(capsys.readouterr().err)
    assert "does not know model 'gpt-9'" in line and "check --model and --base-url" in line


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code = main(["run", "q", "--base-url", url, "--model", "m", "--max-retries", "0"])
    assert code == 4
    line = _err_line(capsys.readouterr().err)
    assert line.startswith(f"error: cannot reach {url}: is the server running?")


def test_tools_module_that_does_not_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken_tools.py").write_text("import does_not_exist_xyz\n", encoding="utf-8")
    (tmp_path / "no_tools.py").write_text("X = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "q", "--dry-run", "--tools", "broken_tools"]) == 2
    line = _err_line(capsys.readouterr().err)
    assert "cannot import tools module 'broken_tools': ModuleNotFoundError" in line
    assert main(["run", "q", "--dry-run", "--tools", "no_tools"]) == 2
    assert "defines no @tool" in _err_line(capsys.readouterr().err)


def test_unknown_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q", "--dry-run", "--protocol", "text", "--template", "nope"]) == 2
    assert "nope" in _err_line(capsys.readouterr().err)


def test_script_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q", "--scripted", str(tmp_path / "missing.json")]) == 2
    assert "cannot read script" in _err_line(capsys.readouterr().err)
    short = tmp_path / "short.json"
    short.write_text(
        json.dumps(['Thought: t\nAction: calculator\nAction Input: {"expression": "1+1"}'])
    )
    assert main(["run", "q", "--scripted", str(short)]) == 2
    assert "no reply left" in _err_line(capsys.readouterr().err)


def test_usage_errors_return_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["run", "q", "--protocol", "xml"]) == 2
    assert main(["run", "q", "--dry-run", "--scripted", "f.json"]) == 2  # exclusive
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(c in out for c in ("run", "chat", "compare", "demo"))


def test_every_command_has_its_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "q", "--trace", "t.jsonl", "--template", "zh", "--json"])
    assert (args.trace, args.template, args.json, args.max_steps) == ("t.jsonl", "zh", True, 6)
    assert args.implicit_final_answer is False
    args = parser.parse_args(["chat", "--implicit-final-answer"])
    assert args.implicit_final_answer is True
    args = parser.parse_args(["compare", "--model", "a", "--model", "b", "--protocol", "text"])
    assert (args.model, args.protocol, args.seed, args.max_tokens) == (
        ["a", "b"],
        ["text"],
        42,
        256,
    )


# --- rendering ---------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _a_step() -> Step:
    from react_engine import Agent

    agent = Agent(
        "m",
        [load_tools(None)[0]],
        client=ScriptedModel(
            [tool_call_reply(("get_weather", {"location": "Paris"})), reply("ok")]
        ),
        protocol="function_calling",
    )
    return agent.run("q").steps[0]


def test_terminal_gets_colour_and_blocks_pipes_get_plain_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    step = _a_step()
    tty = format_step(step, color=use_color(_Tty()))
    assert "\x1b[36mAction:\x1b[0m get_weather" in tty
    assert tty.startswith("\x1b[1m── step 1 (function_calling)")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(_Tty())

    pipe = io.StringIO()
    RunProgress(build_parser().parse_args(["run", "q"]), stream=pipe).on_step(step)
    assert pipe.getvalue() == format_step_plain(step) + "\n"
    assert all(
        line.startswith("step 1 [function_calling] ") for line in pipe.getvalue().splitlines()
    )


# --- chat --------------------------------------------------------------------------------------------


def _chat(monkeypatch: pytest.MonkeyPatch, lines: list[str], *argv: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    return main(["chat", *argv])


def test_chat_slash_commands_and_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "chat.json"
    script.write_text(
        json.dumps(
            {
                "function_calling": [
                    {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]},
                    {"content": "Paris is overcast, 14°C."},
                ],
                "text": [
                    "Thought: I will convert 14°C.\nAction: calculator\n"
                    'Action Input: {"expression": "14 * 9 / 5 + 32"}',
                    "Thought: done\nFinal Answer: That is 57.2°F.",
                ],
            }
        ),
        encoding="utf-8",
    )
    trace = tmp_path / "chat.jsonl"
    code = _chat(
        monkeypatch,
        [
            "/help",
            "/tools",
            "Weather in Paris?",
            "/protocol text",
            f"/trace {trace}",
            "And in Fahrenheit?",
            "/history",
            "/settings",
            "/protocol xml",
            "/nope",
            "/exit",
            "never read",
        ],
        "--scripted",
        str(script),
    )
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert code == 0
    assert "protocol function_calling (registry: default)" in err.splitlines()[0]
    assert "/trace FILE" in out and "/protocol NAME" in out  # /help
    assert "  get_weather(location, unit): Get the current weather for a city." in out
    assert "assistant> Paris is overcast, 14°C." in out
    assert "protocol: text (explicit); the history is kept" in out
    assert "assistant> That is 57.2°F." in out
    # The text protocol saw the first turn, rendered its own way; steps go to stderr.
    assert "step 1 [text] action: calculator" in err
    assert "step 1 [text] action: calculator" not in out
    history = out[out.index("[1] you: Weather in Paris?") :]
    assert history.splitlines()[:6] == [
        "[1] you: Weather in Paris?",
        '    tool get_weather({"location": "Paris"}) -> '
        '{"city":"Paris","condition":"overcast","temperature_c":14,"humidity":72}',
        "    assistant: Paris is overcast, 14°C.",
        "[2] you: And in Fahrenheit?",
        '    tool calculator({"expression": "14 * 9 / 5 + 32"}) -> 57.2',
        "    assistant: That is 57.2°F.",
    ]
    assert "  protocol:  text -> text (explicit)" in out
    assert f"  trace:     {trace}" in out
    assert "usage: /protocol auto|function_calling|text" in out
    assert "unknown command /nope" in out
    assert out.rstrip().endswith("bye")
    # Only the turn after /trace was traced.
    records = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    records = [r for r in records if r["type"] in ("run", "step", "result")]  # not replies
    assert [r["type"] for r in records] == ["run", "step", "step", "result"]
    assert records[0]["question"] == "And in Fahrenheit?"


def test_chat_settings_mask_the_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code = _chat(
        monkeypatch, ["/settings", "Paris?"], "--base-url", server.base_url, "--model", "gpt-4o"
    )
    out = capsys.readouterr().out
    assert code == 0  # end of input leaves
    assert "  API key:   sk-...cdef (from $OPENAI_API_KEY)" in out
    assert KEY not in out
    assert f"  endpoint:  {server.base_url}" in out
    assert "assistant> Paris is overcast, 14°C." in out


def test_chat_keeps_going_after_an_api_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers: Iterator[MockResponse | dict[str, Any]] = iter(
        [MockResponse(503, {"error": {"message": "overloaded"}}), completion("hello")]
    )

    def flaky(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        return next(answers)

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedServer(default=flaky) as srv:
        argv = ["--base-url", srv.base_url, "--model", "gpt-4o", "--max-retries", "0"]
        code = _chat(monkeypatch, ["hi", "hi again", "/history"], *argv)
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0
    assert "error: HTTP 503 from the chat API: overloaded" in captured.err
    assert "assistant> hello" in out
    assert "[1] you: hi\n[2] you: hi again\n    assistant: hello" in out


class _Lines:
    """A line reader for ChatSession: the given lines, then end of input."""

    def __init__(self, *lines: str | BaseException) -> None:
        self.lines = list(lines)

    def __call__(self, prompt: str) -> str:
        if not self.lines:
            raise EOFError
        line = self.lines.pop(0)
        if isinstance(line, BaseException):
            raise line
        return line


def _session(
    model: ScriptedModel, lines: _Lines, tmp_path: Path
) -> tuple[ChatSession, io.StringIO]:
    """A chat session whose stdout and stderr both go to the one buffer returned."""
    args = build_parser().parse_args(
        ["chat", "--protocol", "function_calling", "--trace", str(tmp_path / "t.jsonl")]
    )
    out = io.StringIO()
    endpoint = Endpoint("scripted", client=model)
    tools = load_tools(None)
    return ChatSession(args, endpoint, tools, out=out, err=out, read_line=lines), out


def _interrupt(request: ModelRequest) -> ModelResponse:
    raise KeyboardInterrupt


def test_ctrl_c_interrupts_the_run_but_keeps_the_conversation(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            tool_call_reply(("get_weather", {"location": "Paris"})),
            _interrupt,  # Ctrl-C while the model writes its second reply
            reply("Tokyo is partly cloudy, 21°C."),
        ]
    )
    session, out = _session(
        model, _Lines("Weather in Paris?", KeyboardInterrupt(), "And Tokyo?", "/history"), tmp_path
    )
    assert session.loop() == 0
    text = out.getvalue()
    assert (
        "(interrupted: the conversation keeps this question and the 1 step(s) done so far)" in text
    )
    assert "(Ctrl-C: type /exit or press Ctrl-D to leave)" in text  # Ctrl-C at the prompt
    history = session.conversation.history
    assert isinstance(history[0], UserTurn) and history[0].content == "Weather in Paris?"
    assert isinstance(history[1], Step) and history[1].actions[0].tool == "get_weather"
    assert isinstance(history[2], UserTurn) and history[2].content == "And Tokyo?"
    assert (
        isinstance(history[3], Step) and history[3].final_answer == "Tokyo is partly cloudy, 21°C."
    )
    # The next request carried the interrupted turn: call, result, then the new question.
    roles = [type(m).__name__ for m in model.requests[-1].messages]
    assert roles == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "UserMessage",
    ]
    assert "    tool get_weather" in text and "[2] you: And Tokyo?" in text
    # The trace keeps the interrupted run too, marked cancelled.
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text("utf-8").splitlines()]
    records = [r for r in records if r["type"] in ("run", "step", "result")]  # not replies
    assert [r["type"] for r in records] == ["run", "step", "result", "run", "step", "result"]
    assert records[2]["stop_reason"] == "cancelled"
    assert records[5]["answer"] == "Tokyo is partly cloudy, 21°C."


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="needs Python's own SIGINT handler in the main thread",
)
def test_a_real_sigint_during_a_request_interrupts_the_run(tmp_path: Path) -> None:
    """The signal path: asyncio cancels the run at its next await, then raises Ctrl-C."""

    async def sigint_while_waiting(request: ModelRequest) -> ModelResponse:
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(5)  # a slow server: the cancellation lands here
        return reply("never")

    model = ScriptedModel(
        [tool_call_reply(("get_weather", {"location": "Paris"})), sigint_while_waiting, reply("ok")]
    )
    session, out = _session(model, _Lines("Paris?", "again?"), tmp_path)
    assert session.loop() == 0
    assert "(interrupted: the conversation keeps this question and the 1 step(s)" in out.getvalue()
    assert "assistant> ok" in out.getvalue()
    assert len(session.conversation.steps) == 2


def test_chat_trace_command_and_a_run_without_answer(tmp_path: Path) -> None:
    model = ScriptedModel(["Thought: hmm"] * 3 + ["Thought: done\nFinal Answer: fine"])
    args = build_parser().parse_args(["chat", "--protocol", "text", "--max-steps", "3"])
    out = io.StringIO()
    lines = _Lines(
        "/trace",
        f"/trace {tmp_path / 'missing-dir' / 't.jsonl'}",
        f"/trace {tmp_path / 't.jsonl'}",
        "/trace off",
        "q?",
        "/exit",
    )
    session = ChatSession(
        args,
        Endpoint("scripted", client=model),
        load_tools(None),
        out=out,
        err=out,
        read_line=lines,
    )
    # A small error budget (the CLI has no flag for it): two bare thoughts exhaust it.
    session.conversation.agent.config = AgentConfig(max_steps=3, max_consecutive_errors=1)
    assert session.loop() == 0
    text = out.getvalue()
    assert "trace: off (usage: /trace FILE or /trace off)" in text
    assert f"cannot write {tmp_path / 'missing-dir' / 't.jsonl'}" in text
    assert f"trace: appending each turn to {tmp_path / 't.jsonl'}" in text
    assert "trace: off\n" in text
    assert not (tmp_path / "t.jsonl").read_text("utf-8")  # tracing was switched off again
    assert (
        "(no answer: too many unusable replies in a row (error_budget): "
        "2 consecutive failed turns (budget 1))"
    ) in text
    assert session.conversation.steps[-1].kind == "format_error"


def test_demo_shows_the_call_before_its_tool_runs_and_checks_the_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert err.index('→ calling get_weather(location="Beijing")') < err.index("observation:")
    assert "✓ the answer carries the temperature get_weather returned (24)" in err


def test_demo_fails_an_answer_that_does_not_carry_the_tools_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "made_up.json"
    script.write_text(
        json.dumps(
            {
                "function_calling": [
                    {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]},
                    {"content": "It is sunny and 28 degrees in Paris."},
                ]
            }
        )
    )
    code = main(["demo", "--scripted", str(script), "--protocol", "function_calling"])
    captured = capsys.readouterr()
    assert code == EXIT_NO_ANSWER
    assert "✗ the answer does not carry the temperature get_weather returned (14)" in captured.err
    assert captured.out == "It is sunny and 28 degrees in Paris.\n"  # the answer, though wrong


def test_demo_check_reads_the_temperature_from_successful_calls_only() -> None:
    from react_engine.cli.run import demo_check
    from react_engine.testing.tools import get_weather

    def run(answer: str, *calls: dict[str, Any]) -> Any:
        replies = [tool_call_reply(("get_weather", c, None)) for c in calls] + [reply(answer)]
        agent = Agent("m", [get_weather], client=ScriptedModel(replies), max_steps=5)
        return agent.run("Weather?")

    assert demo_check(run("Overcast, 14°C.", {"location": "Paris"}))[0]
    assert demo_check(run("It is 57.2 F.", {"location": "Paris", "unit": "fahrenheit"}))[0]
    assert not demo_check(run("It is 14 degrees.", {"location": "Atlantis"}))[0]  # tool failed
    assert not demo_check(run("It is 14 degrees."))[0]  # no call at all
    assert not demo_check(run("It is 140 degrees.", {"location": "Paris"}))[0]


# --- Unix conventions: stdout is the answer -----------------------------------------------------


def test_quiet_prints_the_answer_and_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-q", "Weather?", "--dry-run", "--protocol", "text"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"
    assert captured.err == ""
    assert main(["demo", "--quiet", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"
    assert captured.err == ""


def test_quiet_keeps_the_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["Thought: hmm"] * 5), encoding="utf-8")
    assert main(["run", "-q", "q", "--scripted", str(script), "--protocol", "text"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: the run stopped without an answer")
    assert len(captured.err.splitlines()) == 1


def test_run_dash_reads_the_question_from_stdin(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is the weather\nin Paris?\n"))
    argv = ["run", "-", "--base-url", server.base_url, "--model", "m", "-q"]
    assert main([*argv, "--protocol", "function_calling"]) == 0
    assert capsys.readouterr().out == "Paris is overcast, 14°C.\n"
    assert server.requests[0]["messages"][1]["content"] == "What is the weather\nin Paris?"

    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    assert main(["run", "-", "--dry-run"]) == 2
    assert "no question on stdin" in _err_line(capsys.readouterr().err)


def test_a_retry_is_shown_as_it_waits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers: Iterator[MockResponse | dict[str, Any]] = iter(
        [
            MockResponse(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"}),
            MockResponse(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"}),
            completion("hello"),
        ]
    )

    def flaky(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        return next(answers)

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedServer(default=flaky) as srv:
        code = main(["run", "hi", "--base-url", srv.base_url, "--model", "m", "--max-retries", "2"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out == "hello\n"
    retries = [line for line in captured.err.splitlines() if "retry" in line]
    assert retries == [
        "   ↻ retry 1/2 in 0.0 s: HTTP 503 from the chat API: overloaded",
        "   ↻ retry 2/2 in 0.0 s: HTTP 503 from the chat API: overloaded",
    ]


def test_chat_shows_a_ticker_on_a_terminal_and_strips_control_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.7)
        return reply("Paris is overcast, 14°C.")

    model = ScriptedModel([slow])
    args = build_parser().parse_args(["chat", "--protocol", "function_calling"])
    out, err = io.StringIO(), _Tty()  # a terminal: the ticker runs
    # Ctrl-L and an arrow key typed without line editing, around the question.
    lines = _Lines("\x0cWeather in\tParis?\x1b[A\x1b[D\x7f")
    session = ChatSession(
        args, Endpoint("scripted", client=model), load_tools(None), out=out, err=err,
        read_line=lines,
    )  # fmt: skip
    assert session.loop() == 0
    assert model.requests[0].messages[1].content == "Weather in\tParis?"  # type: ignore[union-attr]
    assert "… the model is thinking" in err.getvalue()
    assert out.getvalue() == "assistant> Paris is overcast, 14°C.\n\n"


def test_clean_line() -> None:
    assert chat_cli.clean_line(" \x1b[1;5Chi\x00 there\x1bO\x9b ") == "hi there"
    assert chat_cli.clean_line("naïve 東京\t?") == "naïve 東京\t?"


def test_line_editing_without_readline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where Python has no readline (Windows), chat falls back to plain input()."""
    monkeypatch.setattr(chat_cli, "is_tty", lambda stream: True)
    monkeypatch.setitem(sys.modules, "readline", None)  # `import readline` fails
    args = build_parser().parse_args(["chat", "--history", str(tmp_path / "h")])
    with chat_cli._line_editing(args):
        pass
    assert not (tmp_path / "h").exists()


def test_history_lives_in_the_xdg_state_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert chat_cli.history_path() == tmp_path / "state" / "react-engine" / "chat_history"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (
        chat_cli.history_path() == tmp_path / ".local" / "state" / "react-engine" / "chat_history"
    )


# --- --tools --------------------------------------------------------------------------------------

_SHOUT = (
    "from react_engine import tool\n\n"
    "@tool\n"
    "def {name}(text: str) -> str:\n"
    '    """Upper-case a text."""\n'
    "    return text.upper()\n"
)


@pytest.fixture
def console_script_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The working directory is tmp_path, which is not on sys.path: what the
    ``react-engine`` console script sees (``python -m`` would add it)."""
    monkeypatch.chdir(tmp_path)
    here = {"", ".", str(tmp_path)}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here])
    return tmp_path


@pytest.mark.parametrize(
    "spec", ["cwd_tools_a", "cwd_tools_b.py", "./sub/cwd_tools_c.py", "{abs}/sub/cwd_tools_d.py"]
)
def test_tools_from_a_file_or_a_module_in_the_current_directory(
    spec: str, console_script_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = spec.replace("{abs}", str(console_script_path))
    name = Path(spec).stem
    folder = console_script_path / ("sub" if "sub/" in spec else "")
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(_SHOUT.format(name=f"shout_{name[-1]}"), "utf-8")
    monkeypatch.delitem(sys.modules, name, raising=False)
    tools = load_tools(spec)
    assert [t.name for t in tools] == [f"shout_{name[-1]}"]
    assert tools[0].function("hi") == "HI"  # type: ignore[misc]
    sys.modules.pop(name, None)


def test_tools_that_are_not_there(
    console_script_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "q", "--dry-run", "--tools", "./nope.py"]) == 2
    assert "--tools ./nope.py: no such file" in _err_line(capsys.readouterr().err)
    assert main(["run", "q", "--dry-run", "--tools", "no_such_module_xyz"]) == 2
    line = _err_line(capsys.readouterr().err)
    assert f"no module 'no_such_module_xyz' in {console_script_path}" in line
    assert "--tools ./dir/mytools.py" in line


# --- help, warnings, half-configured endpoints ---------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, deeper in _subparsers(sub):
                    yield f"{name} {inner}", deeper


def test_every_option_of_every_command_has_help() -> None:
    commands = dict(_subparsers(build_parser()))
    assert {"run", "chat", "demo", "compare", "eval", "eval bfcl"} <= set(commands)
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in commands.items()
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction)
        and not action.help
    ]
    assert missing == []


def test_run_help_has_a_description_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert "The answer alone goes to stdout" in text
    assert "examples:\n  react-engine run " in text
    assert 'echo "Weather in Oslo, in Fahrenheit?" | react-engine run - --local' in text
    assert "-q, --quiet" in text


@pytest.mark.parametrize("protocol", ["function_calling", "structured", "auto"])
def test_options_the_protocol_ignores_are_warned_about(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "-q", "q", "--dry-run", "--protocol", protocol]
    assert main([*argv, "--template", "zh", "--implicit-final-answer"]) == 0
    err = capsys.readouterr().err.splitlines()
    shown = "function_calling" if protocol == "auto" else protocol
    fallback = " unless the run falls back to text" if protocol == "auto" else ""
    assert err == [
        f"warning: {flag} does nothing under the {shown} protocol{fallback}: "
        "only the text protocol reads it"
        for flag in ("--template", "--implicit-final-answer")
    ]
    assert main(["run", "-q", "q", "--dry-run", "--protocol", "text", "--template", "zh"]) == 0
    assert capsys.readouterr().err == ""


def test_demo_refuses_a_base_url_without_a_model_like_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")

    def no_local(quiet: bool = False) -> Any:
        raise AssertionError("the embedded model must not start")

    monkeypatch.setattr(endpoint_cli, "local_endpoint", no_local)
    assert main(["run", "q"]) == 2
    run_line = _err_line(capsys.readouterr().err)
    assert main(["demo"]) == 2
    assert _err_line(capsys.readouterr().err) == run_line
    assert "no model name for http://127.0.0.1:9/v1: pass --model" in run_line


def test_a_forced_answer_says_so_in_plain_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "forced.json"
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]}
    script.write_text(json.dumps({"function_calling": [call, {"content": "Overcast, 14°C."}]}))
    argv = ["demo", "--scripted", str(script), "--protocol", "function_calling"]
    assert main([*argv, "--max-steps", "1"]) == 0
    err = capsys.readouterr().err
    assert (
        "   stop reason: answered after 1 tool call (get_weather); the final answer was "
        "asked for without tools once the step budget was spent (max_steps)"
    ) in err.splitlines()
    assert "✓ the answer carries the temperature get_weather returned (14)" in err


def test_run_tool_choice_required_makes_the_first_step_call_a_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small model answers from memory; --tool-choice required sends that reply back."""
    script = tmp_path / "memory.json"
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]}
    replies = [{"content": "Paris, France."}, call, {"content": "Overcast, 14°C."}]
    script.write_text(json.dumps({"function_calling": replies}))
    argv = ["run", "Weather in Paris?", "--scripted", str(script), "-q"]
    assert main([*argv, "--protocol", "function_calling"]) == 0
    assert capsys.readouterr().out.strip() == "Paris, France."
    assert main([*argv, "--protocol", "function_calling", "--tool-choice", "required"]) == 0
    assert capsys.readouterr().out.strip() == "Overcast, 14°C."


def test_compare_says_why_the_png_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # not installed
    argv = ["compare", "--scripted", "-q", "--task", "calculator_single", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert not (tmp_path / "comparison.png").exists()
    assert "warning: comparison.png skipped: matplotlib is not installed" in err
    assert main([*argv, "--no-plot"]) == 0  # asked for none: nothing to say
    assert "warning" not in capsys.readouterr().err


def test_eval_bfcl_scripted_says_where_the_recordings_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from react_engine.eval import bfcl_recording

    installed = tmp_path / "site-packages" / "fixtures" / "bfcl"  # what a wheel install has
    monkeypatch.setattr(bfcl_recording, "DEFAULT_RECORDINGS", installed)
    for flag in ("--scripted", "--record"):
        assert main(["eval", "bfcl", flag, "--limit", "1"]) == 2
        line = _err_line(capsys.readouterr().err)
        assert (
            f"{flag} without DIR uses the recordings in a source checkout's fixtures/bfcl/" in line
        )
        assert str(installed) in line and f"pass {flag} DIR" in line
    assert not installed.exists()  # --record wrote nothing there
