"""The page every HTML report is written on: one self-contained file, and the escaping.

A report is opened from disk, attached to a bug report, mailed: it loads nothing (no
network, no CDN, no script; the styles are inline), and its Content-Security-Policy
forbids any script, so that even a slip in escaping could not run what a model wrote.
Every text that comes from a run (the model's replies, a tool's observations, the
question, an error) goes through :func:`esc`; the builders here take plain text and
escape it themselves.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

__all__ = ["FOLD_CHARS", "FOLD_LINES", "block", "esc", "fold", "page", "slug"]

FOLD_CHARS = 600
"""A text longer than this folds (``<details>``), its first line shown."""
FOLD_LINES = 12
"""So does one of more lines than this."""

_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
:root { --fg: #1f2328; --dim: #656d76; --line: #d0d7de; --bg: #ffffff; --soft: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --accent: #0969da; --held: #8250df; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 24px; color: var(--fg); background: var(--bg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 0 0 6px; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
pre { margin: 4px 0; padding: 8px 10px; background: var(--soft); border-radius: 6px;
  white-space: pre-wrap; word-break: break-word; font: 12.5px/1.45 ui-monospace, SFMono-Regular,
  Menlo, Consolas, monospace; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.sub { color: var(--dim); margin: 0 0 16px; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
.facts dt { color: var(--dim); } .facts dd { margin: 0; }
.notice { color: var(--warn); background: #fff8c5; border-radius: 6px; padding: 4px 10px;
  margin: 4px 0; }
.timeline { list-style: none; padding: 0; margin: 8px 0; }
.step { border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: 6px;
  padding: 10px 14px; margin: 10px 0; }
.step.final { border-left-color: var(--ok); } .step.format_error { border-left-color: var(--bad); }
.step-head { display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: baseline;
  margin-bottom: 4px; }
.step-head .figures { color: var(--dim); font-size: 12.5px; }
.label { color: var(--dim); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.call { border-top: 1px dashed var(--line); padding-top: 6px; margin-top: 6px; }
.call-head code { font-weight: 600; }
.badge { display: inline-block; font-size: 12px; padding: 0 8px; border-radius: 10px;
  color: #fff; background: var(--dim); margin-left: 6px; }
.badge.ok { background: var(--ok); } .badge.refused, .badge.failed { background: var(--bad); }
.badge.held { background: var(--held); } .badge.salvaged { background: var(--warn); }
.answer { border-left: 3px solid var(--ok); padding-left: 10px; }
.repairs { color: var(--dim); font-size: 12.5px; margin: 4px 0 0; padding-left: 18px; }
.repairs li.label { list-style: none; margin-left: -18px; }
.code { color: var(--dim); font-size: 12px; }
details > summary { cursor: pointer; color: var(--dim); }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { background: #dafbe1; } td.fail { background: #ffebe9; } td.decode { background: #fff1c5; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.charts svg { border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.run-report { border-top: 2px solid var(--line); margin-top: 28px; padding-top: 8px; }
.back { font-size: 12.5px; }
"""


def esc(text: object) -> str:
    """``text`` as HTML text or an attribute's value: ``<``, ``>``, ``&`` and both quotes
    escaped, so nothing a model wrote is ever read as markup."""
    return html.escape(str(text), quote=True)


def slug(*parts: object) -> str:
    """An element id made of ``parts``: letters, digits, ``-`` and ``_`` only."""
    text = "-".join(str(p) for p in parts)
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in text)


def block(text: str, cls: str = "") -> str:
    """``text`` kept as written (line breaks and spaces) in a ``<pre>``, escaped."""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<pre{attr}>{esc(text)}</pre>"


def fold(text: str, cls: str = "") -> str:
    """:func:`block`, folded into ``<details>`` when the text is long (its first line and
    its length shown until it is opened)."""
    lines = text.splitlines()
    if len(text) <= FOLD_CHARS and len(lines) <= FOLD_LINES:
        return block(text, cls)
    first = lines[0] if lines else ""
    if len(first) > 120:
        first = first[:119] + "…"
    summary = f"{esc(first)} <span>({len(text):,} characters, {len(lines):,} lines)</span>"
    return f'<details class="fold"><summary>{summary}</summary>{block(text, cls)}</details>'


def page(title: str, body: Iterable[str]) -> str:
    """A whole HTML document: ``title`` (plain text) and the body's parts (HTML)."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)}</title>",
            f"<style>{_STYLE}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )
