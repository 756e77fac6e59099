"""A reply, read: the :data:`Decision` a protocol returns, and the calls in it.

Imports nothing of the seam, the policy or the parsers, so both can use it and importing the
seam stays light. A call is :class:`react_engine.types.PendingCall`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..types import PendingCall
from ..wording import Notice

__all__ = ["CallTools", "Decision", "FinalAnswer", "FormatError", "MultiAction"]

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
