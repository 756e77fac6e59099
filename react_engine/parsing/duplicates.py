"""Objects that give one key two different values.

``{"path": "/tmp/a", "path": "/home"}`` decodes, in every JSON reader, to its last value;
the model may have meant either, so arguments holding such an object are a guess and never
run (the repair ``duplicate_key``, lossy). :func:`decode` returns, beside the value, whether
the text holds such an object; the readers that build objects themselves (the XML formats,
Python calls, the tolerant decoder) set each key with :func:`assign`, which says whether it
replaced another value.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DUPLICATE_KEY", "assign", "decode"]

DUPLICATE_KEY: tuple[str, ...] = ("duplicate_key",)
"""The repairs of arguments read from an object that gives a key two values."""


def decode(text: str, pos: int | None = None, *, strict: bool = True) -> tuple[Any, int, bool]:
    """``json.loads(text)`` (or, from ``pos``, the value there: ``raw_decode``), where it
    ends, and whether an object in it gives a key two different values (the same value
    twice is harmless; the last is kept). Raises what :mod:`json` raises."""
    conflicted = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal conflicted
        out = dict(items)
        if len(out) != len(items) and not conflicted:
            conflicted = any(out[key] != value for key, value in items)
        return out

    decoder = json.JSONDecoder(object_pairs_hook=pairs, strict=strict)
    if pos is None:
        value, end = decoder.decode(text), len(text)
    else:
        value, end = decoder.raw_decode(text, pos)
    return value, end, conflicted


def assign(target: dict[str, Any], key: str, value: Any) -> bool:
    """``target[key] = value``, for a reader building an object itself; whether ``key``
    held another value."""
    replaced = key in target and target[key] != value
    target[key] = value
    return replaced
