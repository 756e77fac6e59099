"""Golden files for :func:`react_engine.parsing.parse_react`.

Each ``fixtures/parser/NAME.txt`` is a raw model reply; ``NAME.json`` beside it is the
expected :class:`~react_engine.types.ParsedStep` (or the expected error). An optional
``NAME.args.json`` holds keyword arguments for the call (``stop_words``,
``multi_action``, ``implicit_final_answer``). ``pytest --update-goldens`` rewrites every ``NAME.json`` from the
current parser, so a review diff shows exactly what moved. See fixtures/parser/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.goldens import expected_for
from support.repair_table import PARSE_REPAIR_CODES

from react_engine.errors import ReActParseError
from react_engine.parsing import parse_react
from react_engine.parsing.repairs import lossy_repairs
from react_engine.types import PendingCall

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "parser"
CASES = sorted(FIXTURES.glob("*.txt"))


def read_reply(path: Path) -> str:
    """The reply exactly as stored: bytes decoded, no newline translation."""
    return path.read_bytes().decode("utf-8")


def run_case(path: Path) -> dict[str, Any]:
    args_path = path.with_suffix(".args.json")
    kwargs = json.loads(args_path.read_text("utf-8")) if args_path.exists() else {}
    try:
        step = parse_react(read_reply(path), **kwargs)
    except ReActParseError as exc:
        return {"error": {"type": "ReActParseError", "expected": exc.expected, "pos": exc.pos}}
    return {
        "thought": step.thought,
        "actions": [_action(a) for a in step.actions],
        "final_answer": step.final_answer,
        "repairs": step.repairs,
        "text": step.text,
    }


def _action(action: PendingCall) -> dict[str, Any]:
    """An action as its golden shows it (under the names the goldens have always used:
    ``args`` is :attr:`PendingCall.arguments`); ``lossy`` (the repairs that guessed a value, so
    that the call is refused) only where there are some."""
    out: dict[str, Any] = {"tool": action.tool, "args": action.arguments}
    if action.error:
        out["error"] = action.error.text()
    lossy = lossy_repairs(action.repairs)
    if lossy:
        out["lossy"] = lossy
    return out


def test_there_are_goldens() -> None:
    assert len(CASES) >= 160


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_parser_golden(path: Path, update_goldens: bool) -> None:
    actual = run_case(path)
    expected = expected_for(path, actual, update_goldens)
    if expected is None:
        return
    assert actual == expected
    assert set(actual.get("repairs", ())) <= PARSE_REPAIR_CODES, "undocumented repair code"
