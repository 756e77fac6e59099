"""A request that does not fit the model's context window.

Servers say so in a 400 (some proxies a 413) whose wording differs per provider; the
engine recognises it (:class:`ContextWindowExceeded`), shortens the observations the model
has already read and asks again, and ends the run with ``stop_reason="context_window"``
when nothing is left to shorten. The run's trace keeps every observation whole. Tested
over HTTP against a loopback server that measures each request as a real one would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ContextWindowExceeded,
    ModelRequest,
    ModelRequestError,
    OpenAIChatModel,
    tool,
)
from react_engine.run.observations import SHORTENED_LIMIT
from react_engine.testing import MockResponse, ScriptedServer, completion, tool_calls_completion
from react_engine.transport.wire import context_overflow
from react_engine.types import UserMessage

# How providers word an overflow (status, body).
OVERFLOWS: dict[str, tuple[int, Any]] = {
    "openai": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130512 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "openai_code_only": (
        400,
        {"error": {"message": "Request too large.", "code": "context_length_exceeded"}},
    ),
    "vllm": (
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5120 tokens (4864 in the messages, 256 in the completion).",
            "type": "BadRequestError",
            "code": 400,
        },
    ),
    "llama_cpp_python": (
        400,
        {
            "error": {
                "message": "Requested tokens (9000) exceed context window of 8192",
                "type": "invalid_request_error",
            }
        },
    ),
    "llama_cpp_server": (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
    ),
    "anthropic_compat": (
        400,
        {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}},
    ),
    "gemini_compat": (
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200000) exceeds the maximum number "
                    "of tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
    ),
    "proxy_413": (413, "Request Entity Too Large: context window exceeded"),
    "bare_proxy_413": (
        413,
        "<html><head><title>413 Request Entity Too Large</title></head><body>"
        "<center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center>"
        "</body></html>",
    ),
}

# 4xx errors that are not an overflow: they must stay plain ModelRequestErrors.
OTHER_ERRORS: dict[str, tuple[int, Any]] = {
    "tools_unsupported": (
        400,
        {"error": {"message": "Unsupported parameter: 'tools' is not supported with this model."}},
    ),
    "bad_schema": (
        400,
        {"error": {"message": "Invalid schema for function 'get_weather': 'type' is required."}},
    ),
    "auth_mentions_context": (
        401,
        {"error": {"message": "Invalid API key (maximum context length is not the issue)"}},
    ),
    "not_found": (404, {"error": {"message": "The model `gpt-9` does not exist"}}),
}


def _body_text(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body)


@pytest.mark.parametrize("provider", sorted(OVERFLOWS))
def test_each_providers_overflow_is_recognised(provider: str) -> None:
    status, body = OVERFLOWS[provider]
    assert context_overflow(status, _body_text(body))


@pytest.mark.parametrize("kind", sorted(OTHER_ERRORS))
def test_other_client_errors_are_not_taken_for_an_overflow(kind: str) -> None:
    status, body = OTHER_ERRORS[kind]
    assert not context_overflow(status, _body_text(body))


def test_openai_error_code_alone_is_enough() -> None:
    assert context_overflow(400, "Request too large.", "context_length_exceeded")
    assert not context_overflow(400, "Request too large.", "invalid_request_error")


# --- over HTTP --------------------------------------------------------------------------

LONG = "".join(f"line {i}: build step {i} finished without errors\n" for i in range(150))
"""A tool result of about 6,500 characters."""


@tool
def read_log(part: int) -> str:
    """Read one part of the build log."""
    return f"part {part}\n" + LONG


def _size(body: dict[str, Any]) -> int:
    """The request's size as the fake server counts it: characters of every message."""
    return sum(len(m.get("content") or "") for m in body["messages"])


