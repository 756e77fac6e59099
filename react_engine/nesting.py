"""How deeply a value nests, measured without recursion, and the limits that apply.

Arguments a thousand levels deep are valid JSON, but every recursive walker after them may
hit Python's recursion limit: deeper than :data:`MAX_ARGUMENT_DEPTH` they are refused before
a tool runs, and traces cut anything deeper than :data:`MAX_TRACE_DEPTH`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .wording import Notice, NoticeCode

__all__ = ["MAX_ARGUMENT_DEPTH", "MAX_TRACE_DEPTH", "TOO_DEEP", "exceeds_depth"]

MAX_ARGUMENT_DEPTH: Final = 100
"""Deepest nesting accepted in a tool call's arguments (the object itself is level 1)."""

MAX_TRACE_DEPTH: Final = 200
"""Deepest nesting a trace record keeps; anything deeper is replaced by :data:`CUT`."""

CUT: Final = "<cut: nested too deep>"
"""What stands in a trace for a value nested deeper than :data:`MAX_TRACE_DEPTH`."""

TOO_DEEP: Final = Notice(NoticeCode.TOO_DEEP, depth=str(MAX_ARGUMENT_DEPTH))
"""The observation for a call whose arguments nest deeper than the limit."""


_FLAT: Final = frozenset({str, int, float, bool, type(None)})
"""Types that hold nothing (their subclasses may: they take the long way)."""


def exceeds_depth(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether ``value`` holds mappings, lists or tuples nested more than ``limit`` levels
    deep. Iterative and stops early, so safe at any depth (a cycle counts as too deep)."""
    if type(value) is dict and limit >= 1:  # the usual arguments: one object of plain values
        for child in value.values():
            if type(child) not in _FLAT:
                break
        else:
            return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        for child in children:
            stack.append((child, depth + 1))
    return False
