"""A ``{"tool_calls": [...]}`` blob or a ``[...]`` list of calls under the text protocol,
bare, after an ``Action:`` label, fenced or in ``<tool_call>`` tags, read element by element,
reads as it was read whole.

``parse_react(limit=...)`` reads such a blob one element at a time and keeps as objects the
calls up to the ``limit``-th action (or answer), counting the others
(:attr:`~react_engine.types.ParsedStep.more`), so that a reply of thousands of calls never
holds thousands of objects (``tests/run/test_event_loop_stall.py``). The reference is the
whole reading (``react._wrapped_blob`` answering "not that shape", which is what it
answers for every other blob): on the golden corpus and on generated replies, valid and
broken, shorter and longer than the limit, both give the same step (thought, answer,
repairs, text, the same refusal) and the same actions, the new reading the first of them
and the exact count of the others; and the text protocol decides the same.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.fuzzing import JSON_TEXT, JSON_VALUE, json_members
from support.native_formats import TOOLS
from support.tracked import tracked_peak

from bench.stall import stall_agent
from react_engine import Capabilities, TextReActProtocol
from react_engine.errors import ReactEngineError, ReActParseError
from react_engine.parsing import parse_react
from react_engine.parsing import react as R
from react_engine.protocols.base import CallTools, RequestContext
from react_engine.run.loop import MAX_ANSWERED
from react_engine.types import ModelResponse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LIMITS = (1, 2, 3, 1024)
OBJECTS_PER_ANSWERED_CALL = 16  # as tests/run/test_event_loop_stall.py allows


@contextmanager
def whole() -> Iterator[None]:
    """The old reading: every blob decoded whole."""
    with mock.patch.object(R, "_wrapped_blob", lambda text, pos, limit: None):
        yield


@pytest.fixture(autouse=True)
def every_blob_by_elements() -> Iterator[None]:
    """Every blob read element by element, however short: the readings compared here."""
    with mock.patch.object(R, "_SMALL_BLOB", 0):
        yield


def _value(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"  # NaN equals itself; a marked dict is told


def step(text: str, limit: int | None, multi_action: bool = True) -> Any:
    """All ``parse_react`` says of ``text``, as plain data: the step, or the refusal."""
    try:
        s = parse_react(text, limit=limit, multi_action=multi_action)
    except ReActParseError as exc:
        return ("refused", str(exc), exc.pos, exc.expected)
    actions = [
        (a.tool, _value(a.arguments), a.raw_arguments, a.repairs, a.error, a.exact)
        for a in s.actions
    ]
    return (s.thought, s.final_answer, s.repairs, s.text), actions, s.more


def decision(text: str, limit: int) -> Any:
    """What the text protocol decides, asked to read at most ``limit`` calls as objects."""
    ctx = RequestContext("m", [], TOOLS, "auto", Capabilities(), call_limit=limit)
    made = TextReActProtocol().read_reply(ModelResponse(content=text), ctx)
    if not isinstance(made, CallTools):
        return repr(made), [], 0
    calls = [(c.tool, _value(c.arguments), c.repairs, c.error, c.exact) for c in made.calls]
    return (made.thought, made.text, made.repairs), calls, made.more


def _alike(new: Any, old: Any, limit: int) -> None:
    if old[0] == "refused" or new[0] == "refused":
        assert new == old
        return
    (head, calls, more), (old_head, old_calls, old_more) = new, old
    assert head == old_head
    assert old_more == 0 or more == old_more  # the old reading counted only past a protocol's
    assert calls == old_calls[: len(calls)]  # the first calls, as objects
    assert len(calls) + more == len(old_calls) + old_more  # the others, counted exactly
    assert len(calls) >= min(limit, len(old_calls))


def assert_read_alike(text: str) -> None:
    for multi_action in (True, False):
        with whole():
            old = step(text, None, multi_action)
        assert step(text, None, multi_action) == old  # no limit: the whole reading
        assert step(text, 10**9, multi_action) == old  # element by element, all kept
        for limit in LIMITS:
            _alike(step(text, limit, multi_action), old, limit)
    for limit in LIMITS:
        with whole():
            old_decision = decision(text, limit)
        _alike(decision(text, limit), old_decision, limit)


def test_the_reference_is_the_whole_reading() -> None:
    """The patch reaches the reader: under it, a wrapper's calls are all objects."""
    text = json.dumps({"tool_calls": [{"name": "get_time", "arguments": {}}] * 10})
    assert len(parse_react(text, limit=2).actions) == 2
    with whole():
        assert len(parse_react(text, limit=2).actions) == 10


