"""Unit tests for the text ReAct parser, beyond the golden files in fixtures/parser."""

from __future__ import annotations

import re

import pytest
from support.repair_table import PARSE_REPAIR_CODES

from react_engine.errors import ModelBehaviorError, ReActParseError
from react_engine.parsing import (
    EXPECTED_STEP,
    blobs,
    cut_reply,
    labels,
    parse_react,
    read_think,
)
from react_engine.parsing import patterns as P
from react_engine.types import ParsedStep, PendingCall
from react_engine.wording import NoticeCode

CANONICAL = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'


# --- the clean path -----------------------------------------------------------------------


def test_canonical_reply_needs_no_repair() -> None:
    step = parse_react(CANONICAL)
    assert step == ParsedStep(
        thought="I need the weather.",
        actions=[
            PendingCall(
                id=None,
                tool="get_weather",
                arguments={"location": "Paris"},
                raw_arguments='{"location": "Paris"}',
                exact=True,  # the model's own text is the arguments' JSON: sent back as is
            )
        ],
        final_answer=None,
        repairs=[],
        text=CANONICAL,
    )


def test_canonical_final_answer_needs_no_repair() -> None:
    step = parse_react("Thought: I now know the final answer\nFinal Answer: Paris")
    assert (step.final_answer, step.actions, step.repairs) == ("Paris", [], [])


@pytest.mark.parametrize(
    ("reply", "raw"),
    [
        ("Action: search\nAction Input:   weather in Paris  \n", "weather in Paris"),
        ("Action: search[weather in Paris]", "weather in Paris"),
        ('Action: search\nAction Input: ```json\n{"q": 1}\n```', '```json\n{"q": 1}\n```'),
        ('{"action": "search", "action_input": {"q": 1}}', '{"q": 1}'),
        ('{"action": "search", "action_input": "weather"}', "weather"),
    ],
)
def test_raw_input_is_what_the_model_wrote(reply: str, raw: str) -> None:
    assert parse_react(reply).actions[0].raw_arguments == raw


def test_text_is_the_kept_reply() -> None:
    reply = CANONICAL + "\nObservation: sunny\nThought: done\nFinal Answer: sunny\n"
    step = parse_react(reply)
    assert step.text == CANONICAL
    assert reply.startswith(step.text)


def test_empty_action_input_gives_empty_arguments() -> None:
    for reply in ("Action: get_time\nAction Input:", "Action: get_time", "Action: get_time[]"):
        (action,) = parse_react(reply).actions
        assert (action.tool, action.arguments, action.raw_arguments) == ("get_time", {}, "")


# --- options --------------------------------------------------------------------------------

TWO = (
    'Thought: Paris.\nAction: get_weather\nAction Input: {"location": "Paris"}\n'
    'Thought: Rome.\nAction: get_weather\nAction Input: {"location": "Rome"}'
)


def test_multi_action_keeps_every_action_in_order() -> None:
    step = parse_react(TWO)
    assert [a.arguments for a in step.actions] == [{"location": "Paris"}, {"location": "Rome"}]
    assert step.thought == "Paris.\n\nRome."
    assert step.repairs == []


def test_single_action_keeps_the_first_and_says_so() -> None:
    step = parse_react(TWO, multi_action=False)
    assert [a.arguments for a in step.actions] == [{"location": "Paris"}]
    assert step.thought == "Paris."
    assert step.repairs == ["first_action_only"]
    assert step.text == TWO  # the transcript keeps what the model wrote


def test_single_action_with_a_json_list() -> None:
    reply = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]'
    assert [a.tool for a in parse_react(reply).actions] == ["a", "b"]
    assert [a.tool for a in parse_react(reply, multi_action=False).actions] == ["a"]


def test_stop_word_the_server_ignored_is_cut() -> None:
    reply = CANONICAL + "<|observation|>sunny"
    step = parse_react(reply, stop_words=["<|observation|>"])
    assert step.text == CANONICAL
    assert step.repairs == ["cut_stop_word"]
    assert step.actions[0].arguments == {"location": "Paris"}


