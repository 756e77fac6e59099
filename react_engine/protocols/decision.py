"""A reply, read: the :data:`Decision` a protocol returns, and the calls in it.

Imports nothing of the seam or the policy, so both can use it; every name here is also
importable from :mod:`react_engine.protocols.base`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..nesting import TOO_DEEP, exceeds_depth
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
"""Which of a reply's several calls run: ``"independent"`` the read-only ones and the first
other one, ``"first"`` the first only, ``"all"`` every one (never a blind one)."""


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
    """What the reply was, in a few words for the run's error message, should it be the last."""
    plain: str | None = None
    """A reply in no format at all, as the answer it would be (taken as the answer when it
    comes again after a reminder)."""


Decision = CallTools | FinalAnswer | FormatError
"""A reply, read by a protocol: exactly one of calls, a final answer, or a format error."""


def arguments_json(arguments: dict[str, Any] | str, raw: str, *, exact: bool = False) -> str:
    """The JSON object text of a call's arguments, for native ``tool_calls`` messages:
    ``raw`` as it is when ``exact`` or itself a JSON object, else encoded (text as
    ``{"input": text}``)."""
    if isinstance(arguments, dict):
        return raw if exact else json.dumps(arguments, ensure_ascii=False)
    if json_object(raw) is not None:
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


def parsed_arguments_error(args: dict[str, Any] | str, repairs: Sequence[str]) -> Notice | None:
    """Why a parsed action must not run, or None: input that starts like JSON but could not
    be decoded must never reach a tool as plain text."""
    if (
        "action_input_not_json" in repairs
        and isinstance(args, str)
        and args.lstrip()[:1] in ("{", "[")
    ):
        return NOT_JSON
    return None


def close_input(call: PendingCall, finish_reason: str | None) -> None:
    """The closing-bracket rule for an Action Input the parser kept as text with brackets
    still open: in a reply not cut by length, brackets open right after a complete value
    have one completion (``json:missing_closing_bracket``); anything else stays refused."""
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
    """Refuse arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH`, keeping the raw text
    (which rendering and the trace handle at any depth)."""
    if call.error is None and isinstance(call.arguments, dict) and exceeds_depth(call.arguments):
        call.error = TOO_DEEP
        call.arguments, call.exact = call.raw_arguments, False
