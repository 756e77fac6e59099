"""Objects that give one key two different values: every JSON reader keeps the last, the
model may have meant either, so such arguments are a guess and never run (``duplicate_key``,
lossy). :func:`decode` says whether the text holds one; readers that build objects
themselves set each key with :func:`assign`."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ReactEngineError

__all__ = ["CHECKED", "DUPLICATE_KEY", "KeyWrittenTwice", "assign", "decode"]

DUPLICATE_KEY: tuple[str, ...] = ("duplicate_key",)
"""The repairs of arguments read from an object that gives a key two values."""


class KeyWrittenTwice(ReactEngineError):
    """Raised by :data:`CHECKED` when an object gives one key two different values; its
    readers catch it (it never leaves the parsers)."""


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(items)
    if len(out) != len(items) and any(out[key] != value for key, value in items):
        raise KeyWrittenTwice
    return out


CHECKED = json.JSONDecoder(object_pairs_hook=_pairs)
"""Strict JSON, raising :class:`KeyWrittenTwice` for a key given two different values
(the same value twice is harmless). Stateless: safe in any thread."""
_CHECKED_LAX = json.JSONDecoder(object_pairs_hook=_pairs, strict=False)


def decode(text: str, pos: int | None = None, *, strict: bool = True) -> tuple[Any, int, bool]:
    """``json.loads(text)`` (or, from ``pos``, the value there: ``raw_decode``), where it
    ends, and whether an object in it gives a key two different values (the last is then
    kept, as :mod:`json` keeps it). Raises what :mod:`json` raises."""
    try:
        return (*_decode(CHECKED if strict else _CHECKED_LAX, text, pos), False)
    except KeyWrittenTwice:
        return (*_decode(json.JSONDecoder(strict=strict), text, pos), True)


def _decode(decoder: json.JSONDecoder, text: str, pos: int | None) -> tuple[Any, int]:
    if pos is None:
        return decoder.decode(text), len(text)
    return decoder.raw_decode(text, pos)


def assign(target: dict[str, Any], key: str, value: Any) -> bool:
    """``target[key] = value``, for a reader building an object itself; whether ``key``
    held another value."""
    replaced = key in target and target[key] != value
    target[key] = value
    return replaced
