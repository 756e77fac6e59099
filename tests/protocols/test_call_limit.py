"""Hostile replies are bounded once, at the edge (:mod:`react_engine.protocols.limits`):
a reply too long, or with too many calls, is refused before (or instead of) being read,
and the readers stop at ``READ_LIMIT``."""

from __future__ import annotations

import pytest

from react_engine import Capabilities, ModelResponse
from react_engine.protocols.base import Protocol, RequestContext
from react_engine.protocols.decision import CallTools, FormatError
from react_engine.protocols.function_calling import FunctionCallingProtocol
from react_engine.protocols.limits import MAX_CALLS, MAX_REPLY_CHARS, READ_LIMIT
from react_engine.protocols.minimal import MinimalProtocol
from react_engine.protocols.policy import decide
from react_engine.protocols.structured import StructuredOutputProtocol
from react_engine.protocols.text import TextReActProtocol
from react_engine.testing.tools import get_weather
from react_engine.types import ToolCall

PROTOCOLS = [
    FunctionCallingProtocol(),
    TextReActProtocol(),
    StructuredOutputProtocol(),
    MinimalProtocol(),
]


def _ctx() -> RequestContext:
    return RequestContext(
        model="m",
        history=[],
        tools=[get_weather],
        tool_choice="auto",
        capabilities=Capabilities(),
        multi_action="all",
    )


def _lines(count: int) -> str:
    return "\n".join(
        f'{{"name": "get_weather", "arguments": {{"city": "C{i}"}}}}' for i in range(count)
    )


@pytest.mark.parametrize(
    "protocol", [FunctionCallingProtocol(), TextReActProtocol()], ids=["fc", "text"]
)
def test_the_readers_stop_at_the_limit(protocol: Protocol) -> None:
    read = protocol.read_reply(ModelResponse(content=_lines(READ_LIMIT + 20)), _ctx())
    assert isinstance(read, CallTools)
    assert [c.arguments for c in read.calls] == [{"city": f"C{i}"} for i in range(READ_LIMIT)]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_a_reply_longer_than_the_limit_is_refused_before_it_is_read(protocol: Protocol) -> None:
    text = "Final Answer: " + "x" * MAX_REPLY_CHARS
    decision = decide(protocol, ModelResponse(content=text), _ctx())
    assert isinstance(decision, FormatError)
    assert f"the reply is {len(text):,} characters; at most {MAX_REPLY_CHARS:,}" in (
        decision.feedback
    )


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_a_reply_at_the_limit_is_read(protocol: Protocol) -> None:
    answer = "ANSWER " if isinstance(protocol, MinimalProtocol) else "Final Answer: "
    text = answer + "x" * (MAX_REPLY_CHARS - len(answer))
    decision = decide(protocol, ModelResponse(content=text), _ctx())
    assert "characters; at most" not in getattr(decision, "feedback", "")


@pytest.mark.parametrize(
    "protocol", [FunctionCallingProtocol(), TextReActProtocol()], ids=["fc", "text"]
)
def test_a_reply_of_more_calls_than_the_most_is_refused(protocol: Protocol) -> None:
    many = decide(protocol, ModelResponse(content=_lines(MAX_CALLS + 1)), _ctx())
    assert isinstance(many, FormatError)
    assert f"more than {MAX_CALLS} tool calls" in many.feedback
    most = decide(protocol, ModelResponse(content=_lines(MAX_CALLS)), _ctx())
    assert isinstance(most, CallTools)
    assert len(most.calls) == MAX_CALLS


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_more_native_calls_than_the_most_are_refused_before_reading(protocol: Protocol) -> None:
    calls = [ToolCall(f"c{i}", "get_weather", '{"city": "P"}') for i in range(MAX_CALLS + 1)]
    decision = decide(protocol, ModelResponse(content=None, tool_calls=calls), _ctx())
    assert isinstance(decision, FormatError)
    assert f"more than {MAX_CALLS} tool calls" in decision.feedback


def test_the_refusal_is_worded_in_the_templates_language() -> None:
    protocol = TextReActProtocol(template="zh")
    text = "x" * (MAX_REPLY_CHARS + 1)
    decision = decide(protocol, ModelResponse(content=text), _ctx())
    assert isinstance(decision, FormatError)
    assert f"这次回复有 {len(text):,} 个字符" in decision.feedback
