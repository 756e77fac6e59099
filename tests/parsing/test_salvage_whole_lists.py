"""The replies whose calls count only if all of them do, read element by element, read
exactly as they were read whole.

Three forms were decoded whole before their calls were known to be calls: one JSON object
wrapping a ``tool_calls`` list, a reply that is one Python list of calls, and the same list
in Llama 4's ``<|python_start|>`` tag. They are now checked element by element, then
written element by element (:func:`~react_engine.parsing.salvage._wrapped_calls` reads
a JSON list again, :func:`~react_engine.parsing.calls._python_list` unpacks the Python
calls it packed as text), so that a list of thousands of calls
never holds thousands of objects (``test_salvage_bounded.py``). Here the old whole reading
(its code, kept below) is the reference: on the golden corpus and on generated replies of
those forms, valid and broken, both give the same calls (arguments, repairs, spans), the
same count, the same thought, and the same decision of each protocol (its calls, errors
and repairs, or the refusal).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.fuzzing import JSON_TEXT, JSON_VALUE, json_members
from support.native_formats import SCHEMAS, decide

from react_engine.parsing import calls as C
from react_engine.parsing import formats as F
from react_engine.parsing import salvage as S
from react_engine.parsing.salvage import read_salvaged, strip_salvaged

NAMES = sorted(SCHEMAS)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _old_python_list(
    text: str, start: int, end: int, names: frozenset[str]
) -> list[C._Piece] | None:
    """The reader of ``[f(...), g(...)]`` before: every element parsed, then all returned."""
    out: list[C._Piece] = []
    pos = start + 1
    while True:
        head = C.P.IDENT_CALL.match(text, pos, end)
        if head is None:
            return None
        close, _ = C._scan(text, head.end() - 1, end, C.P.PYTHON_STRUCTURE, "'\"")
        if close is None:
            return None
        call = C._python_call(text[head.start(1) : close], names)
        if call is None:
            return None
        out.append((call[0], call[1], head.start(1), close))
        pos = close
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos < end and text[pos] == ",":
            pos += 1
            continue
        return out if pos == end - 1 else None


@contextmanager
def whole() -> Iterator[None]:
    """The old reading: a reply ``{...}`` decoded whole (as before, when no object was
    read as a ``tool_calls`` wrapper), Python lists parsed whole."""
    with (
        mock.patch.object(S, "_wrapped_calls", lambda body, names: (False, None)),
        mock.patch.object(S, "_python_list", _old_python_list),
        mock.patch.object(F, "_python_list", _old_python_list),
    ):
        yield


def _value(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"  # NaN equals itself; a marked dict is told


def reading(text: str, limit: int | None) -> Any:
    """All a reader says of ``text``, as plain data."""
    found = read_salvaged(text, NAMES, limit=limit, schemas=SCHEMAS)
    calls = [(c.tool, _value(c.arguments), c.repairs, c.format, c.span) for c in found.calls]
    return calls, found.count, list(found.spans()), strip_salvaged(text, found)


def decisions(text: str) -> list[str]:
    """What each protocol decides on ``text`` (its calls, errors, repairs, or refusal)."""
    return [repr(decide(p, text)) for p in ("function_calling", "text")]


def assert_read_alike(text: str) -> None:
    for limit in (None, 1, 2):
        new = reading(text, limit)
        with whole():
            old = reading(text, limit)
        assert new == old, (limit, text[:300])
    new_decisions = decisions(text)
    with whole():
        old_decisions = decisions(text)
    assert new_decisions == old_decisions, text[:300]


def test_the_reference_is_the_whole_reading() -> None:
    """The patch reaches the readers: a list checked whole is built whole."""
    text = "[" + ", ".join(['get_weather(city="P")'] * 100) + "]"
    with whole():
        assert S._python_list is _old_python_list
        assert isinstance(_old_python_list(text, 0, len(text), frozenset(NAMES)), list)
    assert not isinstance(S._python_list(text, 0, len(text), frozenset(NAMES)), list)


# --- the golden corpus ---------------------------------------------------------------------------

CORPUS = sorted((FIXTURES / "salvage").glob("*.txt")) + sorted((FIXTURES / "parser").glob("*.txt"))


@pytest.mark.parametrize("path", CORPUS, ids=[f"{p.parent.name}/{p.stem}" for p in CORPUS])
def test_every_golden_reply_is_read_as_it_was_read_whole(path: Path) -> None:
    assert_read_alike(path.read_bytes().decode("utf-8"))


# --- generated replies ---------------------------------------------------------------------------

_NAME = st.sampled_from([*NAMES, *NAMES, *NAMES, "rm", "get weather", ""])  # mostly known
_KEY = st.sampled_from(["city", "days", "unit", "query", "tz", "name", "arguments"])


@st.composite
def json_call(draw: st.DrawFn) -> str:
    """One element of a ``tool_calls`` list: a call in one of its spellings, or not a call."""
    name = json.dumps(draw(_NAME))
    args = {k: draw(JSON_VALUE) for k in draw(st.lists(_KEY, max_size=3))}
    args_text = json_members(draw, [(k, json.dumps(v)) for k, v in args.items()])
    shape = draw(st.integers(0, 11)) % 9  # mostly {"name", "arguments"}
    if shape == 0:
        return json_members(draw, [("name", name), ("arguments", args_text)])
    if shape == 1:
        return json_members(draw, [("name", name), ("parameters", args_text)])
    if shape == 2:  # OpenAI's, arguments as JSON text
        inner = json_members(draw, [("name", name), ("arguments", json.dumps(args_text))])
        return json_members(draw, [("id", '"call_1"'), ("type", '"function"'), ("function", inner)])
    if shape == 3:  # no arguments key: the other keys are the arguments
        return json_members(draw, [("name", name), *((k, json.dumps(v)) for k, v in args.items())])
    if shape == 4:  # nested
        return json_members(draw, [("tool_calls", "[" + draw(json_call()) + "]")])
    if shape == 5:
        return json_members(draw, [("action", name), ("action_input", args_text)])
    if shape == 6:
        return json_members(draw, [("name", name), ("arguments", json.dumps(draw(JSON_VALUE)))])
    if shape == 7:
        return json.dumps(draw(JSON_VALUE))  # not a call object
    return json_members(draw, [("thought", json.dumps(draw(JSON_TEXT))), ("tool", name)])


_WRAPPER_KEY = st.sampled_from(["tool_calls", "toolCalls", "Tool-Calls", "tool calls", "tools"])


@st.composite
def wrapper(draw: st.DrawFn) -> str:
    """A reply that is one JSON object wrapping a ``tool_calls`` list."""
    elements = draw(st.lists(json_call(), max_size=5))
    if draw(st.integers(0, 9)) == 7:  # past what a check keeps
        elements *= C._HELD // max(len(elements), 1) + 1
    space = draw(st.sampled_from(["", " ", "\n"]))
    listed = "[" + space + ("," + space).join(elements) + space + "]"
    pairs = [(draw(_WRAPPER_KEY), listed)]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["role", "content", "id", "tool_calls", "name"]))
        pairs.insert(draw(st.integers(0, len(pairs))), (key, json.dumps(draw(JSON_VALUE))))
    body = json_members(draw, pairs)
    if draw(st.integers(0, 2)) == 0:  # in Hermes tags, alone or beside other text
        space = draw(st.sampled_from(["", " ", "\n", "\n\t "]))
        open_ = draw(st.sampled_from(["<tool_call>", "Let me check.\n<tool_call>", "<tool_call>x"]))
        close = draw(st.sampled_from(["</tool_call>", "", "</tool_call>\nDone.", " y</tool_call>"]))
        return (open_ + space + body + space + close) * draw(st.integers(1, 2))
    fence = draw(st.sampled_from(["", "```json\n", "```\n"]))
    return fence + body + ("\n```" if fence else "")


_PY_VALUE = st.one_of(
    st.integers(-5, 5).map(str),
    st.text(alphabet=st.sampled_from("ab é\"'\\(),[]\n"), max_size=6).map(repr),
    st.sampled_from(["None", "True", "[1, 'a']", "{'k': (1, 2)}", "-1.5", "1e999"]),
)
_PY_VALUE = st.one_of(*[_PY_VALUE] * 6, st.sampled_from(["{1, 2}", "x", "f()", "b'x'"]))
"""Mostly literals JSON can hold."""


@st.composite
def python_call(draw: st.DrawFn) -> str:
    """One element of a Python list of calls, or something else."""
    name = draw(st.sampled_from([*NAMES, *NAMES, *NAMES, "rm", "print"]))
    positional = draw(st.lists(_PY_VALUE, max_size=1 + draw(st.integers(0, 1))))
    keys = draw(st.lists(_KEY, max_size=3, unique=draw(st.integers(0, 9)) > 0))
    keywords = [f"{k}={draw(_PY_VALUE)}" for k in keys]
    if draw(st.integers(0, 19)) == 7:  # now and then not a call
        return draw(st.sampled_from(["1", "'text'", "get_weather", "{'a': 1}", "**k"]))
    return f"{name}({', '.join([*positional, *keywords])})"


@st.composite
def python_list(draw: st.DrawFn) -> str:
    """A reply that is one Python list of calls, bare or in Llama 4's tag."""
    space = draw(st.sampled_from(["", " ", "\n"]))
    elements = draw(st.lists(python_call(), min_size=1, max_size=4))
    if draw(st.integers(0, 9)) == 7:  # past what a check keeps
        elements *= C._HELD // len(elements) + 1
    listed = "[" + ("," + space).join(elements) + "]"
    if draw(st.booleans()):
        return space + listed + space
    around = draw(st.sampled_from(["", "Let me check.\n", "<think>x</think>"]))
    end = draw(st.sampled_from(["<|python_end|>", "", "<|eot|>"]))
    tagged = f"<|python_start|>{space}{listed}{space}{end}"
    return around + tagged * draw(st.integers(1, 2)) + around


