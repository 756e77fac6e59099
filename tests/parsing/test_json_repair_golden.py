"""Golden files for :func:`react_engine.parsing.repair_json`.

Each ``fixtures/json_repair/NAME.txt`` is broken (or valid) JSON as a model wrote it;
``NAME.json`` beside it is ``{"value": ..., "repairs": [...]}`` or
``{"error": "JSONRepairError"}``. An optional ``NAME.args.json`` holds keyword arguments
for the call (``{"allow_truncated": false, "close_brackets": true}``: the closing-bracket
rule, as tool arguments are read). ``pytest --update-goldens`` rewrites the expectations
from the current code. See fixtures/json_repair/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.goldens import dump, expected_for
from support.repair_table import JSON_REPAIR_CODES

from react_engine.errors import JSONRepairError
from react_engine.parsing import repair_json

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "json_repair"
CASES = sorted(FIXTURES.glob("*.txt"))


def run_case(path: Path) -> dict[str, Any]:
    args_path = path.with_suffix(".args.json")
    kwargs = json.loads(args_path.read_text("utf-8")) if args_path.exists() else {}
    try:
        result = repair_json(path.read_bytes().decode("utf-8"), **kwargs)
    except JSONRepairError:
        return {"error": "JSONRepairError"}
    return {"value": result.value, "repairs": list(result.repairs)}


def test_there_are_goldens() -> None:
    assert len(CASES) >= 110


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_json_repair_golden(path: Path, update_goldens: bool) -> None:
    actual = run_case(path)
    expected = expected_for(path, actual, update_goldens)
    if expected is None:
        return
    # Compared as serialised text: that tells 1 from 1.0 and True from 1, and NaN == NaN.
    assert dump(actual) == dump(expected)
    assert set(actual.get("repairs", ())) <= JSON_REPAIR_CODES, "undocumented repair code"
