"""What an action is given: an Action Input read as JSON or text, ``key=value`` pairs, and
tool-call blobs (JSON or native markup, several chained with ``;``), each call an :class:`Item`."""

from __future__ import annotations

import heapq
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import JSONRepairError, ReactEngineError
from ..types import PendingCall
from ..wording import Notice
from . import patterns as P
from .common import NOT_OBJECT, call_objects, json_text, unfence, written_value
from .duplicates import CHECKED, KeyWrittenTwice, decode
from .json_repair import RepairResult, decode_prefix, repair_json
from .labels import MAX_LABELS
from .patterns import run_end

__all__ = [
    "BLOB_CHARS",
    "FINISH_NAMES",
    "BrokenChain",
    "Item",
    "answer_text",
    "call_args",
    "is_finish",
    "read_blob",
    "read_blobs",
    "read_input",
    "search_blobs",
]

FINISH_NAMES: Final = frozenset(
    {"finish", "final", "finalanswer", "finalresponse", "answer", "最终答案", "最终回答"}
)

BLOB_CHARS: Final = "{[<`~"
"""A tool-call blob candidate in prose needs one of these (a bracket, a tag, a fence)."""
_MAX_BLOB_CANDIDATES: Final = 16

MAX_KWARGS: Final = 256
"""``key=value`` pairs read in ``tool(...)``; with more, the input stays text."""


def is_finish(tool: str) -> bool:
    """Whether an action named ``tool`` is the final answer (``Finish``, ``final_answer``)."""
    return P.normalise_word(tool) in FINISH_NAMES


def answer_text(value: Any) -> str:
    """The final answer a finish action's input gives."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict) and len(value) == 1:  # {"answer": ...}
        (value,) = value.values()
        return value.strip() if isinstance(value, str) else json_text(value)
    return json_text(value) if value else ""


@dataclass(slots=True)
class Item:
    """An action or a final answer found in the reply, at ``pos``."""

    pos: int
    tool: str | None = None
    args: dict[str, Any] | str = field(default_factory=dict)
    raw_input: str = ""
    has_input: bool = False
    final: str | None = None
    thought: str | None = None
    codes: list[str] = field(default_factory=list)
    inline: bool = False  # its input was written with the Action (``tool(...)``, ``tool[...]``)
    error: Notice | None = None  # why it must not run (two different inputs)


class BrokenChain(ReactEngineError):
    """A call chained with ``;`` that cannot be read, at ``pos`` (never leaves the parser)."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def read_input(raw: str) -> tuple[dict[str, Any] | str, list[str]]:
    """Arguments from an Action Input: a JSON object, or the text itself."""
    text = raw.strip()
    codes: list[str] = []
    if not text:
        return {}, ["empty_action_input"]
    if text.startswith(("```", "~~~")):
        inner, after = unfence(text) or (text, "")
        codes.append("fenced_json")
        if after.strip():
            codes.append("text_after_input")
        text = inner.strip()
        if not text:
            return {}, [*codes, "empty_action_input"]
    elif len(text) > 1 and text[0] == "`" and text[-1] == "`" and "`" not in text[1:-1]:
        codes.append("backtick_input")
        text = text[1:-1].strip()
    if text[:1] in ("{", "["):
        try:
            value = CHECKED.decode(text)
        except (ValueError, RecursionError, KeyWrittenTwice):
            try:
                # sloppy JSON is repaired (a key given two values: json:duplicate_key);
                # cut-off JSON is not closed (it would invent)
                result = repair_json(text, allow_truncated=False)
            except JSONRepairError:
                return text, [*codes, "action_input_not_json"]
            value = result.value
            codes.extend("json:" + c for c in result.repairs)
        return (value if isinstance(value, dict) else _as_args(value, text, codes)), codes
    unquoted = _unquote(text)
    if unquoted is None:  # a string opened and never closed as one is cut or broken
        if text[:1] in '"“':
            return text, [*codes, "action_input_not_json"]
        wrapped = P.WRAPPED_INPUT.fullmatch(text)  # ToolInput(query="x")
        if wrapped is not None and (inner := wrapped.group("inner").strip()):
            args = call_args(inner, more := [*codes, "wrapped_input"])
            if isinstance(args, dict):
                return args, more
        return text, codes
    codes.append("quoted_input")
    if unquoted.lstrip()[:1] == "{":  # a JSON object sent as a JSON string
        try:
            value, _, twice = decode(unquoted)
        except (ValueError, RecursionError):
            return unquoted, codes
        return value, [*codes, "json_string_arguments", *(["json:duplicate_key"] if twice else [])]
    return unquoted, codes


