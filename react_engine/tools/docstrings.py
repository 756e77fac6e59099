"""A function's docstring read into the tool's description and its parameters' descriptions.

Google style (``Args:`` then ``name: text`` lines, continuation lines indented deeper) and
Sphinx style (``:param name: text``).
"""

from __future__ import annotations

import re

__all__ = ["parse_docstring"]

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_SECTION_HEADER = re.compile(
    r"^\s*(Returns?|Raises|Yields|Examples?|Notes?|See Also)\s*:\s*$", re.IGNORECASE
)
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[^:\s]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its summary and per-argument descriptions."""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    current_indent = 0
    for line in doc.splitlines():
        if sphinx := _SPHINX_ARG.match(line):
            current = sphinx.group(1)
            args[current] = sphinx.group(2).strip()
            current_indent = len(line) - len(line.lstrip())
            in_args = False
            continue
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if _SECTION_HEADER.match(line) or line.strip().startswith(":return"):
            in_args, current = False, None
            continue
        if in_args:
            if not line.strip():
                current = None
                continue
            indent = len(line) - len(line.lstrip())
            if (m := _GOOGLE_ARG.match(line)) and (current is None or indent <= current_indent):
                current = m.group(1).lstrip("*")
                args[current] = m.group(2).strip()
                current_indent = indent
            elif current is not None:
                args[current] = (args[current] + " " + line.strip()).strip()
            continue
        if current is not None and line.strip() and (len(line) - len(line.lstrip())) > 0:
            args[current] = (args[current] + " " + line.strip()).strip()
            continue
        current = None
        if not args:
            summary_lines.append(line)
    return "\n".join(summary_lines).strip(), args
