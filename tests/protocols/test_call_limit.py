"""A reply of more calls than a step answers is read up to ``RequestContext.call_limit``:
the calls past it are counted (``CallTools.more``), not read into objects."""

from __future__ import annotations

import pytest

from react_engine import Capabilities, ModelResponse
from react_engine.protocols.base import CallTools, Protocol, RequestContext
from react_engine.protocols.function_calling import FunctionCallingProtocol
from react_engine.protocols.text import TextReActProtocol
from react_engine.testing.tools import get_weather


def _ctx(limit: int | None) -> RequestContext:
    return RequestContext(
        model="m",
        history=[],
        tools=[get_weather],
        tool_choice="auto",
        capabilities=Capabilities(),
        multi_action="all",
        call_limit=limit,
    )


JSON_LINES = "\n".join(
    f'{{"name": "get_weather", "arguments": {{"city": "C{i}"}}}}' for i in range(40)
)


@pytest.mark.parametrize(
    "protocol", [FunctionCallingProtocol(), TextReActProtocol()], ids=["fc", "text"]
)
def test_calls_past_the_limit_are_counted_not_read(protocol: Protocol) -> None:
    decision = protocol.parse_reply(ModelResponse(content=JSON_LINES), _ctx(5))
    assert isinstance(decision, CallTools)
    assert [c.arguments for c in decision.calls] == [{"city": f"C{i}"} for i in range(5)]
    assert decision.more == 35
    unlimited = protocol.parse_reply(ModelResponse(content=JSON_LINES), _ctx(None))
    assert isinstance(unlimited, CallTools)
    assert (len(unlimited.calls), unlimited.more) == (40, 0)


def test_a_cut_reply_refuses_its_last_call_not_the_last_one_read() -> None:
    # cut by the length limit: the reply's last call may be cut, the fifth is not
    text = "\n".join(f'get_weather("C{i}")' for i in range(40))
    protocol = FunctionCallingProtocol()
    decision = protocol.parse_reply(ModelResponse(content=text, finish_reason="length"), _ctx(5))
    assert isinstance(decision, CallTools)
    assert len(decision.calls) == 5
    assert decision.more == 35
    assert all(call.error is None for call in decision.calls)
    whole = protocol.parse_reply(ModelResponse(content=text, finish_reason="length"), _ctx(None))
    assert isinstance(whole, CallTools)
    assert whole.calls[-1].error is not None  # the reply's own last call, read, is refused
