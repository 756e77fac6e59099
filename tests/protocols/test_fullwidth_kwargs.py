"""A full-width ``，`` between the ``key=value`` items of a Python-style action is a
separator (lossless, ``json:fullwidth_delimiter``): after a complete quoted value it has no
other meaning. Where it may be part of an unquoted value, the reading stays refused."""

from __future__ import annotations

from support.native_formats import context

from react_engine import TextReActProtocol
from react_engine.protocols.decision import CallTools
from react_engine.protocols.policy import decide
from react_engine.types import ModelResponse


def read(action: str) -> CallTools:
    reply = ModelResponse(content=f"Thought: the weather.\nAction: {action}", finish_reason="stop")
    decision = decide(TextReActProtocol(), reply, context())
    assert isinstance(decision, CallTools), decision
    return decision


def test_fullwidth_comma_between_quoted_items_runs_with_both() -> None:
    (call,) = read('get_weather(city="Beijing"，unit="celsius")').calls
    assert call.error is None, call.error
    assert call.arguments == {"city": "Beijing", "unit": "celsius"}
    assert "json:fullwidth_delimiter" in call.repairs


def test_fullwidth_comma_inside_an_unquoted_value_is_refused() -> None:
    # one city "北京，上海", or a city and a stray word? a guess: never run
    (call,) = read("get_weather(city=北京，上海)").calls
    assert call.error is not None
    assert call.arguments != {"city": "北京"}
