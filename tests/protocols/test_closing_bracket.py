"""The closing-bracket rule: arguments whose only missing text is closing brackets after a
complete value, in a reply not cut by the length limit, run with exactly that value
(``json:missing_closing_bracket``, lossless); a reply cut by length, and anything else
missing (a string's end, a value, a key's value, a number that may go on), stay refused.

Each case goes through the policy (:func:`react_engine.protocols.policy.decide`), as a run
reads a reply, under function calling (native ``tool_calls``) and the text protocol.
"""

from __future__ import annotations

import pytest
from support.native_formats import TOOLS, context

from react_engine import FunctionCallingProtocol, TextReActProtocol
from react_engine.protocols.base import Protocol
from react_engine.protocols.decision import CallTools, Decision
from react_engine.protocols.policy import decide
from react_engine.types import ModelResponse, ToolCall

PROTOCOLS = ["function_calling", "text"]
assert {"get_weather", "search"} <= {t.name for t in TOOLS}


def read(protocol: str, arguments: str, finish_reason: str) -> Decision:
    """The decision on a reply calling ``get_weather`` (``search`` for a query) with
    ``arguments`` as written."""
    tool = "search" if "query" in arguments else "get_weather"
    proto: Protocol
    if protocol == "function_calling":
        proto = FunctionCallingProtocol()
        reply = ModelResponse(
            content=None,
            tool_calls=[ToolCall("call_1", tool, arguments)],
            finish_reason=finish_reason,
        )
    else:
        proto = TextReActProtocol()
        text = f"Thought: I will look.\nAction: {tool}\nAction Input: {arguments}"
        reply = ModelResponse(content=text, finish_reason=finish_reason)
    return decide(proto, reply, context())


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ('{"city": "Beijing", "unit": "celsius"', {"city": "Beijing", "unit": "celsius"}),
        (
            '{"query": "rain", "filters": {"days": [1, 2]',
            {"query": "rain", "filters": {"days": [1, 2]}},
        ),
        ('{"city": "Beijing", "unit": null', {"city": "Beijing", "unit": None}),
    ],
)
def test_only_closing_brackets_missing_runs_with_what_was_written(
    protocol: str, written: str, meant: dict[str, object]
) -> None:
    decision = read(protocol, written, "stop")
    assert isinstance(decision, CallTools), decision
    (call,) = decision.calls
    assert call.error is None, call.error
    assert call.arguments == meant
    assert "json:missing_closing_bracket" in call.repairs
    assert "action_input_not_json" not in call.repairs


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reply_cut_by_length_stays_refused(protocol: str) -> None:
    decision = read(protocol, '{"city": "Beijing", "unit": "celsius"', "length")
    calls = decision.calls if isinstance(decision, CallTools) else []
    assert all(call.error is not None for call in calls), calls


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "written",
    [
        '{"city": "Beij',  # an unterminated string
        '{"city": "Beijing", "unit"',  # a dangling key
        '{"city": "Beijing", "unit":',  # a key with no value
        '{"city": "Beijing",',  # a trailing comma
        '{"city": "Beijing", ',  # a trailing comma, then a space
        '{"city": "Beijing", "days": 1',  # a number that may go on (1 or 12?)
        '{"city": "Beijing", "unit": [',  # an opening bracket
        '{"city": "Beijing" // "Shanghai"',  # the closing brackets may be in the comment
    ],
)
def test_anything_else_missing_stays_refused(protocol: str, written: str) -> None:
    decision = read(protocol, written, "stop")
    calls = decision.calls if isinstance(decision, CallTools) else []
    assert all(call.error is not None for call in calls), calls
