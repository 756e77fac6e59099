"""Golden files for the ReAct shapes (:mod:`react_engine.parsing.shapes`) under both protocols.

Each ``fixtures/parser/shape_NAME.txt`` is read by :func:`~react_engine.parsing.parse_react`
(its ``shape_NAME.json``, in ``test_parser_golden.py``) and here by each protocol as a run
reads a reply (``decide``: the protocol's reading, then the shared policy), with the
tools of the native-format goldens offered: ``shape_NAME.protocols.json`` holds both
decisions (calls with the policy's refusals, a final answer or a format error).
``pytest --update-goldens`` rewrites them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.goldens import expected_for
from support.native_formats import context, summary

from react_engine import FunctionCallingProtocol, TextReActProtocol
from react_engine.protocols.policy import decide
from react_engine.types import ModelResponse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "parser"
CASES = sorted(FIXTURES.glob("shape_*.txt"))


def run_case(path: Path) -> dict[str, Any]:
    reply = ModelResponse(content=path.read_bytes().decode("utf-8"), finish_reason="stop")
    out = {
        protocol.name: summary(decide(protocol, reply, context()))
        for protocol in (FunctionCallingProtocol(), TextReActProtocol())
    }
    for decision in out.values():
        for call in decision.get("calls", []):
            call["error"] = call["error"] and call["error"].text()  # a Notice, as worded
    return out


def test_there_are_shape_goldens() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_shape_golden_under_both_protocols(path: Path, update_goldens: bool) -> None:
    actual = run_case(path)
    expected = expected_for(path, actual, update_goldens, ".protocols.json")
    if expected is None:
        return
    assert actual == expected
    if any(word in path.stem for word in ("example", "lossy", "cut")):  # nothing of it runs
        for protocol in ("function_calling", "text"):
            calls = actual[protocol].get("calls", [])
            assert all(c["error"] is not None for c in calls), (protocol, calls)
