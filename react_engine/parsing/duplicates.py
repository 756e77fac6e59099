"""Objects that give one key two different values.

``{"path": "/tmp/a", "path": "/home"}`` decodes, in every JSON reader, to its last value;
the model may have meant either, so arguments holding such an object are a guess and never
run (the repair ``duplicate_key``, lossy). Every decoder of the readers builds its objects
through :func:`object_from_pairs`, which marks such an object as a :class:`Conflicted`
dict (the last value kept, as before); the readers that build objects themselves (the XML
formats, Python calls, the JSON repairer) test each key with :func:`conflicts`.
:func:`has_conflict` finds a mark anywhere in a value.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = [
    "DECODER",
    "Conflicted",
    "assign",
    "conflicts",
    "has_conflict",
    "marked",
    "object_from_pairs",
]


class Conflicted(dict[str, Any]):
    """A decoded object in which some key was written twice with different values."""

    __slots__ = ()


_MARKED = [0]
"""How many :class:`Conflicted` objects :func:`object_from_pairs` has made: a decoder's
caller compares it before and after, and walks the value (:func:`has_conflict`) only when
it moved (another thread's count moving costs only that walk)."""


def marked() -> int:
    """The count of :data:`_MARKED`, to compare before and after a decode."""
    return _MARKED[0]


def object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``dict(pairs)``, a :class:`Conflicted` one when a key repeats with another value
    (the same value twice is harmless)."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    for key, value in pairs:
        if out[key] != value:
            _MARKED[0] += 1
            return Conflicted(out)
    return out


def assign(target: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``target[key] = value``, for a reader building an object itself; returns
    ``target``, or a :class:`Conflicted` copy of it when ``key`` held another value (go on
    with what it returns)."""
    if conflicts(target, key, value) and not isinstance(target, Conflicted):
        target = Conflicted(target)
    target[key] = value
    return target


def conflicts(target: dict[str, Any], key: str, value: Any) -> bool:
    """Whether ``target[key] = value`` would replace another value of ``key``: for the
    readers that build objects themselves (the XML formats, Python calls, the repairer)."""
    return key in target and target[key] != value


def has_conflict(value: Any) -> bool:
    """Whether ``value`` holds a :class:`Conflicted` object at any depth (walked with a
    stack of its own: any depth, no recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Conflicted):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


DECODER: Final = json.JSONDecoder(object_pairs_hook=object_from_pairs)
"""``json.loads`` with :func:`object_from_pairs` (``DECODER.decode(text)``)."""
