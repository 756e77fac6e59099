"""``parse_react`` reads calls chained with ``;`` whole, or raises: never only the first.

Llama 3.1 (and models imitating it) write several JSON calls on one line, ``{call};
{call}``. The protocols read them through the native-format reader; ``parse_react`` is
public API and must give every call too, in order, or raise
:class:`~react_engine.errors.ReActParseError`: a reading that stops at the first call would
be a partial reading passed off as the whole reply.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from react_engine.errors import ReActParseError
from react_engine.parsing import parse_react

WEATHER = {"city": "Paris"}
TIME = {"tz": "Europe/Paris"}


def blob(tool: str, args: dict[str, str], keys: tuple[str, str]) -> str:
    return json.dumps({keys[0]: tool, keys[1]: args})


@pytest.mark.parametrize(
    "keys", [("action", "action_input"), ("name", "arguments"), ("name", "parameters")]
)
@pytest.mark.parametrize(
    "shape",
    [
        "Action: {a}; {b}",
        "Thought: both.\nAction: {a};{b}",
        "{a}; {b}",
        "Thought: both.\n{a} ; {b}",
        "<|python_tag|>{a}; {b}",
        "<tool_call>{a}</tool_call>; <tool_call>{b}</tool_call>",
        "Thought: both.\n```json\n{a}; {b}\n```",
    ],
)
def test_chained_calls_are_all_read(shape: str, keys: tuple[str, str]) -> None:
    reply = shape.format(a=blob("get_weather", WEATHER, keys), b=blob("get_time", TIME, keys))
    step = parse_react(reply)
    assert [(a.tool, a.arguments) for a in step.actions] == [
        ("get_weather", WEATHER),
        ("get_time", TIME),
    ]


@given(
    tools=st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=5),
    separator=st.sampled_from([";", "; ", " ; ", ";\n", ";  "]),
    labelled=st.booleans(),
)
def test_every_call_of_a_chain_is_read_in_order(
    tools: list[str], separator: str, labelled: bool
) -> None:
    calls = [json.dumps({"name": t, "arguments": {"n": i}}) for i, t in enumerate(tools)]
    reply = ("Action: " if labelled else "") + separator.join(calls)
    step = parse_react(reply)
    assert [(a.tool, a.arguments) for a in step.actions] == [
        (t, {"n": i}) for i, t in enumerate(tools)
    ]


@pytest.mark.parametrize(
    "second",
    [
        '{"action": "get_time", "action_input": }',  # a key with no value
        '{"action": "get_time", "action_input": {"tz": }}',
        "[{]",
    ],
)
def test_a_chained_call_that_cannot_be_read_raises(second: str) -> None:
    first = blob("get_weather", WEATHER, ("action", "action_input"))
    reply = f"Thought: two.\nAction: {first}; {second}"
    with pytest.raises(ReActParseError) as caught:
        parse_react(reply)
    assert caught.value.pos == reply.index(second)


def test_a_chained_call_cut_off_is_read_and_marked() -> None:
    first = blob("get_weather", WEATHER, ("name", "arguments"))
    step = parse_react(f'{first}; {{"name": "get_time", "arguments": {{"tz": "Eur')
    assert [a.tool for a in step.actions] == ["get_weather", "get_time"]
    assert "action_input_not_json" in step.actions[1].repairs  # never run: refused


@pytest.mark.parametrize(
    "after",
    ['; {"units": "metric"} is what I prefer', "; and then I will wait", "; <b>done</b>"],
)
def test_what_follows_a_semicolon_and_is_no_call_stays_text(after: str) -> None:
    first = blob("get_weather", WEATHER, ("action", "action_input"))
    step = parse_react(f"Action: {first}{after}")
    assert [(a.tool, a.arguments) for a in step.actions] == [("get_weather", WEATHER)]
    assert "text_after_input" in step.repairs