def test_stop_word_on_an_observation_label_reports_the_label() -> None:
    reply = CANONICAL + "\nObservation: sunny"
    assert parse_react(reply, stop_words=["\nObservation:"]).repairs == ["cut_observation"]


def test_earliest_stop_word_wins() -> None:
    cut = cut_reply("a STOP2 b STOP1 c", ["STOP1", "STOP2"])
    text, codes = cut.text, cut.codes
    assert (text, codes) == ("a", ["cut_stop_word"])


def test_stop_word_inside_think_block_is_not_a_cut() -> None:
    reply = "<think>I will write STOP later</think>\nFinal Answer: 4"
    step = parse_react(reply, stop_words=["STOP"])
    assert step.final_answer == "4"
    assert "cut_stop_word" not in step.repairs


def test_partial_custom_stop_word_is_trimmed() -> None:
    cut = cut_reply("Final Answer: 4\n<|obs", ["<|observation|>"])
    text, codes = cut.text, cut.codes
    assert (text, codes) == ("Final Answer: 4", ["trim_partial_stop"])


def test_empty_stop_words_are_ignored() -> None:
    cut = cut_reply("Final Answer: 4", ["", ""])
    assert (cut.text, cut.codes) == ("Final Answer: 4", [])


# --- cut_reply ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kept", "codes"),
    [
        ("Action: a\nObservation: x\nFinal Answer: y", "Action: a", ["cut_observation"]),
        ("Action: a\n**Observation:** x", "Action: a", ["cut_observation"]),
        ("Action: a\n观察：x", "Action: a", ["cut_observation"]),
        ("Action: a\nObserv", "Action: a", ["trim_partial_stop"]),
        ("Action: a\nObservation", "Action: a", ["trim_partial_stop"]),
        ("Action: a\n观", "Action: a", ["trim_partial_stop"]),
        ("Action: a\nOb", "Action: a\nOb", []),
        ("Action: a<|eot_id|>\n", "Action: a", ["special_token"]),
        ("Action: a   \n\n", "Action: a", []),
        ("<think>Observation: x</think>Action: a", "<think>Observation: x</think>Action: a", []),
        ("no labels at all", "no labels at all", []),
    ],
)
def test_cut_reply(reply: str, kept: str, codes: list[str]) -> None:
    cut = cut_reply(reply)
    text, got = cut.text, cut.codes
    assert text == kept
    assert [c for c in got if c != "think_block"] == codes


@pytest.mark.parametrize(
    ("reply", "reasoning", "rest"),
    [
        ("<think> a </think>\nFinal Answer: 1", "a", "\nFinal Answer: 1"),
        ("\n<Thinking>a</Thinking>b", "a", "b"),
        ("<reasoning>a</reasoning>b", "a", "b"),
        ("a\n</think>\nb", "a", "\nb"),
        ("<think></think>b", None, "b"),
        ("<think>a, cut off", "a, cut off", ""),
        ("no block", None, "no block"),
    ],
)
def test_split_think(reply: str, reasoning: str | None, rest: str) -> None:
    thinking = read_think(reply)
    assert (thinking.reasoning, thinking.rest) == (reasoning, rest)
    if rest.strip():  # the same block parse_react sets aside
        step = parse_react(reply, implicit_final_answer=True)
        assert step.thought == reasoning


