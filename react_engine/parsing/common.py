"""What the ReAct parser and the salvage both read, read one way: think blocks, code fences
and call objects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from ..errors import JSONRepairError
from ..types import PendingCall, to_jsonable
from . import patterns as P
from .duplicates import decode
from .json_decoder import Repairs, decode_value
from .patterns import run_end

__all__ = [
    "NOT_OBJECT",
    "ThinkBlock",
    "call_objects",
    "fence_body",
    "json_text",
    "think_blocks",
    "unfence",
    "written_value",
]


@dataclass(frozen=True, slots=True)
class ThinkBlock:
    """One think block: ``text[start:end]``, its content ``text[content_start:content_end]``."""

    start: int
    content_start: int
    content_end: int
    end: int
    opened: bool
    """Whether its opening tag is in the text (not when begun in the prompt, as Qwen3's)."""
    closed: bool
    """Whether its closing tag is in the text (else the block runs to the end)."""


def think_blocks(text: str) -> Iterator[ThinkBlock]:
    """The think blocks of ``text`` in order. Tags do not nest (an opening tag inside a
    block is its text), and a stray closing tag counts only before any block."""
    opening: int | None = None
    content_start = 0
    found = False
    for tag in P.THINK_TAG.finditer(text):
        if not tag.group("close"):
            if opening is None:
                opening, content_start = tag.start(), tag.end()
        elif opening is not None:
            yield ThinkBlock(opening, content_start, tag.start(), tag.end(), True, True)
            opening, found = None, True
        elif not found:
            yield ThinkBlock(0, 0, tag.start(), tag.end(), False, True)
            found = True
    if opening is not None:
        yield ThinkBlock(opening, content_start, len(text), len(text), True, False)


def fence_body(s: str, fence: re.Match[str], hi: int) -> tuple[int, int, int]:
    """For a fence opened by ``fence``: where its content starts and ends, and where the
    closing fence ends (``hi`` when it is never closed)."""
    start = fence.end()
    eol = s.find("\n", start, hi)
    if eol >= 0 and not s[start:eol].strip():
        start = eol + 1
    marker = fence.group("fence")
    close = fence_close(s, start, hi, marker)
    if close < 0:
        return start, hi, hi
    return start, close, close + len(marker)


def fence_close(s: str, start: int, hi: int, marker: str) -> int:
    """Where the ``marker`` closing a block whose content starts at ``start`` is (-1: never).
    For JSON content, the first fence after the complete value closes it, so a fence inside a
    JSON string does not."""
    first = s.find(marker, start, hi)
    if first < 0:
        return -1
    lo = run_end(P.JSON_WS, s, start, hi)
    if lo >= first or s[lo] not in "{[":
        return first
    try:  # where the complete value (repaired, not cut off) ends
        end = decode(s if hi == len(s) else s[:hi], lo)[1]
    except (ValueError, RecursionError):
        try:
            end = decode_value(s, lo, hi, Repairs(allow_truncated=False), allow_bare=False)[1]
        except JSONRepairError:
            return first
    after = run_end(P.JSON_WS, s, end, hi)
    return after if end > first and s.startswith(marker, after, hi) else first


def unfence(text: str) -> tuple[str, str] | None:
    """The content of the code fence ``text`` starts with and the text after its closing fence
    (``""`` when never closed); ``None`` when ``text`` does not start with a fence."""
    fence = P.FENCE_OPEN.match(text)
    if fence is None:
        return None
    start, close, tail = fence_body(text, fence, len(text))
    return text[start:close], text[tail:]


_NAME_KEYS: Final = ("action", "toolname", "tool", "name", "function", "functionname", "actionname")
_ARGS_WORDS: Final = (
    "actioninput arguments parameters args input toolinput params inputs actioninputs kwargs"
    " toolarguments toolargs toolparameters toolparams toolinputs functionarguments functionargs"
    " functionparameters functionparams functioninput actionarguments actionargs"
    " actionparameters actionparams"
)
_ARGS_KEYS: Final = tuple(_ARGS_WORDS.split())
_CALL_META_KEYS: Final = frozenset({"id", "type", "index", "callid", "toolcallid", "observation"})
"""Keys of a call object that are neither its name nor its arguments."""
_THOUGHT_KEYS: Final = ("thought", "thoughts", "reasoning")


NOT_OBJECT: Final = "action_input_not_object"
"""The repair of a call object whose arguments are JSON but no object nor text (a list,
a number...): :func:`call_objects` keeps them as their JSON text."""


def _call(tool: str, arguments: Any, given: str | None, thought: str | None) -> PendingCall:
    """One call read from a JSON value, its arguments as written (see :func:`call_objects`)."""
    repairs = ["missing_action_input"] if given is None else [given] if given else []
    if arguments is None:
        arguments, raw = {}, "null"
    elif isinstance(arguments, dict | str):
        raw = "" if isinstance(arguments, dict) else arguments
    else:
        arguments = raw = json_text(arguments)
        repairs.append(NOT_OBJECT)
    return PendingCall(None, tool, arguments, raw, repairs=repairs, thought=thought)


_JSON: Final = json.JSONEncoder(ensure_ascii=False)  # json.dumps(ensure_ascii=False), made once


def json_text(value: Any) -> str:
    """``value`` as JSON text; one nested too deep for ``json.dumps`` (JSON decodes deeper
    than it encodes) as an encoding cut at a safe depth."""
    try:
        return _JSON.encode(value)
    except (RecursionError, ValueError):
        return _JSON.encode(to_jsonable(value))


def written_value(call: PendingCall) -> Any:
    """The arguments of a call from :func:`call_objects` as the JSON value written: ``None``
    when none were given, a list or number as such (not as its :data:`NOT_OBJECT` text)."""
    if isinstance(call.arguments, dict):
        return None if call.raw_arguments == "null" else call.arguments
    if NOT_OBJECT in call.repairs:
        return json.loads(call.arguments)
    return call.arguments


def call_objects(value: Any, *, name_alone: bool = False) -> list[PendingCall] | None:
    """The tool calls ``value`` (a decoded JSON object or array) holds, or ``None`` when it
    is not a call (a list is calls only when every element is).

    Keys are matched in any spelling of :data:`_NAME_KEYS` / :data:`_ARGS_KEYS`; OpenAI's
    wrappers are unwrapped. With no arguments key the other keys are the arguments
    (``flat_arguments``); ``{"name": ...}`` alone is data unless ``name_alone``. A non-object
    argument value is kept as its text with :data:`NOT_OBJECT` (:func:`written_value`)."""
    if isinstance(value, list):
        each = [
            call_objects(e, name_alone=name_alone) if isinstance(e, dict) else None for e in value
        ]
        if None in each:
            return None
        return [call for calls in each if calls for call in calls] or None
    if not isinstance(value, dict):
        return None
    keys = {P.normalise_word(str(k)): k for k in value}
    if "toolcalls" in keys and isinstance(value[keys["toolcalls"]], list):
        return call_objects(value[keys["toolcalls"]], name_alone=name_alone)
    thought_key = next((k for k in _THOUGHT_KEYS if isinstance(value.get(keys.get(k)), str)), None)
    thought = (value[keys[thought_key]].strip() or None) if thought_key else None
    fn = value[keys["function"]] if "function" in keys else None
    if isinstance(fn, dict):
        inner = call_objects(fn, name_alone=name_alone)
        if not inner:
            return None
        for call in inner:
            call.thought = thought
        return inner
    name_key = next((k for k in _NAME_KEYS if k in keys and isinstance(value[keys[k]], str)), None)
    if name_key is None or not value[keys[name_key]].strip():
        return None
    args_key = next((k for k in _ARGS_KEYS if k in keys), None)
    if args_key is None and name_key == "name" and not name_alone:
        return None  # {"name": ...} alone is data, not a call
    tool = value[keys[name_key]].strip()
    if args_key is not None:
        return [_call(tool, value[keys[args_key]], "", thought)]
    # No arguments key: any other keys are the arguments, never dropped (a key the tool
    # does not take fails its validation, and the model is told which)
    flat = {
        keys[k]: value[keys[k]]
        for k in keys
        if k != name_key and k != thought_key and k not in _CALL_META_KEYS
    }
    if flat:
        return [_call(tool, flat, "flat_arguments", thought)]
    return [_call(tool, None, None, thought)]
