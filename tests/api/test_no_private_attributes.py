"""No code in react_engine/ reads or writes a private attribute of another library: of an
asyncio object, nor imports ``_signal`` (react_engine/runtime.py is on public asyncio only),
nor of the ``openai`` SDK's clients and their HTTP pools, nor of ``sys``. A change to what
such an attribute holds would not raise, it would make the engine misjudge a loop or leave
a connection open."""

from __future__ import annotations

import ast
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


# --- other libraries' objects, found with ``ast`` ----------------------------------------------

LIBRARIES = {"asyncio", "openai", "httpx", "httpx2", "httpcore", "httpcore2", "sys", "threading"}
"""Modules whose private attributes no code here may use (``os._exit`` is public API)."""
ALLOWED = {"os._exit"}
"""Private names of the SDK's clients and their HTTP pools: on any object, never ours."""
DENIED = {"_client", "_transport", "_pool", "_requests", "_prepare_request", "_connection"}
DENIED |= {"_network_stream", "_getframe"}


def _private_uses(source: str) -> list[str]:
    """``lib._x`` (or ``lib.y._x``) on a name imported from one of :data:`LIBRARIES`, and a
    :data:`DENIED` attribute on any object but ``self``/``cls``, read or written."""
    tree = ast.parse(source)
    roots: dict[str, str] = {}  # local name -> the library it comes from
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in LIBRARIES:
                    roots[(alias.asname or alias.name).split(".")[0]] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in LIBRARIES:
                for alias in node.names:
                    roots[alias.asname or alias.name] = top
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        root = base.id if isinstance(base, ast.Name) else None
        text = ast.unparse(node)
        if text in ALLOWED:
            continue
        private = node.attr.startswith("_") and not node.attr.startswith("__")
        own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        if (private and root in roots) or (node.attr in DENIED and not own):
            found.append(text)
    return found


def test_the_package_touches_no_private_attribute_of_another_library() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for hit in _private_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "pool = client._client._transport._pool",
        "for pending in list(pool._requests): pass",
        "stream = pending.connection._connection._network_stream",
        "client._prepare_request = prepare",
        "import sys\nframe = sys._getframe(1)",
        "from asyncio import events\nevents._get_running_loop()",
        "import httpx2 as httpx\nhttpx._config.DEFAULT_TIMEOUT_CONFIG",
        "import openai\nopenai._base_client.SyncAPIClient",
    ],
)
def test_the_ast_scan_finds_each_kind_it_forbids(source: str) -> None:
    assert _private_uses(source)  # the scan above can fail


@pytest.mark.parametrize(
    "source",
    [
        "self._client = client",  # the package's own objects
        "import os\nos._exit(1)",
        "import asyncio\nasyncio.get_running_loop()",
        "model._secret",
    ],
)
def test_the_ast_scan_passes_public_and_own_attributes(source: str) -> None:
    assert _private_uses(source) == []