def test_cut_reply_reports_think_blocks() -> None:
    assert cut_reply("<think>x</think>Final Answer: 1").codes == ["think_block"]
    assert cut_reply("<think>Action: a").codes == ["unclosed_think"]


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "pos", "expected"),
    [
        ("", 0, EXPECTED_STEP),
        ("  \n\t", 0, EXPECTED_STEP),
        ("Observation: sunny", 0, EXPECTED_STEP + " before any 'Observation:'"),
        ("Thought: hmm\nAction:\n", 20, "a tool name after 'Action:'"),
        ('Thought: x\nAction Input: {"a": 1}', 11, "'Action: <tool name>'"),
        ("Thought: x\nFinal Answer:", 11, "the answer text"),
        ("Thought: x\nAction: None", 19, "a tool name or 'Final Answer:'"),
        ("Thought: only thinking", 22, "'Action:' and 'Action Input:', or 'Final Answer:'"),
        ("<think>x</think>", 16, EXPECTED_STEP + " after the reasoning"),
        ("<think>still thinking", 21, "'</think>' then " + EXPECTED_STEP),
    ],
)
def test_errors_say_where_and_what(reply: str, pos: int, expected: str) -> None:
    with pytest.raises(ReActParseError) as info:
        parse_react(reply)
    assert info.value.pos == pos
    assert info.value.expected == expected
    assert info.value.text == reply


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("", NoticeCode.EMPTY),
        ("Observation: sunny", NoticeCode.NO_STEP),
        ("Thought: only thinking", NoticeCode.NO_STEP),
        ("<think>x</think>", NoticeCode.ONLY_REASONING),
        ("<think>still thinking", NoticeCode.ONLY_REASONING),
        ("It is sunny.", NoticeCode.UNLABELED),
        ("Thought: hmm\nAction:\n", NoticeCode.UNREADABLE),
    ],
)
def test_a_parse_error_carries_its_code(reply: str, code: NoticeCode) -> None:
    with pytest.raises(ReActParseError) as info:
        parse_react(reply)
    assert info.value.code == code


def test_error_line_and_column() -> None:
    with pytest.raises(ReActParseError) as info:
        parse_react("Thought: a\nThought: b\nAction:   ")
    assert (info.value.line, info.value.column) == (3, 8)
    assert "line 3, column 8" in str(info.value)


def test_parse_errors_are_model_errors_and_value_errors() -> None:
    with pytest.raises(ModelBehaviorError):
        parse_react("")
    with pytest.raises(ValueError):
        parse_react("")


def test_a_reply_with_no_label_is_an_error_by_default() -> None:
    # Taking unlabeled prose for the answer lets a model answer from its own weights,
    # without calling the tool that has the facts.
    reply = "  Paris is sunny, 28°C."
    with pytest.raises(ReActParseError) as info:
        parse_react(reply)
    assert info.value.pos == 2
    assert info.value.expected == EXPECTED_STEP
    assert "no label" in str(info.value)
    with pytest.raises(ReActParseError) as info:
        parse_react("<think>easy</think>\nParis.")
    assert info.value.pos == 20


def test_implicit_final_answer_when_enabled() -> None:
    step = parse_react("<think>easy</think>\nParis.", implicit_final_answer=True)
    assert (step.thought, step.final_answer, step.actions) == ("easy", "Paris.", [])
    assert step.repairs == ["think_block", "implicit_final_answer"]


def test_implicit_final_answer_changes_nothing_for_labelled_replies_or_blobs() -> None:
    blob = '{"action": "get_weather", "action_input": {"location": "Paris"}}'
    for reply in (CANONICAL, "Final Answer: 4", blob, "Thought: hmm\nAction: Finish[4]"):
        assert parse_react(reply) == parse_react(reply, implicit_final_answer=True)
    with pytest.raises(ReActParseError):
        parse_react("Thought: only thinking", implicit_final_answer=True)


def test_a_recoverable_problem_is_not_an_error() -> None:
    step = parse_react("Action:\nFinal Answer: 4")
    assert step.final_answer == "4"
    assert step.repairs == ["empty_action_dropped"]


# --- labels and patterns ---------------------------------------------------------------------


@pytest.mark.parametrize("word", [w for w, k, _ in P._WORDS if k != P.OBSERVATION])
def test_every_label_word_is_recognised(word: str) -> None:
    m = P.LABEL.match(word + ":")
    assert m is not None and m.group("word") == word
    kind, _strength = P.LABEL_WORDS[P.normalise_word(word)]
    assert labels._word_info(word)[0] == kind


@pytest.mark.parametrize("word", [w for w, k, _ in P._WORDS if k == P.OBSERVATION])
def test_every_observation_word_cuts(word: str) -> None:
    cut = cut_reply(f"Final Answer: 1\n{word}: x")
    assert (cut.text, cut.codes) == ("Final Answer: 1", ["cut_observation"])


@pytest.mark.parametrize(
    "line",
    [
        "Action items: milk",
        "Thoughtful: no",
        "Thought experiment",
        "ActionScript: x",
        "The Action: x",
        "**Action** items",
    ],
)
def test_words_that_only_look_like_labels(line: str) -> None:
    assert labels.scan_labels(line) == []


