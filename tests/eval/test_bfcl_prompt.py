"""``bfcl-prompt``: the text protocol with BFCL's Prompt-mode system prompt and decoder,
and the BFCL summary figures the eval prints beside its own."""

from __future__ import annotations

import asyncio
import importlib
import json
from typing import Any

import pytest
from support.parts import BFCL, BFCL_HINT, require_module

from react_engine.eval.bfcl import run_bfcl
from react_engine.eval.bfcl_case import CaseResult, EvalSettings, run_case
from react_engine.eval.bfcl_data import load_cases
from react_engine.eval.bfcl_prompt import BFCL_PROMPT, BfclPromptProtocol, parse_python_calls
from react_engine.eval.bfcl_report import bfcl_summary, format_report
from react_engine.testing import ScriptedModel, reply
from react_engine.types import ModelRequest

require_module("bfcl_eval", BFCL, BFCL_HINT)


def test_a_python_call_list_is_read_as_bfcl_reads_it() -> None:
    got = parse_python_calls(
        '[math.factorial(number=5), spotify.play(artist="Maroon 5", duration=15, '
        'pair=(1, 2), opts={"a": [1.5, True, None]})]'
    )
    assert got == [
        ("math.factorial", {"number": 5}, None),
        (
            "spotify.play",
            {
                "artist": "Maroon 5",
                "duration": 15,
                "pair": [1, 2],
                "opts": {"a": [1.5, True, None]},
            },
            None,
        ),
    ]
    # Brackets may be left out, code fences are stripped.
    assert parse_python_calls("```\nf(x='a')\n```") == [("f", {"x": "a"}, None)]
    assert parse_python_calls("```python\n[f(x=1)]\n```") == [("f", {"x": 1}, None)]
    # Not a call list: the reply is an answer.
    assert parse_python_calls("The area is 25.") is None
    assert parse_python_calls("[1, 2]") is None
    assert parse_python_calls("[]") == []


def test_a_value_that_is_no_literal_is_never_guessed() -> None:
    ((name, args, error),) = parse_python_calls("[f(x=y)]") or []
    assert (name, args) == ("f", "f(x=y)") and error is not None and "'x'" in error
    ((_, args, error),) = parse_python_calls("[f(1, x=2)]") or []
    assert args == "f(1, x=2)" and error is not None and "positional" in error


def test_the_system_prompt_is_bfcls_own() -> None:
    prompts = importlib.import_module("bfcl_eval.constants.default_prompts")
    (case,) = load_cases(["simple"], only=["simple_python_0"])
    system = BfclPromptProtocol(case.functions)._prompt
    classic = prompts.PROMPT_STYLE_TEMPLATES["classic"]
    assert system.startswith(classic["persona"] + classic["task"])
    assert prompts.OUTPUT_FORMAT_MAPPING["python"] in system
    assert classic["multiturn_behavior"] in system
    listed = json.loads(
        system.split("Here is a list of functions in json format that you can invoke.\n")[1]
    )
    assert listed[0]["name"] == "calculate_triangle_area"
    assert listed[0]["description"].endswith(
        " Note that the provided function is in Python 3 syntax."
    )
    assert listed[0]["parameters"] == case.functions[0]["parameters"]  # BFCL's dialect, as shipped


def test_bfcl_prompt_cases_are_sent_bfcls_prompt_and_scored() -> None:
    cases = load_cases(
        ["simple", "irrelevance", "live_simple"],
        only=["simple_python_0", "irrelevance_0", "live_simple_0-0-0"],
    )
    replies = {
        "simple_python_0": reply("[calculate_triangle_area(base=10, height=5)]"),
        "irrelevance_0": reply("None of the functions can be used."),
        "live_simple_0-0-0": reply("[get_user_info(user_id=7890, special='black')]"),
    }
    report = run_bfcl(cases, [BFCL_PROMPT], recorded={BFCL_PROMPT: replies})
    got = {r.case: (r.correct, r.decode_failure, r.calls) for r in report.results}
    assert got["simple_python_0"] == (
        True,
        False,
        [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}],
    )
    assert got["irrelevance_0"] == (True, False, [])
    assert got["live_simple_0-0-0"][0] is True
    wrong = run_bfcl(
        cases[:1],
        [BFCL_PROMPT],
        recorded={
            BFCL_PROMPT: {"simple_python_0": reply("[calculate_triangle_area(base=x, height=5)]")}
        },
    )
    assert wrong.results[0].decode_failure and not wrong.results[0].correct


