"""The repair table as ``docs/reliability.md`` shows it (a test helper: the package never
prints it)."""

from __future__ import annotations

from react_engine.parsing import repairs


def markdown_table() -> str:
    """The table as it stands in ``docs/reliability.md``."""
    lines = ["| code | from | class | what was read |", "|---|---|---|---|"]
    for entry in sorted(repairs.REPAIRS.values(), key=lambda r: (r.source, not r.lossless, r.code)):
        kind = "lossless" if entry.lossless else "**lossy**"
        what = entry.what.replace("|", "\\|")
        lines.append(f"| `{entry.code}` | {entry.source} | {kind} | {what} |")
    return "\n".join(lines)