def _unquote(text: str) -> str | None:
    """The string inside ``"..."`` or ``'...'`` when that is all the text is."""
    if len(text) < 2 or text[0] != text[-1] or text[0] not in "\"'":
        return None
    if text[0] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    return text[1:-1] if "'" not in text[1:-1] else None


def _as_args(value: Any, text: str, codes: list[str]) -> dict[str, Any] | str:
    """Arguments that are JSON but not an object: ``[{...}]`` unwrapped, else the text."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        codes.append("unwrapped_array")
        return value[0]
    codes.append("action_input_not_object")
    return text


def _blob_args(value: Any, codes: list[str]) -> dict[str, Any] | str:
    """Arguments as a JSON blob gives them: an object, a JSON string, text or nothing."""
    if value is None:
        return {}
    if isinstance(value, str):
        if value.strip()[:1] != "{":
            return value
        try:
            # "{..." decodes to an object or fails; cut-off JSON is not closed
            parsed = repair_json(value.strip(), allow_truncated=False)
        except JSONRepairError:
            codes.append("action_input_not_json")
            return value
        codes.append("json_string_arguments")
        codes.extend("json:" + c for c in parsed.repairs)
        decoded: dict[str, Any] = parsed.value
        return decoded
    if isinstance(value, dict):  # the usual case: no text needed, no code
        return value
    return _as_args(value, json_text(value), codes)


def call_args(inner: str, codes: list[str]) -> dict[str, Any] | str:
    """Arguments of ``tool(...)``: JSON, ``key=value`` pairs, a quoted string or text."""
    kwargs = _kwargs(inner, codes) if inner[0] not in "{[" else None
    if kwargs is not None:
        return kwargs
    args, more = read_input(inner)
    codes.extend(more)
    return args


def _kwargs(text: str, codes: list[str]) -> dict[str, Any] | None:
    """``key="v", n=2`` as a dict, or None: values decoded as JSON (repairs join ``codes``),
    one that is no JSON at all (``path=/srv/x``) kept as text (``json:unquoted_value``)."""
    out: dict[str, Any] = {}
    found: list[str] = []
    pos = 0
    for _ in range(MAX_KWARGS):
        m = P.KWARG.match(text, pos)
        if m is None:
            return None
        value = m.group("value").strip()
        try:
            result = repair_json(value, allow_truncated=False) if value else RepairResult("")
        except JSONRepairError:
            result = RepairResult(value, ("unquoted_value",))
        out[m.group("key")] = result.value
        found.extend("json:" + c for c in result.repairs)
        pos = m.end()
        if pos >= len(text):
            codes.extend(c for c in dict.fromkeys(found) if c not in codes)
            return out
        sep = P.KWARG_SEP.match(text, pos)
        if sep is None:
            return None
        if text[pos] == "，":
            found.append("json:fullwidth_delimiter")
        pos = sep.end()
    return None


def read_blob(text: str, pos: int) -> tuple[list[Item], int] | None:
    """The tool calls of a blob at ``pos`` and where it ends, or None. A blob cut off keeps
    its text as each call's input (``action_input_not_json``): closing it would invent."""
    codes: list[str] = ["json_blob"]
    fname: str | None = None
    json_at = -1  # where the JSON itself starts, when not the fenced inner text
    inner = ""
    tag = P.TOOL_CALL_TAG.match(text, pos)
    if tag is not None:
        codes.append("tool_call_tag")
        fname = tag.group("fname")
        start = json_at = run_end(P.JSON_WS, text, tag.end(), len(text))
        closing = P.TOOL_CALL_CLOSE.search(text, start)
        if closing is not None:
            value, _, cut = _json(text[start : closing.start()], 0, codes, whole=True)
            end = closing.end()
        else:
            value, end, cut = _json(text, start, codes)
    elif text.startswith(("```", "~~~"), pos):
        inner, after = unfence(text[pos:]) or (text[pos:], "")
        end = len(text) - len(after)
        codes.append("fenced_json")
        value, _, cut = _json(inner, 0, codes, whole=True)
        if "json:extra_value" in codes:  # {call}; {call} in the fence: every one of them
            chain = _fenced_chain(inner.strip())
            if chain:
                return chain, end
    else:
        json_at = pos
        value, end, cut = _json(text, pos, codes)
    if value is None:
        return None
    if fname is not None:
        value = {"name": fname, "arguments": value}
    calls = call_objects(value)
    if calls is None:
        return None
    kept = (text[json_at:end] if json_at >= 0 else inner).strip() if cut else None
    return [_blob_item(call, pos, codes, kept) for call in calls], end


