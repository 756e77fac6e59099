"""Golden files for the model families' own tool-call formats.

Each ``fixtures/salvage/NAME.txt`` is a raw reply written the way a family's chat template
writes calls (one call, several, a call with text around it, a call inside a sentence), or
a negative (prose, code, an example in a fence or in prose, a call after an invented
``Observation:``, an unknown tool).
``NAME.json`` beside it holds what the shared reader returns: the calls salvaged under
function calling (name, arguments typed by the tools' schemas, format, the thought left),
and the decision of the text protocol on the same reply. ``pytest --update-goldens``
rewrites the ``.json`` files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.goldens import expected_for
from support.native_formats import SCHEMAS, decide, summary

from react_engine.parsing.salvage import read_salvaged, strip_salvaged

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "salvage"
CASES = sorted(FIXTURES.glob("*.txt"))


def run_case(path: Path) -> dict[str, Any]:
    text = path.read_bytes().decode("utf-8")
    calls = read_salvaged(text, SCHEMAS, schemas=SCHEMAS).calls
    return {
        "calls": [{"name": c.tool, "arguments": c.arguments, "format": c.format} for c in calls],
        "thought": strip_salvaged(text, calls),
        "function_calling": summary(decide("function_calling", text)),
        "text": summary(decide("text", text)),
    }


def test_there_are_goldens_for_every_family() -> None:
    families = {p.stem.rsplit("_", 1)[0] for p in CASES}
    for family in (
        "glm45", "kimi", "mistral11", "mistral", "internlm", "qwen25_tools", "qwen25_bare",
        "granite", "llama4", "harmony", "minimax", "seed_oss", "functionary", "hermes",
        "deepseek_v3", "deepseek_v31", "qwen_xml", "xlam", "llama3_json", "jamba",
    ):  # fmt: skip
        stems = {p.stem for p in CASES if family in p.stem}
        shapes = {"one", "several", "text_around", "in_prose"}  # a call inside a sentence
        assert {f"{family}_{shape}" for shape in shapes} <= stems, family
        assert f"neg_{family}_prose_example" in stems, family  # the same, as an example
    assert "neg" in families or any(p.stem.startswith("neg_") for p in CASES)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_salvage_golden(path: Path, update_goldens: bool) -> None:
    actual = run_case(path)
    expected = expected_for(path, actual, update_goldens)
    if expected is None:
        return
    assert actual == expected
    if path.stem.startswith("neg_"):  # the only call a negative may hold is its first
        for protocol in ("function_calling", "text"):
            calls = actual[protocol].get("calls", [])
            assert len([c for c in calls if c["tool"] in SCHEMAS]) <= 1
            assert len(actual["calls"]) <= 1
