"""How much of one reply is read at all: the bound on hostile replies, checked once, at the
edge, before any reader runs.

A reply longer than :data:`MAX_REPLY_CHARS` (its text and its native calls' arguments),
or with more native calls than :data:`MAX_CALLS`, is not read: it becomes a format error
the model reads ("the reply is N characters; at most M are read"). The readers of calls
written in text take ``limit=MAX_CALLS + 1`` (:data:`READ_LIMIT`) and stop there; a reply
they find more than :data:`MAX_CALLS` calls in is refused the same way. So no reader ever
meets more than a bounded text or holds more than a bounded number of calls, and a
megabyte of tool-call markup costs the event loop one length check. A reply longer than
:data:`READ_ON_LOOP` is read on a worker thread, so that the loop's other tasks keep their
turns while the readers work through it.
"""

from __future__ import annotations

from typing import Final

from ..types import ModelResponse
from ..wording import Notice, NoticeCode

__all__ = [
    "MAX_CALLS",
    "MAX_REPLY_CHARS",
    "READ_LIMIT",
    "READ_ON_LOOP",
    "too_large",
    "too_many_calls",
]

MAX_REPLY_CHARS: Final = 100_000
"""The most characters of one reply that are read (its text plus its native calls'
arguments): about 25,000 tokens, several times what a model writes in one reply within
the usual ``max_tokens``; the largest reply of the golden corpus is far below. A hostile
reply just under it takes the readers up to about 100 ms of CPU for the worst shapes
(thousands of unclosed ``<tool_call>`` tags), off the event loop (:data:`READ_ON_LOOP`);
a megabyte is refused in one length check."""

READ_ON_LOOP: Final = 16_000
"""The longest reply (counted as for :data:`MAX_REPLY_CHARS`) read on the event loop:
at most about 15 ms of reading for the worst shapes. A longer one is read on a worker
thread (``bench/stall.py`` measures both)."""

MAX_CALLS: Final = 1024
"""The most tool calls of one reply that are read; a reply with more is refused whole."""

READ_LIMIT: Final = MAX_CALLS + 1
"""Where the readers of calls in text stop: one past :data:`MAX_CALLS`, so that a reply
with too many is told from one with exactly the most."""


def too_large(reply: ModelResponse) -> Notice | None:
    """Why ``reply`` is not read at all (too long, or too many native calls), or ``None``."""
    if len(reply.tool_calls) > MAX_CALLS:
        return too_many_calls()
    size = len(reply.content or "") + sum(len(c.arguments) for c in reply.tool_calls)
    if size > MAX_REPLY_CHARS:
        return Notice(NoticeCode.REPLY_TOO_LONG, count=f"{size:,}", limit=f"{MAX_REPLY_CHARS:,}")
    return None


def too_many_calls() -> Notice:
    """Why a reply with more than :data:`MAX_CALLS` calls is refused."""
    return Notice(NoticeCode.REPLY_TOO_MANY_CALLS, limit=str(MAX_CALLS))