class WindowServer:
    """A loopback chat server with a context window of ``window`` characters: a longer
    request gets the provider's overflow error. It calls ``read_log`` for parts 1..calls
    (one call per reply), then answers."""

    def __init__(self, window: int, *, calls: int, overflow: tuple[int, Any]) -> None:
        self.window = window
        self.calls = calls
        self.overflow = overflow
        self.sizes: list[int] = []
        self.rejected = 0

    def __call__(self, body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        size = _size(body)
        if self.window < 0:  # a window just |window| characters larger than the first request
            self.window = size - self.window
        self.sizes.append(size)
        if size > self.window:
            self.rejected += 1
            return MockResponse(*self.overflow)
        text = "tools" not in body
        made = sum(
            1
            for m in body["messages"]
            if (m["role"] == "tool")
            or (text and m["role"] == "user" and m["content"].startswith("Observation"))
        )
        if made < self.calls:
            if text:
                return completion(
                    f'Thought: next part\nAction: read_log\nAction Input: {{"part": {made + 1}}}'
                )
            return tool_calls_completion(("read_log", {"part": made + 1}))
        answer = "The build log has no errors."
        return completion(
            f"Thought: I now know the final answer\nFinal Answer: {answer}" if text else answer
        )


@pytest.fixture
def make_server() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def make(
        window: int, *, calls: int, provider: str = "vllm"
    ) -> tuple[ScriptedServer, WindowServer]:
        responder = WindowServer(window, calls=calls, overflow=OVERFLOWS[provider])
        srv = ScriptedServer(default=responder).start()
        servers.append(srv)
        return srv, responder

    yield make
    for srv in servers:
        srv.stop()


def _agent(srv: ScriptedServer, protocol: str, **options: Any) -> Agent:
    return Agent(
        "some-model",
        [read_log],
        base_url=srv.base_url,
        api_key="sk-test",
        protocol=protocol,
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        max_observation_chars=None,
        **options,
    )


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize(
    "provider", ["openai", "vllm", "llama_cpp_python", "llama_cpp_server", "bare_proxy_413"]
)
def test_earlier_observations_are_shortened_and_the_run_answers(
    make_server: Any, protocol: str, provider: str
) -> None:
    # Two logs of ~6,500 characters fit; the third does not until the first two shrink.
    srv, responder = make_server(16_000, calls=3, provider=provider)
    result = _agent(srv, protocol).run("Are there errors in the three parts of the build log?")

    assert result.stop_reason == "final_answer"
    assert result.answer == "The build log has no errors."
    assert responder.rejected == 1
    # After the refusal, the request was resent with the first two observations shortened
    # and the latest one whole.
    retry = srv.requests[responder.sizes.index(max(responder.sizes)) + 1]
    observations = [
        m["content"]
        for m in retry["messages"]
        if m["role"] == "tool" or m["content"].startswith("Observation")
    ]
    assert len(observations) == 3
    assert all(len(o) <= SHORTENED_LIMIT + 40 for o in observations[:2])
    assert "truncated" in observations[0]
    assert LONG in observations[2]
    # The trace keeps what the tools returned, whole.
    assert [len(a.observation) > 6000 for a in result.tool_calls] == [True, True, True]
    assert any(
        "did not fit the model's context window" in e for e in [n.message for n in result.notices]
    )
    assert any("context window" in e for s in result.steps for e in [n.message for n in s.notices])


def test_the_latest_observation_is_shortened_when_the_earlier_ones_are_not_enough(
    make_server: Any,
) -> None:
    # One log alone is over the window: only shortening the latest step helps.
    srv, responder = make_server(4_000, calls=1)
    result = _agent(srv, "function_calling").run("Read part 1 of the build log.")
    assert result.stop_reason == "final_answer"
    assert responder.rejected == 1
    assert len(result.tool_calls[0].observation) > 6000


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_request_that_cannot_fit_ends_the_run_with_its_transcript(
    make_server: Any, protocol: str
) -> None:
    # The window is smaller than the prompt itself: nothing the engine can shorten helps.
    srv, responder = make_server(50, calls=1)
    result = _agent(srv, protocol).run("Read part 1 of the build log, please, all of it.")
    assert result.stop_reason == "context_window"
    assert result.answer is None
    assert result.error is not None and "context window" in result.error
    assert "maximum context length" in result.error
    assert responder.rejected == 1  # nothing to shorten: no pointless retries


def test_after_a_tool_call_the_run_stops_once_everything_is_shortened(make_server: Any) -> None:
    # The question fits with 100 characters to spare; no observation shortened to
    # SHORTENED_LIMIT characters does.
    srv, responder = make_server(-100, calls=1)
    result = _agent(srv, "function_calling").run("Read part 1 of the build log.")
    assert result.stop_reason == "context_window"
    # The first request fit; the second overflowed, was shortened once, and still did not fit.
    assert responder.rejected == 2
    assert len(result.steps) == 1 and result.steps[0].actions[0].status == "ok"
    assert len(result.steps[0].actions[0].observation) > 6000


def test_a_conversation_keeps_the_shortened_history(make_server: Any) -> None:
    srv, responder = make_server(16_000, calls=3)
    chat = _agent(srv, "function_calling").conversation()
    chat.ask("Read the three parts.")
    assert responder.rejected == 1
    # The next question starts from the history the model last read (shortened), so it
    # does not overflow again.
    chat.ask("Anything else?")
    assert responder.rejected == 1


def test_a_direct_call_raises_the_typed_error(make_server: Any) -> None:
    srv, _ = make_server(10, calls=0, provider="openai")
    import openai

    client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="sk-test")
    model = OpenAIChatModel(client, owned=True)
    request = ModelRequest(model="m", messages=(UserMessage("hello there"),))
    with pytest.raises(ContextWindowExceeded) as info:
        asyncio.run(model.complete(request))
    assert isinstance(info.value, ModelRequestError)
    assert info.value.status_code == 400
    assert "sk-test" not in str(info.value)


def test_a_streamed_run_makes_room_the_same_way(make_server: Any) -> None:
    from react_engine.run.events import RunDone

    srv, responder = make_server(16_000, calls=3)
    events = list(_agent(srv, "text").run_stream("Read the three parts."))
    done = events[-1]
    assert isinstance(done, RunDone)
    assert done.result.answer == "The build log has no errors."
    assert responder.rejected == 1
    assert all(body.get("stream") for body in srv.requests)
