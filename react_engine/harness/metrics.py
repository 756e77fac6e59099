"""Figures that add up: a case's counts and tokens, summed into a row of a table.

``compare`` (:class:`~react_engine.compare.run.Metrics`, from a run's trace) and ``eval
bfcl`` (its tally, from a case's result) both keep their figures in a dataclass of
numbers; :class:`Figures` gives them the one way to sum them, field by field, and the two
ways a table shows them (:func:`pct`, :func:`per`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Self

__all__ = ["Figures", "pct", "per"]


class Figures:
    """A mixin for a dataclass whose fields are numbers that add up."""

    __slots__ = ()

    def add(self, other: Self) -> None:
        """Add ``other``'s figures to these, field by field."""
        for f in fields(self):  # type: ignore[arg-type]
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @classmethod
    def total(cls, items: Iterable[Self]) -> Self:
        """The sum of ``items`` (all zeros for none)."""
        out = cls()
        for item in items:
            out.add(item)
        return out


def pct(part: float, whole: float, *, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole`` (``n/a`` for nothing)."""
    return f"{100 * part / whole:.{digits}f}%" if whole else "n/a"


def per(total: float, count: float) -> str:
    """``total / count`` rounded to a whole number (``n/a`` for no count)."""
    return f"{total / count:.0f}" if count else "n/a"
