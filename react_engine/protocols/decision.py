"""A reply, read: the :data:`Decision` a protocol returns, and the calls in it
(:class:`~react_engine.types.PendingCall`, defined with the other call types in
:mod:`react_engine.types` so that the parsers below the protocols produce it too).

The vocabulary the seam (:mod:`react_engine.protocols.base`), the rules every protocol
shares (:mod:`react_engine.protocols.policy`) and the protocols speak; it depends on
nothing of theirs, so that the policy can read a decision without importing the seam that
applies it. Every name here is also importable from :mod:`react_engine.protocols.base`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..nesting import TOO_DEEP, too_deep
from ..types import PendingCall
from ..wording import Notice, NoticeCode

__all__ = [
    "NOT_JSON",
    "CallTools",
    "Decision",
    "FinalAnswer",
    "FormatError",
    "MultiAction",
    "PendingCall",
    "arguments_json",
    "close_input",
    "guard_depth",
    "json_object",
    "parsed_arguments_error",
]

MultiAction: TypeAlias = Literal["independent", "first", "all"]
"""Which of a reply's several calls run (:attr:`AgentConfig.multi_action
<react_engine.run.config.AgentConfig.multi_action>`, applied by
:mod:`react_engine.protocols.policy`): ``"independent"`` the read-only ones and the first
other one, ``"first"`` the first one only, ``"all"`` every one. In every mode a later call
whose arguments hold a placeholder (blind) is not run."""


@dataclass(slots=True, kw_only=True)
class _Reading:
    text: str | None
    """The reply as it stays in the transcript."""
    thought: str | None = None
    repairs: list[str] = field(default_factory=list)
    events: list[Notice] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class CallTools(_Reading):
    """The reply asks for tool calls (at least one)."""

    calls: list[PendingCall]


@dataclass(slots=True, kw_only=True)
class FinalAnswer(_Reading):
    """The reply is the final answer."""

    answer: str
    output: Any = None
    """The answer as the run's ``output_type``, set by the policy once it validates."""


@dataclass(slots=True, kw_only=True)
class FormatError(_Reading):
    """The reply cannot be used; ``feedback`` tells the model what to write instead."""

    feedback: str
    problem: str | None = None
    """What the reply was, in a few words for the run's error message ("a tool call written
    as text", "empty"), should it be the last one."""
    plain: str | None = None
    """The reply read as plain prose in no format at all (no label, no call): the answer it
    would be. The policy takes it as the final answer when the model, once reminded of the
    format, replies in plain prose again."""


Decision = CallTools | FinalAnswer | FormatError
"""A reply, read by a protocol: exactly one of calls, a final answer, or a format error."""


def arguments_json(arguments: dict[str, Any] | str, raw: str, *, exact: bool = False) -> str:
    """The JSON object text of a call's arguments, for native ``tool_calls`` messages.

    ``exact`` (:attr:`PendingCall.exact <react_engine.types.PendingCall.exact>`): ``raw``
    is the arguments' own JSON text, sent as it is (the model's text, byte for byte: no
    encoding again). Otherwise an object is encoded, and text becomes ``{"input": text}``
    unless ``raw`` is itself a JSON object."""
    if isinstance(arguments, dict):
        return raw if exact else json.dumps(arguments, ensure_ascii=False)
    value = json_object(raw)
    if value is not None:
        return raw
    return json.dumps({"input": arguments}, ensure_ascii=False)


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` decoded when it is one JSON object, else ``None``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


NOT_JSON = Notice(NoticeCode.NOT_JSON)
"""Why a parsed action whose input looks like JSON but is not (cut off, broken) never runs."""


def parsed_arguments_error(args: dict[str, Any] | str, repairs: Sequence[str]) -> Notice | None:
    """Why an action read by :func:`~react_engine.parsing.parse_react` must not run, or None.

    Input that starts like a JSON object or array but could not be decoded (cut off, or
    broken beyond repair) is kept as text by the parser; a tool must never receive it as
    if it were a plain-text input.
    """
    if (
        "action_input_not_json" in repairs
        and isinstance(args, str)
        and args.lstrip()[:1] in ("{", "[")
    ):
        return NOT_JSON
    return None


def close_input(call: PendingCall, finish_reason: str | None) -> None:
    """The closing-bracket rule for an Action Input :func:`~react_engine.parsing.parse_react`
    kept as text because brackets are still open at its end (the parser does not know how
    the reply ended, so it never closes them): in a reply not cut by the length limit, the
    brackets open right after a complete value have exactly one completion, and the call
    gets the object (``json:missing_closing_bracket``, lossless). Anything else missing (a
    string's end, a value, a key's value, a number that may go on) stays refused, and so
    does every input of a reply cut by length."""
    text = call.arguments
    if (
        finish_reason == "length"
        or not isinstance(text, str)
        or "action_input_not_json" not in call.repairs
        or "json_blob" in call.repairs  # the blob's whole text, not its arguments
    ):
        return
    from ..errors import JSONRepairError  # here: the parsers load with the first reply read
    from ..parsing.json_repair import repair_json

    try:
        fixed = repair_json(text, allow_truncated=False, close_brackets=True)
    except JSONRepairError:
        return
    if isinstance(fixed.value, dict):
        call.arguments = fixed.value
        kept = [c for c in call.repairs if c != "action_input_not_json"]
        call.repairs = [*kept, *(f"json:{c}" for c in fixed.repairs)]


def guard_depth(call: PendingCall) -> None:
    """Refuse arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH`: the call becomes an
    ``invalid_arguments`` observation and keeps only the raw text, which every later
    step (rendering, the trace) handles at any depth."""
    if call.error is None and isinstance(call.arguments, dict) and too_deep(call.arguments):
        call.error = TOO_DEEP
        call.arguments, call.exact = call.raw_arguments, False
