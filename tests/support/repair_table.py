"""The repair table as ``docs/reliability.md`` shows it (a test helper: the package never
prints it)."""

from __future__ import annotations

from react_engine.parsing import repairs

JSON_REPAIR_CODES = frozenset(r.code for r in repairs.REPAIRS.values() if r.source == "json")
"""Every code ``repair_json`` may report: the ``json`` rows of the repair table."""

PARSE_REPAIR_CODES = frozenset(
    {code for code, repair in repairs.REPAIRS.items() if repair.source == "text"}
    | {"json:" + code for code in JSON_REPAIR_CODES}
)
"""Every code ``parse_react`` may report: the ``text`` rows and the JSON repairs."""


def markdown_table() -> str:
    """The table as it stands in ``docs/reliability.md``."""
    lines = ["| code | from | class | what was read |", "|---|---|---|---|"]
    for entry in sorted(repairs.REPAIRS.values(), key=lambda r: (r.source, not r.lossless, r.code)):
        kind = "lossless" if entry.lossless else "**lossy**"
        what = entry.what.replace("|", "\\|")
        lines.append(f"| `{entry.code}` | {entry.source} | {kind} | {what} |")
    return "\n".join(lines)