def _blob_item(call: PendingCall, pos: int, codes: list[str], cut: str | None) -> Item:
    """The item of one call of a blob (at ``pos``), ``cut``: the JSON text of a blob cut off."""
    item = Item(pos, tool=call.tool, has_input=True, thought=call.thought, codes=list(codes))
    args = written_value(call)
    if is_finish(call.tool):
        item.final = answer_text(args)
        item.codes.append("final_as_action")
    elif cut is not None:
        item.args = item.raw_input = cut
        item.codes.append("action_input_not_json")
    else:
        item.args = _blob_args(args, item.codes)
        item.raw_input = args if isinstance(args, str) else json_text(args)
        item.codes.extend(code for code in call.repairs if code != NOT_OBJECT)
    return item


def _json(text: str, pos: int, codes: list[str], whole: bool = False) -> tuple[Any, int, bool]:
    """The JSON value at ``pos`` (repaired; with ``whole``, all of ``text``), where it ends,
    and whether it was cut off; the value is None when there is none."""
    if whole:
        text, pos = text.strip(), 0
    if text[pos : pos + 1] not in ("{", "["):
        return None, pos, False
    for cut in (False, True):
        try:
            if whole:
                result = repair_json(text, allow_truncated=cut)
                value, end, repairs = result.value, len(text), result.repairs
            else:
                value, end, repairs = decode_prefix(text, pos, allow_truncated=cut)
        except JSONRepairError:
            continue
        codes.extend("json:" + c for c in repairs)
        return value, end, cut
    return None, pos, False


def search_blobs(text: str) -> list[tuple[int, int, list[Item]]]:
    """The tool-call blobs in prose, in order; gives up after ``_MAX_BLOB_CANDIDATES``
    failures and stops at :data:`MAX_LABELS` calls."""
    candidates = heapq.merge(
        (m.start() for m in P.TOOL_CALL_TAG.finditer(text)),
        (m.start() for m in P.FENCE_LINE.finditer(text)),
        (m.end() for m in P.BLOB_START.finditer(text)),
    )
    found: list[tuple[int, int, list[Item]]] = []
    resume = failures = read = 0
    for start in candidates:
        if read >= MAX_LABELS:
            break
        if start < resume:
            continue
        chain = read_blobs(text, run_end(P.JSON_WS, text, start, len(text)))
        if not chain:
            failures += 1
            if failures >= _MAX_BLOB_CANDIDATES:
                break
            resume = start + 1
            continue
        for one in chain:
            found.append(one)
            read += len(one[2])
            resume = one[1]
    return found


def _fenced_chain(chunk: str) -> list[Item]:
    """The calls of a fence's content made of blobs chained with ``;`` (else none)."""
    chain = read_blobs(chunk, 0)
    if len(chain) < 2 or chunk[chain[-1][1] :].strip():
        return []
    items = [item for _, _, found in chain for item in found]
    for item in items:
        item.codes.append("fenced_json")
    return items


_CHAIN: Final = re.compile(r"[ \t]*;\s*(?=[\[{<])")
"""A ``;`` between two chained calls (Llama 3.1 writes ``{call}; {call}``)."""


def read_blobs(text: str, pos: int) -> list[tuple[int, int, list[Item]]]:
    """The blob at ``pos`` and those chained after it with ``;`` (start, end, calls), none
    when no blob is at ``pos``; JSON after a ``;`` that cannot be read raises
    :class:`BrokenChain`."""
    first = read_blob(text, pos)
    out = [] if first is None else [(pos, first[1], first[0])]
    while out and len(out) <= MAX_LABELS:
        m = _CHAIN.match(text, out[-1][1])
        if m is None:
            break
        blob = read_blob(text, m.end())
        if blob is None:
            if _json(text, m.end(), [])[0] is None and text[m.end()] in "{[":
                raise BrokenChain(m.end())
            break
        out.append((m.end(), blob[1], blob[0]))
    return out
