"""The page every HTML report is written on, and the escaping.

A report loads nothing (no network, no script, inline styles), and its
Content-Security-Policy forbids any script, so that even a slip in escaping could not run
what a model wrote. Every text from a run goes through :func:`esc`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FOLD_CHARS", "FOLD_LINES", "block", "esc", "fold", "page", "slug"]

FOLD_CHARS = 600
"""A text longer than this folds (``<details>``), its first line shown."""
FOLD_LINES = 12
"""So does one of more lines than this."""

_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = "\n" + (Path(__file__).parent / "page.css").read_text(encoding="utf-8")


def esc(text: object) -> str:
    """``text`` escaped for HTML text or an attribute's value (both quotes too)."""
    return html.escape(str(text), quote=True)


def slug(*parts: object) -> str:
    """An element id made of ``parts``: letters, digits, ``-`` and ``_`` only."""
    text = "-".join(str(p) for p in parts)
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in text)


def block(text: str, cls: str) -> str:
    """``text`` kept as written (line breaks and spaces) in a ``<pre>``, escaped."""
    return f'<pre class="{esc(cls)}">{esc(text)}</pre>'


def fold(text: str, cls: str) -> str:
    """:func:`block`, folded into ``<details>`` when the text is long."""
    lines = text.splitlines()
    if len(text) <= FOLD_CHARS and len(lines) <= FOLD_LINES:
        return block(text, cls)
    first = lines[0] if lines else ""
    if len(first) > 120:
        first = first[:119] + "…"
    summary = f"{esc(first)} <span>({len(text):,} characters, {len(lines):,} lines)</span>"
    return f'<details class="fold"><summary>{summary}</summary>{block(text, cls)}</details>'


_HEAD = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_POLICY}">
<meta name="viewport" content="width=device-width, initial-scale=1">"""


def page(title: str, body: Iterable[str]) -> str:
    """A whole HTML document: ``title`` (plain text) and the body's parts (HTML)."""
    head = [_HEAD, f"<title>{esc(title)}</title>", f"<style>{_STYLE}</style>", "</head>"]
    return "\n".join([*head, "<body>", *body, "</body>", "</html>", ""])