def test_a_live_cases_system_message_and_history_are_sent() -> None:
    seen: list[ModelRequest] = []

    class Spy(ScriptedModel):
        async def complete(self, request: ModelRequest) -> Any:
            seen.append(request)
            return await super().complete(request)

    cases = {c.id: c for c in load_cases(["live_simple", "live_multiple", "live_irrelevance"])}
    with_system = next(c for c in cases.values() if c.system)
    with_history = next(c for c in cases.values() if c.history)
    for case in (with_system, with_history):
        for protocol in ("function_calling", "text", BFCL_PROMPT):
            seen.clear()
            asyncio.run(run_case(case, protocol, Spy([reply("ok")]), "m", EvalSettings()))
            (request,) = seen
            contents = [str(m.content) for m in request.messages]
            if protocol == BFCL_PROMPT:  # BFCL's own prompt, then the case's system message
                assert contents[0].startswith(BfclPromptProtocol(case.functions)._prompt)
            if case.system:
                assert case.system.strip() in contents[0], protocol
            for _, content in case.history:
                assert any(content.strip() in c for c in contents), (protocol, content)
            assert case.question in contents[-1], protocol


def _result(category: str, correct: bool) -> CaseResult:
    return CaseResult("x", category, "text", correct, False, "")


def test_bfcls_summary_is_the_unweighted_mean_of_the_four_call_categories() -> None:
    results = (
        [_result("simple", True)] * 3
        + [_result("simple", False)]  # 75%
        + [_result("multiple", True)]  # 100%
        + [_result("parallel", False)] * 9  # 0%
        + [_result("parallel_multiple", True), _result("parallel_multiple", False)]  # 50%
        + [_result("irrelevance", True)]
    )
    summary = bfcl_summary(results)
    assert summary["Python Simple AST"] == 0.75
    assert summary["Non-Live AST Summary"] == pytest.approx((0.75 + 1 + 0 + 0.5) / 4)
    assert summary["Irrelevance"] == 1.0
    assert summary["Live AST Summary"] is None
    # Live: weighted by case count.
    live = (
        [_result("live_simple", True)] * 3
        + [_result("live_multiple", False)]
        + [_result("live_parallel", True)]
        + [_result("live_parallel_multiple", False)]
    )
    assert bfcl_summary(live)["Live AST Summary"] == pytest.approx(4 / 6)
    assert bfcl_summary(results[:4])["Non-Live AST Summary"] is None


def test_the_table_names_bfcls_figures() -> None:
    cases = load_cases(["simple"], only=["simple_python_0"])
    report = run_bfcl(
        cases,
        [BFCL_PROMPT],
        recorded={
            BFCL_PROMPT: {"simple_python_0": reply("[calculate_triangle_area(base=10, height=5)]")}
        },
    )
    table = format_report(report)
    assert "bfcl-prompt: Python Simple AST 100.0%" in table
    assert "Non-Live AST Summary" in table


def test_bfcl_prompt_decodes_freely_on_a_constraining_server() -> None:
    from react_engine import Agent, CapabilityCache, CapabilityRegistry
    from react_engine.testing.tools import get_weather

    registry = CapabilityRegistry.from_default(env={})
    registry.register("house-*", constrained_decoding=True, constraint_style="llama.cpp")
    for protocol, constrained in (("text", True), (BfclPromptProtocol([]), False)):
        model = ScriptedModel([], default=reply("Final Answer: none"))
        agent = Agent(
            "house-model",
            [get_weather],
            client=model,
            protocol=protocol,
            registry=registry,
            capability_cache=CapabilityCache(),
        )
        agent.run("q")
        assert (model.requests[0].constraint is not None) is constrained, protocol
