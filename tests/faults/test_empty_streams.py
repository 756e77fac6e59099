"""A server that answers a streamed request with tools by HTTP 200 and no chunk at all.

llama-cpp-python's server did so before react-engine's own server was fixed, and
some vLLM and Ollama versions did not stream tool calls either. A streamed run (the CLI on
a terminal, ``Agent.run_stream``, ``Agent.iter``) then got an empty reply on every
function-calling turn and ended with ``ErrorBudgetExhausted``. Now the turn is sent again
without streaming (the caller gets the reply as one delta), the capability
``stream_tools=False`` is learned for the model at that endpoint, and later requests with
tools are not streamed; requests without tools still are.

The loopback :class:`~react_engine.testing.ScriptedServer` plays that server
(``empty_tool_streams=True``), through the ``openai`` SDK.
"""

from __future__ import annotations

import asyncio
import io
import sys
from typing import Any

import openai
import pytest

from react_engine import Agent, CapabilityCache, RetryPolicy
from react_engine.cli import main as cli_main
from react_engine.run.events import Event, RunDone, RunNotice, TextDelta
from react_engine.testing import (
    MockResponse,
    ScriptedServer,
    completion,
    tool_calls_completion,
)
from react_engine.testing.tools import get_weather
from react_engine.transport.learned import set_default_cache
from react_engine.types import RunResult

ANSWER = "It is overcast in Paris, 14°C."
TEXT_ACTION = (
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'
)
TEXT_FINAL = "Thought: I know it now.\nFinal Answer: It is overcast in Paris, 14°C."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
]


async def no_sleep(_: float) -> None:
    return None


def weather_script() -> list[Any]:
    return [tool_calls_completion(("get_weather", {"location": "Paris"})), completion(ANSWER)]


def make_agent(server: ScriptedServer, cache: CapabilityCache, protocol: str) -> Agent:
    return Agent(
        "mock-model",
        [get_weather],
        base_url=server.base_url,
        api_key="sk-test",
        protocol=protocol,
        capability_cache=cache,
        retry=RetryPolicy(max_attempts=3, sleep=no_sleep),
    )


def streamed(server: ScriptedServer) -> list[bool]:
    """For each request the server got: whether it asked for a stream."""
    return [body.get("stream") is True for body in server.requests]


def done(events: list[Event]) -> RunResult:
    last = events[-1]
    assert isinstance(last, RunDone)
    return last.result


def deltas(events: list[Event], step: int) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta) and e.step == step]


def test_the_fault_mode_is_an_empty_stream_only_for_streamed_requests_with_tools() -> None:
    """The failure as first seen, on the scripted server: the SDK gets 0 chunks for a streamed
    request with tools, a proper tool call without ``stream``, and a stream without tools."""
    with (
        ScriptedServer(default=weather_script()[0], empty_tool_streams=True) as server,
        openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as client,
    ):
        ask: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Paris?"}]}
        assert list(client.chat.completions.create(**ask, tools=TOOLS, stream=True)) == []
        whole = client.chat.completions.create(**ask, tools=TOOLS)
        calls = whole.choices[0].message.tool_calls or []
        assert [c.function.name for c in calls] == ["get_weather"]
        assert len(list(client.chat.completions.create(**ask, stream=True))) > 1
        assert server.asked == 2, "the empty stream used no scripted answer"


def test_run_stream_sends_the_turn_again_unstreamed_and_learns_stream_tools() -> None:
    cache = CapabilityCache()
    with ScriptedServer(*weather_script(), empty_tool_streams=True) as server:
        events = list(make_agent(server, cache, "function_calling").run_stream("Paris?"))
        # the empty stream, the same turn again without streaming, then the next turn
        # without streaming either
        assert streamed(server) == [True, False, False]
        assert server.streams[0].available == 0
    result = done(events)
    assert result.answer == ANSWER and result.stop_reason == "final_answer"
    assert [a.tool for a in result.tool_calls] == ["get_weather"]
    assert deltas(events, 1) == [ANSWER], "the unstreamed reply reaches the caller as one delta"
    assert cache.get(server.base_url, "mock-model") == {"stream_tools": False}
    notices = [e.message for e in events if isinstance(e, RunNotice)]
    assert any("empty stream" in n for n in notices), notices
    assert any("empty stream" in e for e in [n.message for n in result.steps[0].notices])
    assert result.usage.requests == 3, "the empty stream is a request too"
    assert not [
        e
        for s in result.steps
        for e in [n.message for n in s.notices]
        if e.startswith("usage estimated")
    ]


def test_iter_with_the_lesson_learned_sends_requests_with_tools_unstreamed() -> None:
    cache = CapabilityCache()
    with ScriptedServer(*weather_script(), *weather_script(), empty_tool_streams=True) as server:
        agent = make_agent(server, cache, "function_calling")
        first = list(agent.run_stream("Paris?"))

        async def iterate() -> list[Event]:
            return [event async for event in agent.iter("Paris again?")]

        second = asyncio.run(iterate())
        assert streamed(server) == [True, False, False, False, False]
    assert done(first).answer == done(second).answer == ANSWER
    assert deltas(second, 1) == [ANSWER]
    assert agent.capabilities()[1].startswith("learned: stream_tools=False")


def test_requests_without_tools_still_stream_after_the_lesson() -> None:
    cache = CapabilityCache()
    script = [*weather_script(), completion(TEXT_ACTION), completion(TEXT_FINAL)]
    with ScriptedServer(*script, empty_tool_streams=True) as server:
        list(make_agent(server, cache, "function_calling").run_stream("Paris?"))
        events = list(make_agent(server, cache, "text").run_stream("Paris?"))
        assert streamed(server) == [True, False, False, True, True]
    assert done(events).answer == "It is overcast in Paris, 14°C."
    assert len(deltas(events, 0)) > 5, "the text protocol's replies still stream"


def test_an_empty_stream_without_tools_is_sent_again_and_nothing_is_learned() -> None:
    cache = CapabilityCache()
    empty = MockResponse(chunks=[], done=False)
    with ScriptedServer(empty, completion(TEXT_ACTION), completion(TEXT_FINAL)) as server:
        events = list(make_agent(server, cache, "text").run_stream("Paris?"))
        assert streamed(server) == [True, False, True]
    result = done(events)
    assert result.answer == "It is overcast in Paris, 14°C."
    assert deltas(events, 0) == [TEXT_ACTION]
    assert len(deltas(events, 1)) > 5
    assert cache.get(server.base_url, "mock-model") == {}
    assert any("empty stream" in e for e in [n.message for n in result.steps[0].notices])


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["run", "demo"])
def test_the_cli_on_a_terminal_answers_through_a_server_that_cannot_stream_tools(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` and ``demo`` stream when stdout is a terminal; against such a server they
    still end with the answer (exit 0), and the lesson goes to the process-wide cache."""
    cache = CapabilityCache()
    set_default_cache(cache)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("OPENAI_BASE_URL", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    out, err = _Tty(), _Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with ScriptedServer(*weather_script(), empty_tool_streams=True) as server:
        argv = [command, "--base-url", server.base_url, "--model", "mock-model"]
        argv += ["--protocol", "function_calling"]
        if command == "run":
            argv.append("What is the weather in Paris?")
        assert cli_main(argv) == 0, out.getvalue() + err.getvalue()
        assert streamed(server) == [True, False, False]
    shown = out.getvalue() + err.getvalue()
    assert ANSWER in shown
    assert cache.get(server.base_url, "mock-model") == {"stream_tools": False}
