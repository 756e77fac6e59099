"""How the harness writes a report: a text table and JSON, the same way for ``compare``
and ``eval bfcl`` (each builds its own rows and records)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["grid", "json_text"]


def grid(rows: Sequence[Sequence[str]], *, numeric_from: int) -> list[str]:
    """``rows`` (the head first) as aligned lines: the columns before ``numeric_from``
    left-aligned, the figures after it right-aligned, two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.rjust(w) if i >= numeric_from else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def json_text(data: Any, *, indent: int = 2) -> str:
    """A report as JSON text (not ASCII-escaped), ending with a newline."""
    return json.dumps(data, ensure_ascii=False, indent=indent) + "\n"