_BREAK = st.sampled_from([",", "]", "}", "[", "{", '"', "'", "(", ")", "\\", " ", "\n", "x", ":"])


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


_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(broken(wrapper()))
@example('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "P"}}]}')
@example('{"tool_calls": [{"name": "get_time", "arguments": {}}], "tool_calls": []}')
@example('{"tool_calls": [], "toolCalls": [{"name": "get_time"}], "tool_calls": [{"name": "x"}]}')
@example('{"tool_calls": [{"name": "get_time", "arguments": {}}], }')
@example('{"tool_calls": [{"name": "get_time", "arguments": {}},]}')
@example('{"tool_calls": {"name": "get_time", "arguments": {}}}')
@example('{"role": "assistant", "tool_calls": [{"name": "get_time"}], "x": [1, }')
@example('{"tool_calls": [{"name": "get_time", "arguments": {"tz": "a", "tz": "b"}}]}')
@example('{"role": 1, "tool_calls": [{"name": "get_time", "arguments": {}}], "role": 2}')
@example('{"role": NaN, "tool_calls": [{"name": "get_time", "arguments": {}}], "role": NaN}')
@example('{"role": NaN, "tool_calls": [{"name": "get_time", "arguments": {}}]}')
@example('{"x": NaN, "y": 1, "tool_calls": [{"name": "get_time", "arguments": {}}], "y": 1}')
@example('{"x": {"a": 1, "a": 2}, "tool_calls": [{"name": "get_time", "arguments": {}}]}')
@example('{"tool_calls": [{"name": "get_time"}, {"name": "search", "name": "get_time"}]}')
@example('{"tool_calls": [1e999, {"name": "get_time", "arguments": {}}]}')
@example('```json\n{"tool_calls": [{"name": "get_time"}, {"name": "search"}]}\n```')
@example('<tool_call>\n{"tool_calls": [{"name": "get_time"}, {"name": "rm"}]}\n</tool_call>')
@example('<tool_call>{"tool_calls": [{"name": "get_time", "arguments": {"tz": "a", "tz": "b"}}]}')
@example('<tool_call>{"tool_calls": [{"name": "get_time"}, 1]}</tool_call>')
@example('<tool_call>{"tool_calls": [{"name": "get_time"}], "x": {"a": 1, "a": 2}}</tool_call>')
@example('<tool_call>{"tool_calls": [{"name": "get_time"}]} {"name": "search"}</tool_call>')
@example(
    '<tool_call>{"tool_calls": [{"name": "get_time", "arguments": "</tool_call>"}]}</tool_call>'
)
@example('<tool_call>{"tool_calls": [{"name": "get_time", "arguments": {"tz": "a"}]}</tool_call>')
@example('<tool_call>{"tool_calls": []}</tool_call>')
@example('<tool_call>{"name": "search", "tool_calls": [{"name": "get_time"}]}</tool_call>')
def test_a_tool_calls_wrapper_is_read_as_it_was_read_whole(text: str) -> None:
    assert_read_alike(text)


