"""How the harness writes a report: a text table, JSON and CSV.

``compare`` and ``eval bfcl`` build their own rows and records; the grid and the files
are written here, the same way for both.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["csv_text", "grid", "json_text", "write_text"]


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


def csv_text(fieldnames: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """``rows`` as CSV with a header line (``\\n`` line ends)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fieldnames, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8); return the path."""
    path.write_text(text, encoding="utf-8")
    return path