def test_a_short_blob_is_read_whole() -> None:
    """A blob of fewer than ``_SMALL_BLOB`` characters is decoded whole (faster, and its
    calls are few): every call an object, ``more`` 0, as before."""
    text = json.dumps({"tool_calls": [{"name": "get_time", "arguments": {}}] * 10})
    with mock.patch.object(R, "_SMALL_BLOB", len(text) + 1):
        assert (len(parse_react(text, limit=2).actions), parse_react(text, limit=2).more) == (10, 0)
    with mock.patch.object(R, "_SMALL_BLOB", len(text)):
        assert (len(parse_react(text, limit=2).actions), parse_react(text, limit=2).more) == (2, 8)


# --- the golden corpus ---------------------------------------------------------------------------

CORPUS = sorted((FIXTURES / "parser").glob("*.txt")) + sorted((FIXTURES / "salvage").glob("*.txt"))


@pytest.mark.parametrize("path", CORPUS, ids=[f"{p.parent.name}/{p.stem}" for p in CORPUS])
def test_every_golden_reply_is_read_as_it_was_read_whole(path: Path) -> None:
    assert_read_alike(path.read_bytes().decode("utf-8"))


# --- generated replies ---------------------------------------------------------------------------

_NAME = st.sampled_from(
    ["get_weather", "get_time", "search", "get_time", "Finish", "final_answer", "none", "N/A", ""]
)
_KEY = st.sampled_from(["city", "tz", "query", "answer", "name", "arguments", "thought"])


@st.composite
def json_call(draw: st.DrawFn) -> str:
    """One element of a ``tool_calls`` list: a call in one of its spellings, or not one."""
    name = json.dumps(draw(_NAME))
    args = {k: draw(JSON_VALUE) for k in draw(st.lists(_KEY, max_size=3))}
    args_text = json_members(draw, [(k, json.dumps(v)) for k, v in args.items()])
    shape = draw(st.integers(0, 13)) % 10  # mostly {"name", "arguments"}
    if shape == 0:
        return json_members(draw, [("name", name), ("arguments", args_text)])
    if shape == 1:
        return json_members(draw, [("thought", json.dumps(draw(JSON_TEXT))), ("action", name)])
    if shape == 2:  # OpenAI's, arguments as JSON text
        inner = json_members(draw, [("name", name), ("arguments", json.dumps(args_text))])
        return json_members(draw, [("id", '"call_1"'), ("type", '"function"'), ("function", inner)])
    if shape == 3:  # no arguments key: the other keys are the arguments
        return json_members(
            draw, [("action", name), *((k, json.dumps(v)) for k, v in args.items())]
        )
    if shape == 4:  # nested
        return json_members(draw, [("tool_calls", "[" + draw(json_call()) + "]")])
    if shape == 5:
        return json_members(draw, [("action", name), ("action_input", args_text)])
    if shape == 6:
        return json_members(draw, [("name", name), ("arguments", json.dumps(draw(JSON_VALUE)))])
    if shape == 7:
        return json.dumps(draw(JSON_VALUE))  # not a call object
    if shape == 8:
        return json_members(draw, [("name", name)])  # data, not a call
    return json_members(draw, [("thought", json.dumps(draw(JSON_TEXT))), ("tool", name)])


_WRAPPER_KEY = st.sampled_from(["tool_calls", "toolCalls", "Tool-Calls", "tool calls", "tools"])


