"""A reply of thousands of calls, in any family's format, is read into no more objects
than the calls kept (``read_salvaged(limit=...)``), the others only counted.

The objects are those the garbage collector tracks, alive at once while the reply is
read (sampled at each collection's start): what the collector walks in a full
collection, which stops every thread, an event loop's included.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support.tracked import tracked_peak

from react_engine.parsing.salvage import read_salvaged, salvage_calls

SIZE = 300_000
LIMIT = 64
BOUND = 2_500
"""Objects alive at once beyond those before: the calls kept and what a collection's
sampling leaves in between (a collection runs every 700 new objects). Before the reader
kept only its first calls, these replies held 10,000-70,000."""

DS_CALL = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "P"}<｜tool▁call▁end｜>'
FORMATS = {
    "hermes_closed": '<tool_call>{"name": "get_weather", "arguments": {"city": "P"}}</tool_call>',
    "hermes_open": "<tool_call>{",
    "function_tags": "<function=get_weather>",
    "qwen_xml": "<tool_call><function=get_weather><parameter=city>P</parameter></function>"
    "</tool_call>",
    "json_lines": '{"name": "get_weather", "arguments": {"city": "P"}}\n',
    "mistral": '[TOOL_CALLS]get_weather{"city": "P"}\n',
    "functionary": '>>>get_weather\n{"city": "P"}\n',
    "llama_tag": '<|python_tag|>{"name": "get_weather", "parameters": {"city": "P"}}<|eom_id|>',
    "deepseek": DS_CALL,
    "kimi": "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "P"}<|tool_call_end|>',
    "minimax": '<invoke name="get_weather"><parameter name="city">P</parameter></invoke>',
    "glm45": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n"
    "</tool_call>",
    "seed_oss": "<seed:tool_call><function=get_weather><parameter=city>P</parameter>"
    "</function></seed:tool_call>",
    "harmony": "<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "P"}<|call|>',
    "internlm": '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "P"}}'
    "<|action_end|>",
    "granite": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "P"}}]',
    "llama4": '<|python_start|>[get_weather(city="P")]<|python_end|>',
    "python": 'get_weather(city="P")\n',
}


def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


LISTED = '{"name": "get_weather", "arguments": {"city": "P"}}, '
WRAPPERS = {
    "mistral_list": ("[TOOL_CALLS][", "]"),
    "granite_list": ("<|tool_call|>[", "]"),
    "hermes_list": ("<tool_call>[", "]</tool_call>"),
}
"""One wrapper around a list of thousands of calls."""


def _peak(read: Callable[[], object]) -> int:
    with tracked_peak() as peak:
        read()
    return peak[0]


@pytest.mark.parametrize(
    "text",
    [pytest.param(_fill(u), id=name) for name, u in FORMATS.items()]
    + [pytest.param(a + _fill(LISTED) + b, id=name) for name, (a, b) in WRAPPERS.items()],
)
def test_a_reply_of_thousands_of_calls_holds_objects_for_those_kept(text: str) -> None:
    peak = _peak(lambda: read_salvaged(text, ["get_weather"], limit=LIMIT))
    every = salvage_calls(text, ["get_weather"])
    assert peak <= BOUND, f"{peak} objects alive at once reading {len(every)} calls"
    found = read_salvaged(text, ["get_weather"], limit=LIMIT)
    assert found.calls == every[:LIMIT]
    assert found.count == len(every)


def test_a_reply_that_is_one_list_of_thousands_of_calls_holds_objects_for_those_kept() -> None:
    made = SIZE // len(LISTED)
    text = "[" + ", ".join([LISTED.removesuffix(", ")] * made) + "]"
    peak = _peak(lambda: read_salvaged(text, ["get_weather"], limit=LIMIT))
    assert peak <= BOUND, f"{peak} objects alive at once reading {made} calls"
    found = read_salvaged(text, ["get_weather"], limit=LIMIT)
    assert (len(found.calls), found.count) == (LIMIT, made)
    assert found.calls == salvage_calls(text, ["get_weather"])[:LIMIT]


PYTHON_LISTED = 'get_weather(city="P"), '
WHOLE = {
    "tool_calls_wrapper": ('{"tool_calls": [', LISTED, "]}"),
    "tool_calls_message": ('{"role": "assistant", "content": null, "tool_calls": [', LISTED, "]}"),
    "tool_calls_fenced": ('```json\n{"toolCalls": [', LISTED, "]}\n```"),
    "python_list": ("[", PYTHON_LISTED, "]"),
    "llama4_list": ("<|python_start|>[", PYTHON_LISTED, "]<|python_end|>"),
}
"""Replies that are one wrapper around thousands of calls, whose calls are calls only if
every one of them is (a JSON object's ``tool_calls`` list, a Python list, Llama 4's)."""


def _whole(head: str, unit: str, tail: str) -> tuple[str, int]:
    made = SIZE // len(unit)
    return head + ", ".join([unit.removesuffix(", ")] * made) + tail, made


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_a_wrapper_read_whole_before_now_holds_objects_for_the_calls_kept(name: str) -> None:
    text, made = _whole(*WHOLE[name])
    peak = _peak(lambda: read_salvaged(text, ["get_weather"], limit=LIMIT))
    assert peak <= BOUND, f"{peak} objects alive at once reading {made} calls"
    found = read_salvaged(text, ["get_weather"], limit=LIMIT)
    assert (len(found.calls), found.count) == (LIMIT, made)
    assert found.calls == salvage_calls(text, ["get_weather"])[:LIMIT]
    assert [c.arguments for c in found.calls] == [{"city": "P"}] * LIMIT


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_a_wrapper_with_one_bad_call_at_its_end_is_refused_whole_in_bounded_objects(
    name: str,
) -> None:
    head, unit, tail = WHOLE[name]
    text, made = _whole(head, unit, tail)
    cut = text.rindex("get_weather")
    bad = text[:cut] + "get_time" + text[cut + len("get_weather") :]  # a tool it may not call
    peak = _peak(lambda: read_salvaged(bad, ["get_weather"], limit=LIMIT))
    assert peak <= BOUND, f"{peak} objects alive at once refusing {made} calls"
    assert not read_salvaged(bad, ["get_weather"], limit=LIMIT)


TAGGED = {
    "tool_calls_tagged": ('<tool_call>\n{"tool_calls": [', LISTED, "]}\n</tool_call>"),
    "tool_calls_tagged_open": ('Let me check.\n<tool_call>{"tool_calls": [', LISTED, "]}"),
}
"""The same wrapper alone in Hermes tags (read whole, it held 28,000 objects here)."""


@pytest.mark.parametrize("unknown", [False, True], ids=["known", "one_unknown"])
@pytest.mark.parametrize("name", sorted(TAGGED))
def test_a_tagged_wrapper_holds_objects_for_the_calls_kept(name: str, unknown: bool) -> None:
    """A Hermes block keeps the calls to known tools (a call to another is dropped, as
    when it was read whole), read element by element."""
    text, made = _whole(*TAGGED[name])
    if unknown:
        cut = text.rindex("get_weather")
        text = text[:cut] + "get_time" + text[cut + len("get_weather") :]
    peak = _peak(lambda: read_salvaged(text, ["get_weather"], limit=LIMIT))
    assert peak <= BOUND, f"{peak} objects alive at once reading {made} calls"
    found = read_salvaged(text, ["get_weather"], limit=LIMIT)
    assert (len(found.calls), found.count) == (LIMIT, made - unknown)
    assert found.calls == salvage_calls(text, ["get_weather"])[:LIMIT]
    assert [c.arguments for c in found.calls] == [{"city": "P"}] * LIMIT
    assert all(c.format == "hermes" for c in found.calls)
