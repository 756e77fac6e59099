"""Property tests for the parsers (hypothesis).

Default runs are short (200 examples, no deadline). ``HYPOTHESIS_PROFILE=fuzz`` (what a
``make fuzz`` target sets) runs many more. The profiles are applied to these tests only,
so loading them does not change other modules' hypothesis settings.
"""

from __future__ import annotations

import json
import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.repair_table import JSON_REPAIR_CODES, PARSE_REPAIR_CODES

from react_engine.errors import JSONRepairError, ReActParseError
from react_engine.parsing import cut_reply, parse_react, repair_json
from react_engine.parsing import json_repair as json_repair_module
from react_engine.parsing import patterns as P
from react_engine.parsing.json_decoder import Repairs

pytestmark = pytest.mark.slow  # property-based tests (hypothesis)

settings.register_profile(
    "parsing", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "parsing"))

# --- strategies ---------------------------------------------------------------------------

FRAGMENTS = [
    "Thought:",
    "Thought :",
    "THOUGHT:",
    "**Thought:**",
    "### Thought\n",
    "Thought 1:",
    "Action:",
    "Action :",
    "**Action**:",
    "Action 2:",
    "action:",
    "Action：",
    "Action Input:",
    "Action_Input:",
    "Input:",
    "**Action Input:**",
    "Observation:",
    "Observation",
    "Observ",
    "**Observation:**",
    "Observation 1 (x):",
    "Final Answer:",
    "Final Answer :",
    "Final:",
    "Answer:",
    "## Final Answer\n",
    "Question:",
    "思考：",
    "行动：",
    "行动输入：",
    "观察：",
    "观",
    "最终答案：",
    "答案：",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=f>",
    "</function>",
    "<|eot_id|>",
    "Finish[",
    "search[",
    "]",
    "get(",
    ")",
    "q=",
    "=",
    "```",
    "```json\n",
    "~~~",
    "`",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "“",
    "”",
    ":",
    "：",
    ",",
    ".",
    "。",
    "\\",
    "\\u",
    "\\n",
    '{"action": "search", "action_input": {"q": 1}}',
    '{"name": "f", "arguments": "{}"}',
    '{"action": "Final Answer", "action_input": "x"}',
    "{'a': True,}",
    '{"a": [1, 2',
    "True",
    "None",
    "null",
    "NaN",
    "007",
    "-",
    "+1",
    ".5",
    "//",
    "/*",
    "*/",
    "#",
    "None",
    "N/A",
    "get_weather",
    "functions.f",
    "\n",
    "\r\n",
    " ",
    "\t",
    "\n\n",
]

label_soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map(
    "".join
)

JSON_FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"',
    "'",
    "“",
    "”",
    "‘",
    "’",
    "\\",
    "\\u",
    "\\ud83d",
    "a",
    "key",
    "1",
    "-",
    "+",
    ".",
    "e",
    "0",
    "007",
    "true",
    "True",
    "null",
    "None",
    "NaN",
    "-Infinity",
    "//",
    "/*",
    "*/",
    "#",
    "\n",
    " ",
    "\t",
    "{{",
    "}}",
    "```",
    "```json\n",
    "x",
    "é",
    "\ufeff",
    "=",
    "：",
]
json_soup = st.lists(
    st.one_of(st.sampled_from(JSON_FRAGMENTS), st.text(max_size=4)), max_size=40
).map("".join)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)

WORDS = st.text(alphabet=string.ascii_letters + string.digits + " ,'-", min_size=1, max_size=40)
TOOL_NAMES = st.from_regex(r"[a-z][a-z0-9_]{2,20}", fullmatch=True).filter(
    lambda n: P.normalise_word(n) not in ("none", "null", "finish", "final", "answer", "nothing")
)
SIMPLE_ARGS = st.dictionaries(
    st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=10),
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    max_size=4,
)


# --- parse_react ------------------------------------------------------------------------------


def _check_step(text: str, stop_words: list[str] | None = None) -> None:
    try:
        step = parse_react(text, stop_words=stop_words)
    except ReActParseError as exc:
        assert 0 <= exc.pos <= len(text)
        assert exc.expected
        return
    assert text.startswith(step.text), "the kept text is a prefix of the reply"
    assert (step.final_answer is None) == bool(step.actions), "an answer or actions, not both"
    assert set(step.repairs) <= PARSE_REPAIR_CODES
    assert len(step.repairs) == len(set(step.repairs))
    for action in step.actions:
        assert action.tool
        assert isinstance(action.arguments, dict | str)