@st.composite
def wrapper(draw: st.DrawFn) -> str:
    """One JSON object wrapping a ``tool_calls`` list."""
    elements = draw(st.lists(json_call(), max_size=6))
    if draw(st.integers(0, 9)) == 7:
        elements *= draw(st.integers(2, 5))
    space = draw(st.sampled_from(["", " ", "\n"]))
    listed = "[" + space + ("," + space).join(elements) + space + "]"
    pairs = [(draw(_WRAPPER_KEY), listed)]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["role", "thought", "id", "tool_calls", "name"]))
        pairs.insert(draw(st.integers(0, len(pairs))), (key, json.dumps(draw(JSON_VALUE))))
    return json_members(draw, pairs)


_PROSE = st.sampled_from(
    ["", "", "Let me check.\n", "Thought: I need the weather.\n", "<think>x</think>\n"]
)
_AFTER = st.sampled_from(
    ["", "", "\nDone.", "\nFinal Answer: 14", "\nObservation: 14", "\nAction Input: {}"]
)


@st.composite
def listed(draw: st.DrawFn) -> str:
    """A bare list of calls (or of elements that are not all calls)."""
    elements = draw(st.lists(json_call(), max_size=6))
    if draw(st.integers(0, 9)) == 7:
        elements *= draw(st.integers(2, 5))
    space = draw(st.sampled_from(["", " ", "\n"]))
    return "[" + space + ("," + space).join(elements) + space + "]"


_TAGS = st.sampled_from(
    [
        ("<tool_call>", "</tool_call>"),
        ("<tool_call>\n", "\n</tool_call>"),
        ("<tool_call>", " x</tool_call>"),  # text before the closing tag
        ("<tool_call>", ""),  # never closed
        ('<tool_call name="get_time">', "</tool_call>"),
    ]
)
_FENCES = st.sampled_from(
    [("```json\n", "\n```"), ("```\n", "```"), ("~~~json\n", "\n~~~"), ("```json\n", "\nx\n```")]
)


@st.composite
def reply(draw: st.DrawFn) -> str:
    """A reply holding one or two wrappers or lists of calls, with prose, a fence, tags or
    a label around them."""
    blobs = [draw(wrapper() | listed()) for _ in range(draw(st.integers(1, 2)))]
    how = draw(st.integers(0, 8))
    if how == 4:
        opener, closer = draw(_FENCES)
        blobs[0] = opener + blobs[0] + closer
    if how == 5:
        blobs[0] = "Action: " + blobs[0]
    if how == 6:
        opener, closer = draw(_TAGS)
        blobs[0] = opener + blobs[0] + closer
    if how == 7:
        opener, closer = draw(_FENCES | _TAGS)
        blobs[0] = "Action: " + opener + blobs[0] + closer
    if how == 8 and len(blobs) == 2:
        blobs[1] = "Action: " + blobs[1]
    return draw(_PROSE) + "\n".join(blobs) + draw(_AFTER)


_BREAK = st.sampled_from([",", "]", "}", "[", "{", '"', "(", "\\", " ", "\n", "x", ":"])


@st.composite
def broken(draw: st.DrawFn, replies: st.SearchStrategy[str]) -> str:
    """A reply as generated, or cut short, or with one character dropped or added."""
    text = draw(replies)
    if not text:
        return text
    at = draw(st.integers(0, len(text) - 1))
    how = draw(st.integers(0, 5)) - 2  # as generated half the time
    if how == 1:
        return text[:at]
    if how == 2:
        return text[:at] + text[at + 1 :]
    if how == 3:
        return text[:at] + draw(_BREAK) + text[at:]
    return text


