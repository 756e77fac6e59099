"""No code in react_engine/ reads or writes a private attribute of an asyncio object, nor
imports ``_signal`` (react_engine/runtime.py is on public asyncio only): a CPython change to
what such an attribute holds would not raise, it would make the engine misjudge a loop."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "react_engine"

FORBIDDEN = [
    # ``self._ready`` is a class of our own's attribute; any other object's is asyncio's.
    re.compile(r"(?<!self)\.\s*_(ready|scheduled|selector|asyncgens|default_executor)\b"),
    re.compile(r"\b(runner|_runner)\s*\.\s*_loop\b"),
    re.compile(
        r"\b(getattr|setattr|hasattr)\([^)]*[\"'](_ready|_scheduled|_selector|_asyncgens|_default_executor|_loop)[\"']"
    ),
    re.compile(r"^\s*(import\s+_signal\b|from\s+_signal\s+import)", re.MULTILINE),
    re.compile(r"\bimport_module\(\s*[\"']_signal[\"']"),
]


def _matches(text: str) -> list[str]:
    return [m.group(0) for pattern in FORBIDDEN for m in pattern.finditer(text)]


def test_the_package_touches_no_private_asyncio_attribute() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for hit in _matches(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "    if loop._ready:",
        "len(loop._selector.get_map())",
        "for timer in loop._scheduled:",
        'gens = getattr(loop, "_asyncgens", None)',
        "executor = loop._default_executor",
        "runner._loop is not loop",
        "self.loop._ready.append(handle)",
        "import _signal  # type: ignore",
        "from _signal import signal",
    ],
)
def test_the_scan_finds_each_kind_it_forbids(line: str) -> None:
    assert _matches(line)  # the scan above can fail
