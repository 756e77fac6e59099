"""Markdown code fences around JSON: where a fenced block's content starts and ends (a
fence inside a JSON string does not close it: :func:`fence_close`)."""

from __future__ import annotations

import re

from ..errors import JSONRepairError
from . import patterns as P
from .duplicates import decode
from .json_decoder import MAX_REPAIR_CHARS, Repairs, decode_value
from .patterns import run_end

__all__ = ["fence_body", "fence_close"]


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
    end = _complete_value_end(s, lo, hi)
    if end is not None and end > first:
        after = run_end(P.JSON_WS, s, end, hi)
        if s.startswith(marker, after, hi):
            return after
    return first


def _complete_value_end(s: str, lo: int, hi: int) -> int | None:
    """Where the complete JSON value (repaired, not cut off) starting at ``lo`` ends."""
    try:
        return decode(s if hi == len(s) else s[:hi], lo)[1]
    except (ValueError, RecursionError):
        pass
    if hi - lo > MAX_REPAIR_CHARS:
        return None
    try:
        return decode_value(s, lo, hi, Repairs(allow_truncated=False), allow_bare=False)[1]
    except JSONRepairError:
        return None