CALL = '{"name": "get_time", "arguments": {"tz": "a"}}'
THREE = '{"tool_calls": [' + ", ".join([CALL] * 3) + "]}"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken(reply()))
@example('{"tool_calls": [' + ", ".join([CALL] * 5) + "]}")
@example('{"tool_calls": [{"name": "get_time", "arguments": {}}], "tool_calls": []}')
@example('{"tool_calls": [{"name": "get_time", "arguments": {}}], }')
@example('{"tool_calls": [{"name": "get_time", "arguments": {}},]}')
@example('{"tool_calls": []}')
@example('{"tool_calls": [' + CALL + ", " + CALL + ", 1]}")
@example('{"tool_calls": [' + CALL + ", " + CALL + ', {"name": "x", "name": "y"}]}')
@example(
    '{"tool_calls": [' + CALL + ", " + CALL + ', {"name": "get_time", "a": {"t": 1, "t": 2}}]}'
)
@example('{"role": 1, "tool_calls": [' + CALL + ", " + CALL + '], "role": 2}')
@example('{"role": NaN, "tool_calls": [' + CALL + ", " + CALL + "]}")
@example('{"x": NaN, "tool_calls": [' + CALL + ", " + CALL + '], "x": NaN}')
@example('{"tool_calls": [' + CALL + ", " + CALL + ', {"name": "none"}, {"name": "Finish"}]}')
@example('{"tool_calls": [' + CALL + ', {"action": "Finish", "answer": "14"}, ' + CALL + "]}")
@example('{"tool_calls": [{"action": "Finish", "answer": "14"}, ' + CALL + ", " + CALL + "]}")
@example('{"tool_calls": [' + CALL + ", " + CALL + ", " + CALL + "]} and more text")
@example('{"tool_calls": [' + CALL + ', {"thought": "t", "action": "get_time"}]}\nDone.')
@example('{"tool_calls": [' + CALL + ", " + CALL + ", {\"name\": 'x'}]}")
@example(THREE + "\n" + '{"tool_calls": [' + CALL + "]}")
@example("Action: " + THREE)
@example("Action: " + THREE + " and more text")
@example("Action: " + THREE + "\nAction Input: {}")
@example('Action Input: {"a": 1}\nAction: ' + THREE)
@example("Action: " + THREE + "\nAction: " + THREE)
@example('Action: {"tool_calls": [' + CALL + ', {"name": "none"}, {"name": "Finish"}]} x')
@example(
    'Action: {"tool_calls": [' + CALL + ', {"name": "Finish", "arguments": {}}, ' + CALL + "]}"
)
@example("Thought: t\nAction: " + THREE)
@example('Thought: t\nAction: {"tool_calls": [' + CALL + "]}")
@example('Thought: t\nAction: {"tool_calls": [{"name": "none"}, ' + CALL + "]}")
@example("Thought: t\nAction: [" + CALL + "]")
@example("```json\n" + THREE + "\n```")
@example("```json\n" + THREE + "\n```\nDone.")
@example("```json\n" + THREE + " x\n```")
@example("```json\n" + THREE)
@example("<tool_call>" + THREE + "</tool_call>")
@example("<tool_call>\n" + THREE + "\n</tool_call>\nDone.")
@example("<tool_call>" + THREE)
@example("<tool_call>" + THREE + " x</tool_call>")
@example('<tool_call>{"tool_calls": [' + CALL + ', {"name": "a", "arguments": "</tool_call>"}]}')
@example(
    '<tool_call>{"tool_calls": [' + CALL + ', {"name": "a", "arguments": "</tool_call>"}]}'
    "</tool_call>"
)
@example('<tool_call name="get_time">' + THREE + "</tool_call>")
@example("Action: <tool_call>" + THREE + "</tool_call>")
@example("Action: ```json\n" + THREE + "\n```")
@example("[" + ", ".join([CALL] * 3) + "]")
@example("[" + ", ".join([CALL] * 3) + ", 1]")
@example("[" + ", ".join([CALL] * 3) + ",]")
@example("[" + ", ".join([CALL] * 3) + "] more")
@example("[1, " + ", ".join([CALL] * 3) + "]")
@example("[" + ", ".join([CALL] * 3) + ', {"name": "get_time", "arguments": {"a": 1, "a": 2}}]')
@example("[]")
@example("Action: [" + ", ".join([CALL] * 3) + "]")
@example("```json\n[" + ", ".join([CALL] * 3) + "]\n```")
@example("<tool_call>[" + ", ".join([CALL] * 3) + "]</tool_call>")
def test_a_tool_calls_wrapper_is_read_as_it_was_read_whole(text: str) -> None:
    assert_read_alike(text)


