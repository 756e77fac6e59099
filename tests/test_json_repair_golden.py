"""Golden files for :func:`react_engine.parsing.repair_json`.

Each ``fixtures/json_repair/NAME.txt`` is broken (or valid) JSON as a model wrote it;
``NAME.json`` beside it is ``{"value": ..., "repairs": [...]}`` or
``{"error": "JSONRepairError"}``. ``pytest --update-goldens`` rewrites the expectations
from the current code. See fixtures/json_repair/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from react_engine.errors import JSONRepairError
from react_engine.parsing import JSON_REPAIR_CODES, repair_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "json_repair"
CASES = sorted(FIXTURES.glob("*.txt"))


def run_case(path: Path) -> dict[str, Any]:
    try:
        result = repair_json(path.read_bytes().decode("utf-8"))
    except JSONRepairError:
        return {"error": "JSONRepairError"}
    return {"value": result.value, "repairs": list(result.repairs)}


def dump(value: Any) -> bytes:
    """Deterministic JSON: UTF-8, or ``\\u`` escapes when a lone surrogate forbids UTF-8."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(value, indent=2, ensure_ascii=True, sort_keys=False) + "\n").encode()


def test_there_are_goldens() -> None:
    assert len(CASES) >= 110


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_json_repair_golden(path: Path, update_goldens: bool) -> None:
    actual = run_case(path)
    expected_path = path.with_suffix(".json")
    if update_goldens:
        expected_path.write_bytes(dump(actual))
        return
    assert expected_path.exists(), f"{expected_path.name} is missing: run pytest --update-goldens"
    expected = json.loads(expected_path.read_bytes().decode("utf-8"))
    # Compared as serialised text: that tells 1 from 1.0 and True from 1, and NaN == NaN.
    assert dump(actual) == dump(expected)
    assert set(actual.get("repairs", ())) <= JSON_REPAIR_CODES, "undocumented repair code"