def test_repair_codes_are_short_stable_identifiers() -> None:
    for code in PARSE_REPAIR_CODES:
        assert re.fullmatch(r"(json:)?[a-z_]+", code), code


def test_labels_inside_fences_are_text() -> None:
    reply = "Final Answer: run\n```\nAction: rm -rf /\nObservation? no\n```\ndone"
    step = parse_react(reply)
    assert step.final_answer == "run\n```\nAction: rm -rf /\nObservation? no\n```\ndone"


def test_unclosed_fence_does_not_hide_labels() -> None:
    step = parse_react('Thought: x\n```\nAction: search\nAction Input: {"q": 1}')
    assert step.actions[0].tool == "search"


# --- hostile input ------------------------------------------------------------------------------

MB = 1_000_000

HOSTILE = [
    "Action: " * 100_000,
    "{" * MB,
    "[" * MB,
    "[{" * (MB // 2),
    "Thought:" * (MB // 8),
    "Thought:\n" * (MB // 9),
    "Action: x\n" * (MB // 10),
    "Action Input: {\n" * (MB // 16),
    "```\n" * (MB // 4),
    "Observation:" * (MB // 12),
    "Thought" + " " * MB,
    '{"a": "' + "x" * MB,
    "<tool_call>" * (MB // 11),
    '{"a": 1}\n' * (MB // 9),
    "Thought: a. " * (MB // 12),
    "Thought: a. Action: " * (MB // 20),
    "." * MB,
    "<think>" * (MB // 7),
    "</think>" * (MB // 8),
    "Action: x[" * (MB // 10),
    "Action: x(" + "a=1, " * (MB // 5) + ")",
    "Action: [" + '{"action": "a"},' * (MB // 16) + "]",
    "Action: t\nAction Input: [" + "," * MB,
    "Action: t\nAction Input: [" + "1," * (MB // 2),
    "Action: t\nAction Input: {" + "a:1 " * (MB // 4),
    "Action: t\nAction Input: " + "[" * MB,
    "\n" * MB,
    "**" * (MB // 2),
    "思考：" * (MB // 3),
    "Final Answer: " + "x " * (MB // 2),
    "Action: search\nAction Input: " + '"' * MB,
    "```json\n" + "{" * MB,
    "Final Answer: x\nObserv" + "a" * MB,
]


@pytest.mark.parametrize("reply", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_hostile_megabyte_replies_complete(reply: str) -> None:
    # Linear-time patterns and scanners: each of these finishes in well under a second
    # (timing itself is the benchmarks' business); here the result must be sane.
    try:
        step = parse_react(reply)
    except ReActParseError as exc:
        assert 0 <= exc.pos <= len(reply)
    else:
        assert reply.startswith(step.text)
        assert (step.final_answer is None) != (not step.actions)
        assert set(step.repairs) <= PARSE_REPAIR_CODES


def test_labels_past_the_bound_are_text() -> None:
    many = "Thought: x\n" * (labels.MAX_LABELS + 5)
    assert len(labels.scan_labels(many)) == labels.MAX_LABELS


def test_fences_past_the_bound_hide_nothing() -> None:
    fences = "```\n" * (labels.MAX_FENCES + 1)  # odd: the last one would open
    step = parse_react(fences + "Final Answer: done")
    assert step.final_answer == "done"


def test_kwargs_past_the_bound_stay_text() -> None:
    inner = ", ".join(f"a{i}=1" for i in range(blobs.MAX_KWARGS + 1))
    step = parse_react(f"Action: f({inner})")
    assert step.actions[0].arguments == inner


def test_an_input_giving_a_key_two_values_then_prose_is_read_not_raised() -> None:
    # once raised json's own JSONDecodeError out of parse_react (the duplicate was
    # found before the prose after the object)
    step = parse_react('Thought: x\nAction: f\nAction Input: {"a": 1, "a": 2} then more')
    (call,) = step.actions
    assert call.arguments == {"a": 2}
    assert {"json:duplicate_key", "json:extra_data"} <= set(call.repairs)
