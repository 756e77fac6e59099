"""docs/extending-protocols.md runs as written: its worked example adds a protocol in the
number of places the page states (at most three), and a real run speaks it.

The page's first Python block is the whole extension (its top-level classes and calls are
the places), the second uses it; both are executed here verbatim, through the one loop
with a scripted model, then the CLI's ``run --dry-run`` speaks it too.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine.cli import main
from react_engine.protocols import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending-protocols.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text("utf-8"), re.S | re.M)


@pytest.fixture
def clean_registry() -> Iterator[None]:
    saved = dict(registry.PROTOCOLS)
    yield
    registry.PROTOCOLS.clear()
    registry.PROTOCOLS.update(saved)


def test_the_page_counts_its_places_and_there_are_at_most_three() -> None:
    extension = ast.parse(blocks()[0])
    places = [
        node
        for node in extension.body
        if isinstance(node, ast.ClassDef)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call))
    ]
    stated = re.search(r"takes \*\*(\d) places\*\*", DOC.read_text("utf-8"))
    assert stated is not None, "the page must say how many places"
    assert len(places) == int(stated.group(1)) <= 3
    # nothing else at the top level but imports and constants
    rest = [n for n in extension.body if n not in places]
    assert all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign)) for n in rest)


def test_the_worked_example_runs(clean_registry: None, capsys: pytest.CaptureFixture[str]) -> None:
    extension, usage = blocks()[:2]
    assert "slash" not in registry.PROTOCOLS
    scope: dict[str, Any] = {"__name__": "extending_doc"}
    exec(compile(extension, str(DOC), "exec"), scope)
    assert registry.registration("slash").cls is scope["SlashProtocol"]
    exec(compile(usage, str(DOC), "exec"), scope)
    assert capsys.readouterr().out == "slash Paris is 14°C.\n"
    result, model = scope["result"], scope["model"]
    assert result.answer == "Paris is 14°C." and result.protocol_reason == "explicit"
    [call] = result.tool_calls
    assert (call.tool, call.arguments, call.status) == ("get_weather", {"location": "Paris"}, "ok")
    # the request spoke the protocol, and the result went back in its format
    first, second = model.payloads
    assert "/answer <text>" in first["messages"][0]["content"]
    assert "tools" not in first
    assert second["messages"][-1]["content"].startswith("RESULT get_weather: ")
    # a reply in no format goes back to the model with the protocol's reminder
    scope["model"].push("hello", "/answer done")
    again = scope["agent"].run("Weather?")
    assert [s.kind for s in again.steps] == ["format_error", "final"]
    assert (again.steps[0].feedback or "").startswith("Reply with one line: /<tool>")


def test_the_cli_speaks_it(clean_registry: None, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(blocks()[0], str(DOC), "exec"), {"__name__": "extending_doc"})
    assert main(["run", "Weather in Beijing?", "--dry-run", "--protocol", "slash", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] == "slash" and out["answer"]
    assert any(step["kind"] == "action" for step in out["steps"])