@_SETTINGS
@given(broken(python_list()))
@example('[get_weather(city="P"), get_time(tz="UTC")]')
@example('[get_weather(city="P"), get_time(tz="UTC"),]')
@example("[get_time(tz='a', tz='b')]")
@example('<|python_start|>[get_weather(city="P"), x]<|python_end|>')
def test_a_python_list_is_read_as_it_was_read_whole(text: str) -> None:
    assert_read_alike(text)


@pytest.mark.parametrize("count", [C._HELD - 1, C._HELD, C._HELD + 1, 3 * C._HELD])
@pytest.mark.parametrize("bad", [None, 0, -1, "twice"])
def test_a_list_longer_than_its_check_keeps_is_read_as_it_was_read_whole(
    count: int, bad: int | str | None
) -> None:
    """Lists around :data:`~react_engine.parsing.calls._HELD` elements: the elements past
    those the check keeps are read again (JSON) or unpacked (Python); one call to an
    unknown tool refuses them all (a Hermes block drops that one only, as it always did)."""
    json_calls = [f'{{"name": "get_time", "arguments": {{"tz": "{i}"}}}}' for i in range(count)]
    py_calls = [f'get_time(tz="{i}")' for i in range(count)]
    if bad == "twice":  # the last call gives a key two values: it is marked, not run
        json_calls[-1] = '{"name": "get_time", "arguments": {"tz": "a", "tz": "b"}}'
        py_calls[-1] = 'get_time(tz="a", tz="b")'
    elif bad is not None:
        json_calls[bad] = '{"name": "rm", "arguments": {}}'
        py_calls[bad] = "rm()"
    for text in (
        '{"tool_calls": [' + ", ".join(json_calls) + "]}",
        '<tool_call>\n{"tool_calls": [' + ", ".join(json_calls) + "]}\n</tool_call>",
        "[" + ", ".join(py_calls) + "]",
        "<|python_start|>[" + ", ".join(py_calls) + "]<|python_end|>",
    ):
        assert_read_alike(text)
        found = read_salvaged(text, NAMES)
        expected = [{"tz": str(i)} for i in range(count)] if bad in (None, "twice") else []
        if isinstance(bad, int) and text.startswith("<tool_call>"):  # a Hermes block
            expected = [{"tz": str(i)} for i in range(count)]  # keeps its known tools' calls
            del expected[bad]
        if bad == "twice":
            expected[-1] = {"tz": "b"}
            assert found.calls[-1].repairs == ["duplicate_key"]
        assert [c.arguments for c in found.calls] == expected


@pytest.mark.parametrize("fence", ["", "```json\n"])
@pytest.mark.parametrize(
    "text",
    [
        '{"tool_calls": [{"name": "get_time", "arguments": {"tz": "%d"}}]}',
        '<tool_call>{"tool_calls": [{"name": "get_time", "arguments": {"tz": "%d"}}]}</tool_call>',
    ],
    ids=["whole", "hermes"],
)
def test_the_calls_of_one_json_object_keep_their_written_order(text: str, fence: str) -> None:
    """They share the object's extent: each after the first spans no text. Such calls were
    put before the others already at their position (the third and later came out in
    reverse), and a fenced reply's last one, which spans the closing fence, was dropped."""
    one = '{"name": "get_time", "arguments": {"tz": "%d"}}'
    listed = ", ".join(one % i for i in range(5))
    reply = text.replace(one, "%s") % listed
    reply = fence + reply + ("\n```" if fence else "")
    found = read_salvaged(reply, NAMES)
    assert [c.arguments for c in found.calls] == [{"tz": str(i)} for i in range(5)]
    assert found.count == 5
    assert not strip_salvaged(reply, found).strip("`")
