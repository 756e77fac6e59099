"""The plain-reply shortcut of :func:`parse_react` gives exactly what the tolerant passes give.

``labels.plain_labels`` stands in for ``cut_reply`` and ``scan_labels`` when a reply is plain
(canonical labels, nothing to cut, see its docstring). Here every golden reply, a set of replies at
the edge of "plain" and generated ones go through both ways: the shortcut's cut and labels
must equal the passes' whenever it answers, and ``parse_react`` must return the same
:class:`~react_engine.types.ParsedStep` (``raw_input`` included) or raise the same error
with the shortcut switched off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from react_engine.errors import ReActParseError
from react_engine.parsing import cut as C
from react_engine.parsing import labels as L
from react_engine.parsing import parse_react
from react_engine.parsing import react as R

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "parser"
CASES = sorted(FIXTURES.glob("*.txt"))
TEXT_STOP = ["\nObservation:"]  # what the text protocol's templates send

settings.register_profile(
    "plain", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "plain-fuzz", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = settings.get_profile(
    "plain-fuzz" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "plain"
)


def _outcome(text: str, kwargs: dict[str, Any]) -> Any:
    try:
        return parse_react(text, **kwargs)
    except ReActParseError as exc:
        return ("error", str(exc), exc.pos, exc.expected)


def check_same(text: str, **kwargs: Any) -> bool:
    """Assert both ways agree; return whether the shortcut took the reply."""
    stop = kwargs.get("stop_words")
    labels = _plain(text, stop)
    if labels is not None:
        cut = C.cut_reply(text, stop)
        kept = text.rstrip()
        assert cut == C.Cut(kept, [], None, 0, unclosed_think=False, masked=kept)
        assert labels == L.scan_labels(cut.masked)
    fast = _outcome(text, kwargs)
    with mock.patch.object(R, "plain_labels", lambda _text, _stop: None):
        slow = _outcome(text, kwargs)
    assert fast == slow
    return labels is not None


def _plain(text: str, stop: list[str] | None) -> list[L.Label] | None:
    """The labels of the shortcut, when it takes ``text`` (no partial stop at its end)."""
    kept = text.rstrip()
    labels = L.plain_labels(text, stop)
    return labels if labels is not None and C.partial_stop(kept, stop) == len(kept) else None


def _kwargs(path: Path) -> dict[str, Any]:
    args = path.with_suffix(".args.json")
    return json.loads(args.read_text("utf-8")) if args.exists() else {}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden_reply_same_both_ways(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")
    kwargs = _kwargs(path)
    check_same(text, **kwargs)
    if "stop_words" not in kwargs:
        check_same(text, **kwargs, stop_words=TEXT_STOP)
    check_same(text, multi_action=False, implicit_final_answer=True)


def test_the_shortcut_takes_the_usual_replies() -> None:
    taken = sum(check_same(p.read_bytes().decode("utf-8"), **_kwargs(p)) for p in CASES)
    assert taken >= 20, "plain golden replies should not need the tolerant passes"
    usual = [
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}',
        "Thought: I need the weather in Beijing.\nAction:\n```json\n"
        '{"action": "get_weather", "action_input": {"location": "Beijing"}}\n```',
        "Thought: I now know the final answer\nFinal Answer: It is sunny.\n\nSecond line.",
        'Action: search\nAction Input: {\n  "q": "x",\n  "n": [1, 2]\n}\n',
    ]
    for text in usual:
        assert check_same(text, stop_words=TEXT_STOP), text
    for text in usual[:3]:  # and the usual shapes are read directly
        labels = _plain(text, TEXT_STOP)
        assert labels is not None and R._plain_step(text.rstrip(), labels) is not None, text


EDGES = [
    "Thought: x\nAction: get_weather\nAction Input: {}\nObservation: made up",
    "Thought: x\nAction: get_weather\nAction Input: {}\nObserv",
    "Thought: x\nAction: get_weather\nAction Input: {}<|eot_id|>",
    "<think>hm</think>Thought: x\nAction: f\nAction Input: {}",
    "Thought: x\n```\nFinal Answer: inside a fence\n```\nFinal Answer: y",
    "Thought: x\n```\nAction: f\n```",
    "Thought: I search. Action: search\nAction Input: {}",
    "Thought: I know. Final Answer: 42\nAction: f\nAction Input: {}",
    "Thought: Done. Final Answer: x\nFinal Answer: y",
    "Thought: Hm. Action: g\nAction: f",
    "Thought: x\nAction: f[q]\nAction Input: {}",
    'Thought: x\nAction: f(q=1)\nAction Input: {"q": 2}',
    'Thought: x\nAction: {"action": "f", "action_input": {}}\nAction Input: {}',
    "Thought: x\nAction: Finish\nAction Input: done",
    "Thought: x\nAction: None",
    "Thought: x\nAction: f.\nAction Input: {}",
    "Thought: x\nAction: **f**\nAction Input: {}",
    "Thought: x\nAction: f\nAction Input: {}\nAction Input: {}",
    "Thought: x\nAction: f\nAction Input: {}\nAction: g\nAction Input: {}",
    "Thought: x\nAction: f\nAction Input: {}\nFinal Answer: y",
    "Thought: x\nFinal Answer: y\nAction: f\nAction Input: {}",
    "Thought: x\nFinal Answer: y\nQuestion: z",
    "Thought: x\nFinal Answer: y\nAnswer: z",
    "Thought: x\nFinal Answer:   \n",
    "Thought: x\nFinal Answer:",
    "Thought:\nAction: f\nAction Input:",
    "Thought:**x**\nAction: f",
    "Thought : x\nAction: f",
    "  Thought: x\nAction: f",
    "Some prose first.\nThought: x\nAction: f\nAction Input: {}",
    'Thought: x\n{"action": "f", "action_input": {}}\nFinal Answer: y',
    'Thought: x\nAction: f\nAction Input: {"a": [1, 2\n',
    "Thought: x\nAction: f\nAction Input: {'a': True,}",
    'Thought: x\nAction: f\nAction Input: "text"',
    "Thought: x\nAction: f[q]",
    "Thought: x\nAction: f(q=1)",
    "Thought: x\r\nAction: f\r\nAction Input: {}\r\n",
    "Thought: x\nAction: f\nAction Input: {}\nThoughts: more",
    "Thought: x\nAction: f\nAction Input: {}\n1. Action: g",
    "Thought: x\nAction: f\nAction Input: {}\n\n\n   \n",
    "Thought: x\nAction Input: {}\nAction: f",
    "Thought: x\nAction: f\nAction Input: ```json\n{}\n```",
    "Thought: x\nAction: f\nAction Input: {}\n```\nFinal Answer: y\n```",
    "Final Answer: y\n观察：z",
    "Final Answer: 答案\n最终答案：z",
    "Thought: x\n\nFinal Answer: a ~~~ b",
    "Thought: long\nFinal Answer: " + "a line\n" * 300,  # past the plain pass's line limit
    "Thought: long\nAction: f\nAction Input: {\n" + '"k": 1,\n' * 250 + '"z": 0}',
]


@pytest.mark.parametrize("text", EDGES)
def test_edges_same_both_ways(text: str) -> None:
    for kwargs in ({}, {"stop_words": TEXT_STOP}, {"multi_action": False}):
        check_same(text, **kwargs)
    check_same(text, stop_words=["Input"])
    check_same(text, stop_words=["```", "y"])


PIECES = [
    "Thought:",
    "Thought: ",
    "Action:",
    "Action: ",
    "Action Input:",
    "Action Input: ",
    "Final Answer:",
    "Final Answer: ",
    "Action Inputs: ",
    "Thoughts:",
    "Answer:",
    "Question: ",
    "Observation:",
    "Observ",
    "Finish",
    "None",
    "get_weather",
    "search.",
    "**",
    "_",
    "```",
    "```json",
    "~~~",
    "{",
    "}",
    "[",
    "]",
    '{"location": "Paris"}',
    '{"action": "get_weather", "action_input": {"location": "Beijing"}}',
    '{"a": [1, 2',
    '"quoted"',
    "x",
    "I need it. ",
    ".",
    "<think>",
    "</think>",
    "\n",
    "\n",
    "\n",
    " ",
    "\t",
    "\r\n",
    "1. ",
    "# ",
]

replies = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=30).map(
    "".join
)


@settings(PROFILE)
@given(text=replies, stop=st.sampled_from([None, TEXT_STOP, ["Observ"], ["x"], ["\n\n"]]))
@example(text="Thought: a\nAction: b\nAction Input: {}", stop=None)
@example(text="Thought: a\nFinal Answer: b\n\n", stop=["\n\n"])
def test_generated_replies_same_both_ways(text: str, stop: list[str] | None) -> None:
    check_same(text, stop_words=stop)
    check_same(text, stop_words=stop, multi_action=False, implicit_final_answer=True)


@settings(PROFILE)
@given(
    thought=st.text(max_size=40),
    tool=st.text(max_size=12),
    args=st.dictionaries(st.text(max_size=6), st.text(max_size=6) | st.integers(), max_size=3),
    answer=st.text(max_size=40),
    indent=st.sampled_from([None, 2]),
)
def test_canonical_shapes_same_both_ways(
    thought: str, tool: str, args: dict[str, Any], answer: str, indent: int | None
) -> None:
    blob = json.dumps(args, indent=indent, ensure_ascii=False)
    check_same(f"Thought: {thought}\nAction: {tool}\nAction Input: {blob}", stop_words=TEXT_STOP)
    call = json.dumps({"action": tool, "action_input": args}, indent=indent)
    check_same(f"Thought: {thought}\nAction:\n```json\n{call}\n```", stop_words=TEXT_STOP)
    check_same(f"Thought: {thought}\nFinal Answer: {answer}", stop_words=TEXT_STOP)