FORMS = {
    "bare": ("Thought: many.\n", ""),
    "action": ("Thought: many.\nAction: ", ""),
    "action_after": ("Action: ", "\nDone."),
    "fenced": ("Thought: many.\n```json\n", "\n```"),
    "tagged": ("Thought: many.\n<tool_call>\n", "\n</tool_call>"),
    "tagged_open": ("Thought: many.\n<tool_call>", ""),
    "action_fenced": ("Thought: many.\nAction:\n```json\n", "\n```"),
}
"""Where a blob of calls stands in a reply: the text before it and after it."""


@pytest.mark.parametrize("count", [1023, 1024, 1025, 3000])
@pytest.mark.parametrize("bad", [None, 0, -1, "twice", "finish", "noop"])
@pytest.mark.parametrize("listed", [False, True], ids=["wrapper", "list"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_wrapper_longer_than_the_limit_is_read_as_it_was_read_whole(
    count: int, bad: int | str | None, listed: bool, form: str
) -> None:
    """Around the 1,024 calls a step answers: the calls past them are counted, and one
    element that is no call makes the blob no call; a key written twice in the last call
    marks every call (``json:duplicate_key``) as the whole reading does."""
    calls = [f'{{"name": "get_time", "arguments": {{"tz": "{i}"}}}}' for i in range(count)]
    if bad == "twice":
        calls[-1] = '{"name": "get_time", "arguments": {"tz": "a", "tz": "b"}}'
    elif bad == "finish":
        calls[-2] = '{"action": "Finish", "action_input": "done"}'
    elif bad == "noop":
        calls[-1] = '{"name": "none", "arguments": {}}'
    elif bad is not None:
        calls[bad] = "[1]"
    blob = "[" + ", ".join(calls) + "]"
    before, after = FORMS[form]
    text = before + (blob if listed else '{"tool_calls": ' + blob + "}") + after
    assert_read_alike(text)
    if bad in (0, -1):  # no call: the blob's calls never run
        try:
            none = parse_react(text, limit=1024)
        except ReActParseError:
            return
        assert none.more == 0
        assert all(a.tool != "get_time" for a in none.actions)
        return
    parsed = parse_react(text, limit=1024)
    actions = count - (bad == "finish") * 2 - (bad == "noop")  # those before the answer run
    assert len(parsed.actions) == min(actions, 1024)
    assert parsed.more == actions - len(parsed.actions)
    if bad == "twice":
        assert "json:duplicate_key" in parsed.actions[0].repairs  # a guess: never run


def test_a_megabyte_wrapper_holds_the_calls_kept_not_all() -> None:
    """The 17,500 calls of a 1 MB wrapper: 1,024 read as objects, the rest counted, and
    the objects alive at once in proportion (they were 105,000, read whole)."""
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    text = '{"tool_calls": [' + ", ".join([one] * 17_500) + "]}"
    with tracked_peak() as peak:
        parsed = parse_react(text, limit=64)
    assert len(parsed.actions) == 64
    assert parsed.more == 17_500 - 64
    assert peak[0] <= 2_500
    with whole(), tracked_peak() as old_peak:
        parse_react(text, limit=64)
    assert old_peak[0] > 50_000  # the measure sees the whole reading


@pytest.mark.parametrize("listed", [False, True], ids=["wrapper", "list"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_megabyte_blob_of_each_form_holds_the_calls_kept_not_all(form: str, listed: bool) -> None:
    """The same, the blob of calls after a label, fenced, in tags, or a bare list."""
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    blob = "[" + ", ".join([one] * 17_500) + "]"
    before, after = FORMS[form]
    text = before + (blob if listed else '{"tool_calls": ' + blob + "}") + after
    with tracked_peak() as peak:
        parsed = parse_react(text, limit=64)
    assert len(parsed.actions) == 64
    assert parsed.more == 17_500 - 64
    assert peak[0] <= 2_500
    with whole(), tracked_peak() as old_peak:
        parse_react(text, limit=64)
    assert old_peak[0] > 50_000  # the measure sees the whole reading


async def _run(agent: Any) -> None:
    with suppress(ReactEngineError):  # only the objects alive while it reads are measured
        await agent.arun("What is the weather in Paris?")


@pytest.mark.parametrize("listed", [False, True], ids=["wrapper", "list"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_agent_reads_a_megabyte_blob_of_each_form_in_bounded_objects(
    form: str, listed: bool
) -> None:
    """As ``tests/run/test_event_loop_stall.py`` measures an agent reading a 1 MB reply:
    the objects alive at once are those of the calls a step answers, not of all (the
    wrapper in ``<tool_call>`` tags, which the salvage also reads, held 91k)."""
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    blob = "[" + ", ".join([one] * (1_000_000 // (len(one) + 2))) + "]"
    before, after = FORMS[form]
    text = before + (blob if listed else '{"tool_calls": ' + blob + "}") + after
    asyncio.run(_run(stall_agent("Final Answer: warm", "text")))
    with tracked_peak() as peak:
        asyncio.run(_run(stall_agent(text, "text")))
    assert peak[0] <= OBJECTS_PER_ANSWERED_CALL * MAX_ANSWERED


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("form", ["tagged", "tagged_open"])
def test_an_agent_reads_a_megabyte_tagged_wrapper_in_bounded_objects(
    form: str, protocol: str
) -> None:
    """The ``{"tool_calls": [...]}`` wrapper in ``<tool_call>`` tags, under either protocol:
    the salvage reads it element by element too (it read it whole: 91k objects)."""
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    blob = "[" + ", ".join([one] * (1_000_000 // (len(one) + 2))) + "]"
    before, after = FORMS[form]
    text = before + '{"tool_calls": ' + blob + "}" + after
    asyncio.run(_run(stall_agent("Final Answer: warm", protocol)))
    with tracked_peak() as peak:
        asyncio.run(_run(stall_agent(text, protocol)))
    assert peak[0] <= OBJECTS_PER_ANSWERED_CALL * MAX_ANSWERED


def test_a_call_nested_as_deep_as_the_decoder_goes_is_read_as_it_was_read_whole() -> None:
    """An element decoded alone is two levels less deep than inside its blob: at the
    depth where the blob fails to decode whole (and is no call) the element alone would
    decode. Elements that deep are read whole, as before, at every depth."""
    for depth in range(50, 1010):
        arg = "[" * depth + "]" * depth
        for text in (
            '{"tool_calls": [{"name": "get_time", "arguments": {"a": ' + arg + "}}, " + CALL + "]}",
            '{"x": ' + arg + ', "tool_calls": [' + CALL + ", " + CALL + "]}",
        ):
            with whole():
                old = step(text, None)
            _alike(step(text, 1), old, 1)


def test_a_reply_of_thousands_of_blobs_is_searched_for_a_wrapper_once() -> None:
    """Each blob asks whether a ``tool_calls`` key lies ahead: the search resumes past the
    last one, so a megabyte of JSON lines is scanned once (searching from each of its
    thousand blobs to the end took 5 s of CPU, not 0.04)."""
    line = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    text = line * 20_000
    searches: list[int] = []
    pattern = R._TOOL_CALLS

    class Counting:
        def search(self, s: str, pos: int = 0) -> Any:
            searches.append(pos)
            return pattern.search(s, pos)

    with mock.patch.object(R, "_TOOL_CALLS", Counting()):
        parsed = parse_react(text, limit=1024)
    assert len(parsed.actions) == R.MAX_LABELS  # the blobs read: as many as labels
    assert searches == [0]
