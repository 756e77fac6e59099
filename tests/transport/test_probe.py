"""The capability probe: one tiny request tells whether an endpoint returns native tool
calls, honours ``stop`` and constrains a named call; the result goes to the cache, and
``protocol="auto"`` follows it. Against the loopback mock server in its variants."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent, CapabilityCache, ModelUnavailableError
from react_engine.cli.commands import main
from react_engine.testing.server import (
    MockResponse,
    ScriptedServer,
    completion,
    tool_calls_completion,
)
from react_engine.testing.tools import get_weather
from react_engine.transport.endpoint import connect
from react_engine.transport.probe import PROBE_TOOL, aprobe

NATIVE = tool_calls_completion((PROBE_TOOL, {"color": "blue"}))
IGNORED = completion("I cannot access real-time data, but blue is a nice color.")
REJECTED = MockResponse(400, {"error": {"message": "tools is not supported by this model"}})
WRITTEN = completion(
    '<tool_call>\n{"name": "report_color", "arguments": {"color": "blue"}}\n</tool_call>'
)
STOP_REJECTED = MockResponse(
    400, {"error": {"message": "Unsupported parameter: 'stop' is not supported with this model."}}
)


def run_probe(*answers: Any) -> tuple[Any, ScriptedServer]:
    with ScriptedServer(*answers, answer_probe=False) as server:
        model = connect(server.base_url, "sk-test", asynchronous=True)
        result = asyncio.run(aprobe(model, "some-model"))
    return result, server


def test_native_calls() -> None:
    result, server = run_probe(NATIVE)
    assert (result.tools, result.stop, result.constrained) == ("native", True, True)
    [request] = server.requests
    assert request["tool_choice"] == {"type": "function", "function": {"name": PROBE_TOOL}}
    assert request["stop"] and request["tools"][0]["function"]["name"] == PROBE_TOOL
    assert result.overrides() == {
        "function_calling": True,
        "stop": True,
        "constrained_decoding": True,
    }


def test_a_native_call_outside_the_schema_is_not_constrained() -> None:
    result, _ = run_probe(tool_calls_completion((PROBE_TOOL, {"color": "red"})))
    assert (result.tools, result.constrained) == ("native", False)
    assert "constrained_decoding" not in result.overrides()


def test_native_arguments_nested_past_the_parser_s_depth_are_not_constrained() -> None:
    """A call whose arguments nest 100,000 deep is judged, not a RecursionError."""
    result, _ = run_probe(tool_calls_completion((PROBE_TOOL, "[" * 100_000)))
    assert (result.tools, result.constrained) == ("native", False)


def test_tools_ignored() -> None:
    result, _ = run_probe(IGNORED)
    assert result.tools == "ignored"
    assert result.overrides()["function_calling"] is False


def test_tools_rejected() -> None:
    result, server = run_probe(REJECTED)
    assert result.tools == "rejected" and len(server.requests) == 1
    assert result.overrides()["function_calling"] is False


def test_a_call_written_as_text_names_its_format() -> None:
    result, _ = run_probe(WRITTEN)
    assert (result.tools, result.call_format) == ("written", "hermes")
    assert result.overrides()["function_calling"] is False


def test_a_rejected_stop_is_dropped_and_recorded() -> None:
    result, server = run_probe(STOP_REJECTED, NATIVE)
    assert (result.tools, result.stop, result.requests) == ("native", False, 2)
    assert "stop" not in server.requests[1]


@pytest.mark.parametrize(
    ("answer", "protocol"),
    [(NATIVE, "function_calling"), (IGNORED, "text"), (REJECTED, "text")],
    ids=["native", "ignored", "rejected"],
)
def test_agent_probe_chooses_the_protocol_from_what_it_saw(
    answer: Any, protocol: str, tmp_path: Path
) -> None:
    cache = CapabilityCache(tmp_path / "cache.json")
    final = completion("Final Answer: sunny") if protocol == "text" else completion("It is sunny.")
    with ScriptedServer(answer, final, answer_probe=False) as server:
        agent = Agent(
            "some-model",
            [get_weather],
            base_url=server.base_url,
            api_key="sk-test",
            capability_cache=cache,
            probe=True,
        )
        result = agent.run("Weather in Paris?")
        again = agent.choose_protocol()[0].name
    assert result.protocol == protocol == again
    assert len(server.requests) == 2  # the probe, then the run's one request
    assert "tools" in server.requests[1] if protocol == "function_calling" else True
    assert cache.get(server.base_url, "some-model")["function_calling"] is (
        protocol == "function_calling"
    )


def test_agent_probes_once_per_endpoint(tmp_path: Path) -> None:
    cache = CapabilityCache(tmp_path / "cache.json")
    with ScriptedServer(NATIVE, completion("one"), completion("two"), answer_probe=False) as server:
        agent = Agent(
            "m", [get_weather], base_url=server.base_url, api_key="k", capability_cache=cache
        )
        agent.probe = True
        agent.run("a")
        agent.run("b")
    assert len(server.requests) == 3


def test_no_probe_with_probe_false(tmp_path: Path) -> None:
    cache = CapabilityCache(tmp_path / "cache.json")
    with ScriptedServer(completion("hello"), answer_probe=False) as server:
        Agent(
            "m",
            [get_weather],
            base_url=server.base_url,
            api_key="k",
            capability_cache=cache,
            probe=False,
        ).run("hi")
    assert len(server.requests) == 1


def test_an_http_endpoint_is_probed_by_default(tmp_path: Path) -> None:
    cache = CapabilityCache(tmp_path / "cache.json")
    with ScriptedServer(IGNORED, completion("Final Answer: hello"), answer_probe=False) as server:
        result = Agent(
            "m", [get_weather], base_url=server.base_url, api_key="k", capability_cache=cache
        ).run("hi")
    assert len(server.requests) == 2  # the probe, then the question
    assert result.protocol == "text" and result.answer == "hello"


def test_the_probe_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("REACT_ENGINE_CAPABILITY_CACHE", str(tmp_path / "cache.json"))
    with ScriptedServer(IGNORED, answer_probe=False) as server:
        code = main(["probe", "--base-url", server.base_url, "--model", "m", "--json"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["tools"] == "ignored" and shown["native_calls"] is False
    assert shown["recorded"]["function_calling"] is False
    saved = json.loads((tmp_path / "cache.json").read_text("utf-8"))
    assert "function_calling" in json.dumps(saved)


def test_an_error_that_is_not_about_tools_is_raised_and_nothing_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("REACT_ENGINE_CAPABILITY_CACHE", str(tmp_path / "cache.json"))
    unauthorized = MockResponse(401, {"error": {"message": "Invalid API key"}})
    with ScriptedServer(unauthorized, answer_probe=False) as server:
        code = main(["probe", "--base-url", server.base_url, "--model", "m"])
    assert code != 0
    assert "Invalid API key" in capsys.readouterr().err
    assert not (tmp_path / "cache.json").exists()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections, reads nothing and never answers; its
    base URL."""
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def accept() -> None:
            with contextlib.suppress(OSError):  # the listener closed: the test is over
                while True:
                    held.append(listener.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        finally:
            listener.shutdown(socket.SHUT_RDWR)
    for conn in held:
        conn.close()
    assert held  # the probe did connect: it waited for an answer, not for a connection


def test_the_probe_gives_up_on_a_server_that_never_answers() -> None:
    with silent_server() as url:
        model = connect(url, "sk-test", asynchronous=True)
        started = time.monotonic()
        with pytest.raises(ModelUnavailableError, match=r"no reply from .* within 0\.5 s"):
            asyncio.run(aprobe(model, "m", timeout=0.5))
    assert time.monotonic() - started < 5


def test_the_probe_command_gives_up_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """``react-engine probe --timeout 1`` at a server that never answers: one line on
    stderr, the API exit code, nothing recorded (it waited 600 s a request before)."""
    monkeypatch.setenv("REACT_ENGINE_CAPABILITY_CACHE", str(tmp_path / "cache.json"))
    with silent_server() as url:
        started = time.monotonic()
        code = main(["probe", "--base-url", url, "--model", "m", "--timeout", "1"])
    assert time.monotonic() - started < 6
    out = capsys.readouterr()
    assert code == 4 and out.out == ""
    assert out.err == f"error: the probe got no reply from {url} within 1 s\n"
    assert not (tmp_path / "cache.json").exists()
    assert main(["probe", "--base-url", url, "--model", "m", "--timeout", "0"]) == 2
    assert "--timeout must be a positive number" in capsys.readouterr().err
