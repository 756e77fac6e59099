"""How much of one reply is read at all: the bound on hostile replies, checked once, at the
edge, before any reader runs, so that no reader meets more than a bounded text or holds more
than a bounded number of calls (a reply past them is a format error).
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
    "TOO_MANY_CALLS",
    "too_large",
]

MAX_REPLY_CHARS: Final = 100_000
"""The most characters of one reply that are read (text plus native calls' arguments):
about 25,000 tokens. The worst hostile shapes just under it take about 100 ms of CPU."""

READ_ON_LOOP: Final = 16_000
"""The longest reply read on the event loop (about 15 ms at worst); a longer one is read on
a worker thread (``bench/stall.py`` measures both)."""

MAX_CALLS: Final = 1024
"""The most tool calls of one reply that are read; a reply with more is refused whole."""

READ_LIMIT: Final = MAX_CALLS + 1
"""Where the readers of calls in text stop: one past :data:`MAX_CALLS`, to tell too many."""

TOO_MANY_CALLS: Final = Notice(NoticeCode.REPLY_TOO_MANY_CALLS, limit=str(MAX_CALLS))


def too_large(reply: ModelResponse) -> Notice | None:
    """Why ``reply`` is not read at all (too long, or too many native calls), or ``None``."""
    if len(reply.tool_calls) > MAX_CALLS:
        return TOO_MANY_CALLS
    size = len(reply.content or "") + sum(len(c.arguments) for c in reply.tool_calls)
    if size > MAX_REPLY_CHARS:
        return Notice(NoticeCode.REPLY_TOO_LONG, count=f"{size:,}", limit=f"{MAX_REPLY_CHARS:,}")
    return None
