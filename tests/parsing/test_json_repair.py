"""Unit tests for tolerant JSON decoding, beyond the golden files in fixtures/json_repair."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from support.repair_table import JSON_REPAIR_CODES

from react_engine.errors import JSONRepairError, ModelBehaviorError
from react_engine.parsing import RepairResult, decode_prefix, repair_json
from react_engine.parsing.json_decoder import MAX_DEPTH, MAX_REPAIR_CHARS


def test_valid_json_takes_the_fast_path() -> None:
    text = '{"a": [1, 2.5, "x", true, null], "b": {"c": "é"}}'
    assert repair_json(text) == RepairResult(json.loads(text), ())


def test_result_is_frozen() -> None:
    result = repair_json("[1]")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.value = 2  # type: ignore[misc]


def test_repair_errors_are_model_errors_and_value_errors() -> None:
    with pytest.raises(ModelBehaviorError):
        repair_json("nope")
    with pytest.raises(ValueError):
        repair_json("nope")


@pytest.mark.parametrize(
    ("text", "pos"),
    [
        ('{"a": }', 6),
        ('{"a": 1, "b":', 13),
        ('{"a"', 4),
        ("[1, 2, oops]", 7),
        ("{", 1),
        ("   ", 3),
    ],
)
def test_error_positions(text: str, pos: int) -> None:
    with pytest.raises(JSONRepairError) as info:
        repair_json(text)
    assert info.value.pos == pos


@pytest.mark.parametrize("text", ['{"a": }', "{", "[", '{"a"', '{"a": 1, "b": }', "{}x{"])
def test_never_substitutes_an_empty_object(text: str) -> None:
    try:
        result = repair_json(text)
    except JSONRepairError:
        return
    assert result.value != {} or text.startswith("{}")


def test_one_element_array_is_not_unwrapped() -> None:
    assert repair_json('[{"a": 1}]').value == [{"a": 1}]
    assert repair_json("[{'a': 1}]").value == [{"a": 1}]


def test_repairs_are_reported_in_order_once() -> None:
    result = repair_json("{'a': True, 'b': 'x',}")
    assert result.repairs == ("single_quotes", "python_literal", "trailing_comma")


def test_surrogate_pairs_on_the_tolerant_path() -> None:
    assert repair_json("{'a': '\\ud83d\\ude00'}").value == {"a": "😀"}


def test_escaped_quote_and_backslash_on_the_tolerant_path() -> None:
    assert repair_json("{'a': 'x\\\"y\\\\z',}").value == {"a": 'x"y\\z'}


def test_nesting_cap_raises_instead_of_recursing() -> None:
    with pytest.raises(JSONRepairError) as info:
        repair_json("{'a': " * (MAX_DEPTH + 1))
    assert "nesting" in str(info.value)
    with pytest.raises(JSONRepairError):
        repair_json("[" * 1_000_000)
    with pytest.raises(JSONRepairError):
        repair_json("x " + "[" * 1_000_000)


def test_valid_deep_json_is_still_decoded_by_the_fast_path() -> None:
    depth = MAX_DEPTH + 50
    assert repair_json("[" * depth + "]" * depth).repairs == ()


def test_broken_json_beyond_the_size_bound_is_refused() -> None:
    big = '{"a": "' + "x" * MAX_REPAIR_CHARS + '",}'
    with pytest.raises(JSONRepairError) as info:
        repair_json(big)
    assert "too long" in str(info.value)
    assert repair_json(big[:-2] + "}").value == {"a": "x" * MAX_REPAIR_CHARS}


def test_decode_prefix_leaves_the_rest() -> None:
    assert decode_prefix('x {"a": 1} tail', 2) == ({"a": 1}, 10, ())
    assert decode_prefix("x {'a': 1} tail", 2) == ({"a": 1}, 10, ("single_quotes",))
    with pytest.raises(JSONRepairError):
        decode_prefix("x {'a': } tail", 2)


def test_codes_are_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text(encoding="utf-8")
    for code in JSON_REPAIR_CODES:
        assert f"| `{code}` | json |" in doc, code
        assert re.fullmatch(r"[a-z_]+", code)


MB = 1_000_000
HOSTILE = [
    "[" * MB,
    "{" * MB,
    "x" + "{" * MB,
    "x" + "[" * MB,
    "[" + "1," * (MAX_REPAIR_CHARS // 2 - 1),
    '"' + "a" * MB,
    '{"a": "' + '" ' * (MAX_REPAIR_CHARS // 2 - 4),
    "a [b] " * (MB // 6),
    "{" + "a:1 " * (MAX_REPAIR_CHARS // 4 - 1),
    '[{"a":' * (MB // 6),
    "/*" * (MB // 2),
    "//\n" * (MB // 3),
    "'" * MB,
    "{}" * (MB // 2),
    "```" * (MB // 3),
    "\\" * MB,
    "{'a': '" + "\\x" * (MAX_REPAIR_CHARS // 2 - 8),
]


@pytest.mark.parametrize("text", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_hostile_input_completes(text: str) -> None:
    try:
        result = repair_json(text)
    except JSONRepairError as exc:
        assert 0 <= exc.pos <= len(text)
    else:
        assert set(result.repairs) <= JSON_REPAIR_CODES


def test_decode_prefix_at_the_end_has_nothing_to_decode() -> None:
    with pytest.raises(JSONRepairError) as info:
        decode_prefix("abc", 3)
    assert info.value.pos == 3


def test_decode_prefix_refuses_long_broken_json() -> None:
    with pytest.raises(JSONRepairError):
        decode_prefix("{'a': '" + "x" * MAX_REPAIR_CHARS)
