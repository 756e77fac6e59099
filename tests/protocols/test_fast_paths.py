"""The engine's shortcuts on the path of every LLM call give what the long way gives.

Each shortcut here saves work on the usual reply (issue 25, part 4: the engine's own CPU per
call) and is checked against the long way it replaces, on every golden reply of the parser,
the salvage reader and the recorded runs: the same decision, the same calls, the same
errors. A second test per shortcut counts the work it saves, so that it cannot silently go.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from support.native_formats import context

from react_engine import Capabilities, FunctionCallingProtocol, TextReActProtocol, Tool
from react_engine.errors import ReActParseError, TemplateError
from react_engine.parsing import parse_react
from react_engine.parsing import salvage as SV
from react_engine.protocols import function_calling as FC
from react_engine.protocols import prompts as P
from react_engine.protocols import text as T
from react_engine.protocols.base import RequestContext
from react_engine.protocols.decision import CallTools, FormatError
from react_engine.protocols.limits import READ_LIMIT
from react_engine.protocols.policy import new_call_id
from react_engine.protocols.prompts import PromptTemplate
from react_engine.protocols.shared import guard_depth, parsed_arguments_error
from react_engine.types import ParsedStep

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _corpus() -> list[str]:
    """Every golden reply text: the parser's, the salvage reader's, the recorded runs'."""
    texts = [p.read_bytes().decode("utf-8") for p in sorted(FIXTURES.glob("parser/*.txt"))]
    texts += [p.read_bytes().decode("utf-8") for p in sorted(FIXTURES.glob("salvage/*.txt"))]
    for path in sorted(FIXTURES.glob("recorded/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        texts.extend(_contents(data))
    return texts


def _contents(value: Any) -> list[str]:
    """The ``content`` strings anywhere in a recorded file."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            content = item.get("content")
            if isinstance(content, str) and content:
                found.append(content)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


CORPUS = _corpus()
BLOB = (
    'Thought: I need the weather.\nAction:\n```json\n{"action": "get_weather", '
    '"action_input": {"city": "Paris"}}\n```'
)


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) > 400


# --- the text protocol's native-call reading ------------------------------------------------


def _native_long_way(
    protocol: TextReActProtocol, raw: str, parsed: ParsedStep | None, ctx: RequestContext
) -> Any:
    """``TextReActProtocol._native`` as it was: every reply read without the fenced
    examples, then a blob's reply that gave nothing read again with them."""
    if ctx.force_final or not ctx.tools or not T._MAY_HOLD_CALL.search(raw):
        return None
    labeled = parsed is not None and (parsed.actions or parsed.final_answer is not None)
    if labeled and parsed is not None and not T._UNLABELED.intersection(parsed.repairs):
        return None
    found = SV.read_salvaged(
        raw,
        ctx.tool_names(),
        limit=READ_LIMIT,
        schemas={t.name: t.parameters for t in ctx.tools},
        prefer=ctx.capabilities.call_format or None,
    )
    if not found.calls:
        blob = parsed is not None and parsed.actions and "json_blob" in parsed.repairs
        if blob and found.withheld is not None:  # a refusal that says why: the protocol's
            return protocol._native(raw, parsed, ctx)  # wording (the reading is the same)
        if blob and SV.read_salvaged(raw, ctx.tool_names(), examples=True).calls:
            return protocol._format_error(raw.strip() or None, T._EXAMPLE_ONLY)
        return None
    with mock.patch.object(T, "read_salvaged", lambda *_a, **_k: found):
        return protocol._native(raw, parsed, ctx)  # the same from here on


def _parsed(protocol: TextReActProtocol, raw: str) -> ParsedStep | None:
    try:
        return parse_react(raw, multi_action=True, stop_words=protocol.template.stop)
    except ReActParseError:
        return None


@pytest.mark.parametrize("call_format", ["", "hermes", "json"])
def test_native_reading_is_the_long_way_on_every_golden_reply(call_format: str) -> None:
    protocol = TextReActProtocol()
    ctx = context(call_format)
    blobs = examples = calls = 0
    for raw in CORPUS:
        parsed = _parsed(protocol, raw)
        for given in (parsed, None):
            fast = protocol._native(raw, given, ctx)
            slow = _native_long_way(protocol, raw, given, ctx)
            assert fast == slow, raw
            blobs += given is not None and "json_blob" in given.repairs
            examples += isinstance(fast, FormatError)
            calls += isinstance(fast, CallTools)
    # The corpus holds each case: blob replies, fenced examples only, salvaged calls.
    assert blobs > 20 and examples > 0 and calls > 50


def test_a_blob_reply_with_no_written_call_is_read_once() -> None:
    protocol = TextReActProtocol()
    ctx = context()
    parsed = _parsed(protocol, BLOB)
    assert parsed is not None and "json_blob" in parsed.repairs
    reader = mock.Mock(wraps=SV.read_salvaged)
    with (
        mock.patch.object(T, "read_salvaged", reader),
        mock.patch.object(SV, "read_salvaged", reader),
    ):
        assert protocol._native(BLOB, parsed, ctx) is None
    assert reader.call_count == 1


# --- call ids ---------------------------------------------------------------------------------


def test_generated_call_ids_are_what_uuid4_gave() -> None:
    """``"call_"`` and the first 24 hex digits of a UUID4: its version nibble and variant
    bits in place, the rest random."""
    ids = [new_call_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for call_id in ids:
        assert re.fullmatch(r"call_[0-9a-f]{24}", call_id)
        value = uuid.UUID(hex=call_id[5:] + "0" * 8)
        assert value.version == 4 and value.variant == uuid.RFC_4122
    # every other digit takes every value
    for position in (0, 11, 13, 15, 17, 23):
        assert len({call_id[5 + position] for call_id in ids}) == 16
    assert {call_id[5 + 16] for call_id in ids} == set("89ab")


def test_a_call_id_is_made_without_a_uuid_object() -> None:
    with mock.patch.object(uuid, "uuid4", side_effect=AssertionError("uuid4 called")):
        assert new_call_id().startswith("call_")


# --- function calling: a Thought/Action block written as text -----------------------------------


def _parsed_tools(text: str, **kwargs: Any) -> list[str]:
    try:
        return [a.tool for a in parse_react(text, **kwargs).actions]
    except ReActParseError:
        return []


def test_the_parser_takes_a_tool_name_as_written() -> None:
    """What the shortcut stands on: in a reply with no backslash, every tool name the
    parser reads is written in it as it is."""
    read = 0
    for text in CORPUS:
        if "\\" in text:
            continue
        for kwargs in ({}, {"stop_words": ["\nObservation:"], "multi_action": True}):
            for tool in _parsed_tools(text, **kwargs):
                assert tool in text, (tool, text)
                read += 1
    assert read > 300


def _salvage_long_way(protocol: FunctionCallingProtocol, text: str, ctx: RequestContext) -> Any:
    """``FunctionCallingProtocol._salvage`` as it was: every reply with no call in a
    family's format read by the parser."""
    names = ctx.tool_names()
    if SV.read_salvaged(text, names).calls:
        return protocol._salvage(text, ctx)  # the same: the parser is not asked
    try:
        parsed = parse_react(text, tools=names)
    except ReActParseError:
        return None
    if not parsed.actions or not all(a.tool in names for a in parsed.actions):
        return None
    return _salvage_forced(protocol, text, ctx, parsed)


def _salvage_forced(
    protocol: FunctionCallingProtocol, text: str, ctx: RequestContext, parsed: ParsedStep
) -> Any:
    """The rest of ``_salvage`` for a reply the parser read calls to known tools from."""
    names = ctx.tool_names()
    if "json_blob" in parsed.repairs and SV.read_salvaged(text, names, examples=True).calls:
        return None
    calls = parsed.actions
    for call in calls:
        call.error = call.error or parsed_arguments_error(call.arguments, parsed.repairs)
        call.salvaged = True
        call.repairs = ["salvaged:react_text", *call.repairs]
        guard_depth(call)
    return CallTools(
        text=parsed.thought,
        thought=parsed.thought,
        calls=calls,
        repairs=[*parsed.repairs, "salvaged:react_text"],
    )


def test_salvage_is_the_long_way_on_every_golden_reply() -> None:
    protocol = FunctionCallingProtocol()
    taken = 0
    for text in CORPUS:
        tools = {t for t in _parsed_tools(text) if t and t.isidentifier()}
        for names in (["get_weather", "get_time", "search"], sorted(tools)):
            ctx = RequestContext("m", [], _tools(names), "auto", Capabilities())
            fast = protocol._salvage(text, ctx)
            slow = _salvage_long_way(protocol, text, ctx)
            assert fast == slow, text
            taken += isinstance(fast, CallTools) and "salvaged:react_text" in fast.repairs
    assert taken > 50


def test_an_answer_naming_no_tool_is_not_parsed_for_calls() -> None:
    protocol = FunctionCallingProtocol()
    ctx = RequestContext("m", [], _tools(["get_weather"]), "auto", Capabilities())
    answer = "Beijing is sunny, 24°C; Guangzhou is rainy (29°C)."
    with mock.patch.object(FC, "parse_react", side_effect=AssertionError("parsed")):
        assert protocol._salvage(answer, ctx) is None
    named = "Thought: weather\nAction: get_weather\nAction Input: {}"
    decision = protocol._salvage(named, ctx)
    assert isinstance(decision, CallTools) and decision.calls[0].tool == "get_weather"


def _tools(names: list[str]) -> list[Tool]:
    return [
        Tool.from_schema(n, {"type": "object", "properties": {}}, lambda a: "ok") for n in names
    ]


# --- prompt templates: filling a text -------------------------------------------------------------


def _fill_long_way(template: PromptTemplate, key: str, values: dict[str, Any]) -> str:
    text = template.texts[key]
    used = P._fields(text, template.name, key)
    missing = sorted(used - set(values))
    if missing:
        raise TemplateError(
            f"template {template.name!r}: {key!r} needs a value for {', '.join(missing)}",
            template=template.name,
        )
    return text.format(**{k: v for k, v in values.items() if k in used})


def _filled(fill: Any, *args: Any) -> Any:
    try:
        return fill(*args)
    except TemplateError as exc:
        return ("error", str(exc))


def test_fill_is_the_long_way_for_every_shipped_text() -> None:
    """Each text of each shipped template, with exactly its values, with one more, with
    one fewer: the same text, or the same error."""
    cases = 0
    for name in P.list_templates():
        template = P.load_template(name)
        for key, text in template.texts.items():
            used = sorted(P._fields(text, name, key))
            exact = {f: f"<{f} {{x}}>" for f in used}
            for values in (exact, {**exact, "unused": "u"}, dict(list(exact.items())[1:])):
                fast = _filled(_fill, template, key, values)
                slow = _filled(_fill_long_way, template, key, values)
                assert fast == slow, (name, key, values)
                cases += 1
    assert cases > 100


def _fill(template: PromptTemplate, key: str, values: dict[str, Any]) -> str:
    return template.fill(key, **values)


# --- encoders made once, and the depth check of flat arguments ------------------------------------


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _Str(str):
    pass


VALUES: list[Any] = [
    {},
    {"location": "Beijing"},
    {"a": 1, "b": 2.5, "c": True, "d": None, "e": "é", "z": -0.0},
    {"b": 1, "a": {"c": [1, 2]}},
    {"a": float("inf"), "n": float("nan")},
    {"a": _Str("x")},
    _Dict(a=1),
    {"a": (1, 2)},
    {"a": {1, 2}, "b": b"bytes"},
    ["x"],
    "text",
]


def test_call_keys_and_results_are_encoded_as_json_dumps_encodes_them() -> None:
    from react_engine.run import execution as E
    from react_engine.run import observations as O
    from react_engine.types import ActionRecord

    for value in VALUES:
        record = ActionRecord(id="c", tool="t", arguments=value, raw_arguments="")
        if isinstance(value, dict) and not any(isinstance(v, set | bytes) for v in value.values()):
            body = json.dumps(value, sort_keys=True, ensure_ascii=False)
            assert E._call_key(record) == f"t\x00{body}"
        expected = (
            value
            if isinstance(value, str)
            else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=O._default)
        )
        assert O.serialize_result(value) == expected


def _deep(levels: int) -> Any:
    value: Any = {"x": 1}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


def test_the_depth_check_is_the_long_way() -> None:
    from react_engine import nesting as N

    def long_way(value: Any, limit: int) -> bool:
        with mock.patch.object(N, "_FLAT", frozenset()):  # no type is flat: every walk
            return N.exceeds_depth(value, limit)

    for value in [*VALUES, _deep(1), _deep(2), _deep(100), _deep(101), [[[]]]]:
        for limit in (-1, 0, 1, 2, 100):
            assert N.exceeds_depth(value, limit) == long_way(value, limit), (value, limit)


def test_call_keys_and_results_build_no_encoder_per_call() -> None:
    from react_engine.run import execution as E
    from react_engine.run import observations as O
    from react_engine.types import ActionRecord

    record = ActionRecord(id="c", tool="t", arguments={"b": 1, "a": "é"}, raw_arguments="")
    with mock.patch.object(json, "dumps", side_effect=AssertionError("json.dumps")):
        assert E._call_key(record) == 't\x00{"a": "é", "b": 1}'
        assert O.serialize_result({"b": [1, 2], "a": None}) == '{"b":[1,2],"a":null}'


def _detectors_long_way(text: str, prefer: str | None) -> list[Any]:
    present = [
        fmt
        for fmt in SV.FORMATS.values()
        if fmt.read is not None and any(marker in text for marker in fmt.markers or ("",))
    ]
    present.sort(key=lambda fmt: (prefer not in fmt.prefer, fmt.last))
    return [fmt.read for fmt in present]


def test_the_recognisers_asked_are_the_long_way_on_every_golden_reply() -> None:
    asked = 0
    for text in [*CORPUS, "<|tool_call_begin|>", "a < b", "tool▁call", "[TOOL_CALLS]", ">>>"]:
        for prefer in (None, "hermes", "json", "deepseek"):
            fast = SV._detectors(text, prefer)
            assert fast == _detectors_long_way(text, prefer), text
            asked += len(fast)
    assert asked > 1000
