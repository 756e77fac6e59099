"""BFCL's multi-turn categories: the wheel's backends as tools, each turn through the agent
loop, graded by BFCL's own multi-turn checker. Scripted replies, no server."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from support.parts import BFCL, BFCL_HINT, require_module

from react_engine.cli import main
from react_engine.eval.bfcl import DEFAULT_PROTOCOLS, eval_protocols, run_bfcl
from react_engine.eval.bfcl_case import EvalSettings, run_multi_turn_case
from react_engine.eval.bfcl_multi_turn import (
    MULTI_TURN_CATEGORIES,
    Backends,
    added_functions_prompt,
    call_string,
    load_multi_turn_cases,
)
from react_engine.eval.bfcl_prompt import BFCL_PROMPT, parse_python_calls
from react_engine.eval.bfcl_recording import DEFAULT_RECORDINGS
from react_engine.eval.bfcl_report import format_report
from react_engine.testing import ScriptedModel, reply, tool_call_reply
from react_engine.types import ModelResponse

require_module("bfcl_eval", BFCL, BFCL_HINT)


def test_every_multi_turn_category_loads() -> None:
    cases = load_multi_turn_cases()
    counts = {c: sum(x.category == c for x in cases) for c in MULTI_TURN_CATEGORIES}
    assert counts == dict.fromkeys(MULTI_TURN_CATEGORIES, 200)
    for case in cases:
        assert len(case.turns) == len(case.ground_truth) and case.functions
    miss = next(c for c in cases if c.category == "multi_turn_miss_func")
    ((turn, held),) = miss.added.items()
    assert miss.turns[turn] == ""  # the turn only brings the held-out functions
    names = {f["name"] for f in held}
    assert not names & {f["name"] for f in miss.functions_at(turn - 1)}
    assert names <= {f["name"] for f in miss.functions_at(turn)}


def test_a_call_reaches_the_backend_only_with_identifier_names() -> None:
    assert call_string("cd", {"folder": "a'b"}) == 'cd(folder="a\'b")'
    assert call_string("ls", {}) == "ls()"
    assert call_string("cd", {"folder=1) or print(1": 1}) is None
    assert call_string("__import__('os').system", {}) is None
    assert call_string("cd", {"class": 1}) is None


def test_backends_keep_state_per_run_and_leave_none_behind() -> None:
    (case,) = load_multi_turn_cases(["multi_turn_base"], only=["multi_turn_base_1"])
    first, second = Backends(case), Backends(case)
    utils = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    before = set(vars(utils))
    try:
        first.execute(["cd(folder='workspace')"])
        (where,) = first.execute(["pwd()"])
        (other,) = second.execute(["pwd()"])
        assert "workspace" in where and "workspace" not in other
    finally:
        first.close()
        second.close()
    assert set(vars(utils)) == before


def _gold_replies(case_ids: list[str]) -> dict[str, list[ModelResponse]]:
    """Function-calling replies that make the ground truth's calls, one step per call,
    then a final answer at the end of each turn."""
    cases = load_multi_turn_cases(["multi_turn_base"], only=case_ids)
    out: dict[str, list[ModelResponse]] = {}
    for case in cases:
        replies: list[ModelResponse] = []
        for turn in case.ground_truth:
            for call in turn:
                ((name, args, error),) = parse_python_calls(call) or []
                assert error is None and isinstance(args, dict)
                replies.append(tool_call_reply((name, args)))
            replies.append(reply("Done."))
        out[case.id] = replies
    return out


def test_the_ground_truths_calls_pass_bfcls_checker_and_a_wrong_turn_fails() -> None:
    ids = ["multi_turn_base_1", "multi_turn_base_2"]
    gold = _gold_replies(ids)
    cases = load_multi_turn_cases(["multi_turn_base"], only=ids)
    report = run_bfcl(cases, ["function_calling"], recorded={"function_calling": gold})
    assert [(r.case, r.correct, r.reason) for r in report.results] == [
        ("multi_turn_base_1", True, ""),
        ("multi_turn_base_2", True, ""),
    ]
    first = report.results[0]
    assert first.calls[0] == {
        "name": "ls",
        "arguments": {"turn": 0, "step": 0, "call": "ls(a=True)"},
    }
    assert first.requests == len(gold["multi_turn_base_1"])
    # The model skips the second turn's calls: BFCL's checker fails the case.
    wrong = list(gold["multi_turn_base_1"])
    del wrong[2:4]
    report = run_bfcl(
        cases[:1], ["function_calling"], recorded={"function_calling": {ids[0]: wrong}}
    )
    (result,) = report.results
    assert not result.correct and "turn 1" in result.reason


def test_a_turn_past_the_step_limit_is_force_terminated() -> None:
    cases = load_multi_turn_cases(["multi_turn_base"], only=["multi_turn_base_1"])
    looping = [tool_call_reply(("pwd", {})) for _ in range(5)]
    report = run_bfcl(
        cases,
        ["function_calling"],
        recorded={"function_calling": {"multi_turn_base_1": looping}},
        settings=EvalSettings(max_turn_steps=3),
    )
    (result,) = report.results
    assert not result.correct and result.reason.startswith("force-terminated: 1 turn(s) of 4")


WRITTEN: dict[str, Any] = {
    "function_calling": tool_call_reply(("ls", {"a": True})),
    "text": reply('Thought: list.\nAction: ls\nAction Input: {"a": true}'),
    "structured": reply('{"thought": "t", "action": {"tool": "ls", "arguments": {"a": true}}}'),
    "minimal": reply('CALL ls {"a": true}'),
    BFCL_PROMPT: reply("[ls(a=True)]"),
}
"""The call ``ls(a=True)`` as each protocol the eval runs reads it."""

FINAL: dict[str, Any] = {
    "function_calling": reply("Listed."),
    "text": reply("Thought: done.\nFinal Answer: Listed."),
    "structured": reply('{"thought": "t", "action": {"final_answer": "Listed."}}'),
    "minimal": reply("ANSWER Listed."),
    BFCL_PROMPT: reply("Listed."),
}


def test_the_multi_turn_replies_cover_every_protocol_the_eval_runs() -> None:
    assert set(WRITTEN) == set(FINAL) == set(eval_protocols())
    assert set(DEFAULT_PROTOCOLS) <= set(WRITTEN)


@pytest.mark.parametrize("protocol", list(WRITTEN))
def test_every_protocol_runs_a_multi_turn_case(protocol: str) -> None:
    written, final = WRITTEN, FINAL
    cases = load_multi_turn_cases(["multi_turn_base"], only=["multi_turn_base_1"])
    replies = [written[protocol], final[protocol]] + [final[protocol]] * 3
    report = run_bfcl(cases, [protocol], recorded={protocol: {"multi_turn_base_1": replies}})
    (result,) = report.results
    assert result.error is None, result.error
    assert result.calls[0]["arguments"]["call"] == "ls(a=True)"
    # The first turn is right; the second turn made no call: BFCL fails it there.
    assert not result.correct and "turn 1" in result.reason
    assert "multi_turn_base" in format_report(report)


def test_a_turn_that_spends_the_error_budget_ends_and_the_case_is_graded() -> None:
    cases = load_multi_turn_cases(["multi_turn_base"], only=["multi_turn_base_1"])
    garbage = [reply("no format at all")] * 40
    report = run_bfcl(cases, ["text"], recorded={"text": {"multi_turn_base_1": garbage}})
    (result,) = report.results
    assert result.error is None and result.decode_failure
    assert not result.correct and "turn 0" in result.reason


def test_the_recorded_multi_turn_case_replays_from_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = DEFAULT_RECORDINGS / "multi-turn"
    args = ["eval", "bfcl", "--scripted", str(directory), "--quiet"]
    assert main([*args, "--cases", "multi_turn_base_100"]) == 0
    out = capsys.readouterr().out
    assert "1 cases × 4 protocol(s)" in out and "up to 3 steps a turn" in out
    for protocol in (*DEFAULT_PROTOCOLS, BFCL_PROMPT):
        assert f"{protocol}: Multi Turn Base" in out


@pytest.mark.parametrize(
    "selection",
    [["--categories", "multi_turn_base"], ["--cases", "multi_turn_base_100"]],
    ids=["categories", "cases"],
)
def test_scripted_without_a_directory_replays_the_multi_turn_recordings(
    selection: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Only multi-turn asked for: the checkout's multi-turn recordings, without naming them.
    assert main(["eval", "bfcl", "--scripted", "--quiet", *selection]) == 0
    out = capsys.readouterr().out
    assert f"recorded replies in {DEFAULT_RECORDINGS / 'multi-turn'}" in out
    assert "1 cases × 4 protocol(s)" in out and "function_calling: Multi Turn Base" in out


def test_held_out_functions_are_offered_from_their_turn_with_bfcls_words() -> None:
    (case,) = load_multi_turn_cases(["multi_turn_miss_func"], limit=1)
    ((turn, held),) = case.added.items()
    held_names = {f["name"] for f in held}
    model = ScriptedModel([reply("Done.")] * len(case.turns))  # every turn answered at once
    result = asyncio.run(
        run_multi_turn_case(case, "function_calling", model, "scripted", EvalSettings())
    )
    assert result.error is None and result.requests == len(case.turns)
    offered = [{t["function"]["name"] for t in r.tools or ()} for r in model.requests]
    for index, names in enumerate(offered):
        assert (held_names <= names) == (index >= turn), index  # from that turn on, not before
    asked = model.requests[turn].messages[-1]
    assert asked.content == added_functions_prompt()  # the turn brings only the functions
    assert not result.correct  # no call made: BFCL's checker fails the case