@settings(PROFILE)
@given(st.text())
def test_parse_react_any_text(text: str) -> None:
    _check_step(text)


@settings(PROFILE)
@given(label_soup)
def test_parse_react_label_soup(text: str) -> None:
    _check_step(text)


@settings(PROFILE)
@given(
    label_soup, st.lists(st.sampled_from(["Observation:", "\nObservation:", "<|obs|>", "观察："]))
)
def test_parse_react_with_stop_words(text: str, stop_words: list[str]) -> None:
    _check_step(text, stop_words)


@settings(PROFILE)
@given(label_soup)
def test_cut_reply_keeps_a_prefix(text: str) -> None:
    cut = cut_reply(text)
    kept, codes = cut.text, cut.codes
    assert text.startswith(kept)
    assert kept == kept.rstrip()
    assert set(codes) <= PARSE_REPAIR_CODES


@settings(PROFILE)
@given(WORDS, TOOL_NAMES, SIMPLE_ARGS)
def test_canonical_action_parses_clean(thought: str, tool: str, args: dict[str, Any]) -> None:
    thought = thought.strip() or "x"
    text = f"Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(args)}"
    step = parse_react(text)
    assert step.repairs == []
    assert step.thought == thought
    assert [(a.tool, a.arguments) for a in step.actions] == [(tool, args)]


@settings(PROFILE)
@given(WORDS, WORDS)
def test_canonical_final_answer_parses_clean(thought: str, answer: str) -> None:
    thought, answer = thought.strip() or "x", answer.strip() or "y"
    step = parse_react(f"Thought: {thought}\nFinal Answer: {answer}")
    assert (step.repairs, step.thought, step.final_answer) == ([], thought, answer)


@settings(PROFILE)
@given(WORDS, TOOL_NAMES, SIMPLE_ARGS, WORDS)
def test_invented_observation_never_changes_the_action(
    thought: str, tool: str, args: dict[str, Any], invented: str
) -> None:
    head = f"Thought: {thought.strip() or 'x'}\nAction: {tool}\nAction Input: {json.dumps(args)}"
    step = parse_react(f"{head}\nObservation: {invented}\nThought: done\nFinal Answer: {invented}")
    assert [(a.tool, a.arguments) for a in step.actions] == [(tool, args)]
    assert step.final_answer is None
    assert step.text == head
    assert step.repairs == ["cut_observation"]


# --- repair_json ---------------------------------------------------------------------------------


def _check_repair(text: str) -> None:
    try:
        result = repair_json(text)
    except JSONRepairError as exc:
        assert 0 <= exc.pos <= len(text)
        return
    assert set(result.repairs) <= JSON_REPAIR_CODES
    json.dumps(result.value)  # whatever comes back is JSON data


@settings(PROFILE)
@given(st.text())
def test_repair_json_any_text(text: str) -> None:
    _check_repair(text)


@settings(PROFILE)
@given(json_soup)
def test_repair_json_soup(text: str) -> None:
    _check_repair(text)


@settings(PROFILE)
@given(json_values, st.sampled_from([None, 2]), st.booleans())
def test_round_trip_fast_path(value: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert repair_json(text) == json_repair_module.RepairResult(value, ())


@settings(PROFILE)
@given(json_values, st.sampled_from([None, 2]), st.booleans())
def test_tolerant_decoder_agrees_with_json_on_valid_json(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    # Force the slow path on valid JSON: same value, and no repair reported.
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    repairs = Repairs()
    assert json_repair_module._repair(text, repairs) == value
    assert repairs.codes() == ()


@settings(PROFILE)
@given(
    st.dictionaries(
        st.text(alphabet=string.ascii_letters, min_size=1, max_size=6), json_values, max_size=4
    )
)
def test_python_repr_of_json_data_is_repaired(value: dict[str, Any]) -> None:
    # What a model writes when it prints a Python dict: single quotes, True/False/None.
    def has_float_or_quote(v: Any) -> bool:
        if isinstance(v, float):
            return True
        if isinstance(v, str):
            return any(c in v for c in "'\"\\") or any(ord(c) < 32 or ord(c) > 126 for c in v)
        if isinstance(v, list):
            return any(has_float_or_quote(x) for x in v)
        if isinstance(v, dict):
            return any(has_float_or_quote(k) or has_float_or_quote(x) for k, x in v.items())
        return False

    if has_float_or_quote(value):
        return
    assert repair_json(repr(value)).value == value
