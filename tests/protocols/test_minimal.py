"""The fourth shipped protocol, ``minimal``, is accepted everywhere a protocol is named.

It ships as one module (``react_engine/protocols/minimal.py``) and one registry line (which
also exports it from ``react_engine``), and nothing else in the package names it but the
import type checkers read: the agent, the CLI's ``--protocol``, the scripted
router behind ``--dry-run``/``--scripted``, ``compare``, ``eval bfcl`` and ``auto``'s
choice all read the registry when they run. The last tests register a protocol after
import and check that the same places accept it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.parts import BFCL, BFCL_HINT, require_module
from support.toy_protocol import ToyProtocol

from react_engine import Agent, Capabilities, ScriptedModel
from react_engine.cli import main
from react_engine.cli.commands import build_parser
from react_engine.compare.run import CompareSettings, Target, run_comparison
from react_engine.compare.suite import Task, load_tasks
from react_engine.eval.bfcl import run_bfcl
from react_engine.eval.bfcl_data import load_cases
from react_engine.protocols import registry as selection
from react_engine.protocols.base import RequestContext
from react_engine.protocols.minimal import REMINDER, MinimalProtocol
from react_engine.protocols.registry import (
    ProtocolOptions,
    ScriptStep,
    adapt,
    auto_order,
    choose,
    protocol_names,
    register,
)
from react_engine.testing import tool_call_reply
from react_engine.testing.tools import calculator, get_weather
from react_engine.types import ModelResponse, UserTurn

PACKAGE = Path(__file__).resolve().parents[2] / "react_engine"


def minimal_agent(script: list[str], **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    agent = Agent(
        "any-model", [get_weather, calculator], protocol="minimal", client=model, **options
    )
    return agent, model


@pytest.fixture
def registry() -> Iterator[None]:
    saved = dict(selection.PROTOCOLS)
    yield
    selection.PROTOCOLS.clear()
    selection.PROTOCOLS.update(saved)


# --- the protocol ----------------------------------------------------------------------------


def test_it_is_named_in_three_places_only() -> None:
    """Its module, the one registry line (which exports it), and the one import that type
    checkers read; no list of protocols elsewhere names it."""
    naming = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"""["']minimal["']|\bMinimalProtocol\b""", path.read_text("utf-8"))
    )
    assert naming == ["protocols/__init__.py", "protocols/minimal.py", "protocols/registry.py"]
    typed = (PACKAGE / "protocols" / "__init__.py").read_text("utf-8")
    assert typed.count("MinimalProtocol") == 2  # ``from .minimal import X as X``
    line = [
        ln
        for ln in (PACKAGE / "protocols" / "registry.py").read_text("utf-8").splitlines()
        if '"minimal"' in ln
    ]
    assert len(line) == 1 and line[0].strip().startswith("register(")


def test_a_run_calls_a_tool_and_answers() -> None:
    agent, model = minimal_agent(
        ['CALL get_weather {"location": "Paris"}', "ANSWER Paris is overcast, 14°C."]
    )
    result = agent.run("Weather in Paris?")
    assert result.protocol == "minimal" and result.protocol_reason == "explicit"
    assert result.answer == "Paris is overcast, 14°C."
    [call] = result.tool_calls
    assert call.tool == "get_weather" and call.status == "ok" and call.id.startswith("call_")
    assert "CALL <tool> <json arguments>" in model.payloads[0]["messages"][0]["content"]
    assert model.payloads[1]["messages"][-1]["content"].startswith("RESULT get_weather: ")


def test_several_call_lines_are_several_calls_and_a_think_block_is_the_thought() -> None:
    agent, _ = minimal_agent(
        [
            "<think>two cities</think>\n"
            'CALL get_weather {"location": "Paris"}\n'
            'CALL calculator {"expression": "2 + 2"}',
            "ANSWER done",
        ],
        multi_action="all",
    )
    result = agent.run("q")
    first = result.steps[0]
    assert first.thought == "two cities"
    assert [a.tool for a in first.actions] == ["get_weather", "calculator"]
    assert [a.status for a in first.actions] == ["ok", "ok"]


def test_the_shared_policy_holds_for_it() -> None:
    agent, _ = minimal_agent(
        ['CALL get_weather {"location": "Paris"}', "ANSWER I cannot check."], tool_choice="none"
    )
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert "no tool may be used" in (result.steps[0].feedback or "")
    # a reply cut by the length limit: arguments that may be cut short never run
    model = ScriptedModel(
        [
            ModelResponse(content='CALL get_weather {"location": "Par', finish_reason="length"),
            "ANSWER ok",
        ]
    )
    agent = Agent("m", [get_weather], protocol="minimal", client=model)
    assert [s.kind for s in agent.run("q").steps] == ["format_error", "final"]


def test_an_empty_reply_or_an_answer_on_its_own_line_is_read() -> None:
    agent, _ = minimal_agent(["", "<think>only this</think>", "ANSWER\nTwo lines\nof answer"])
    result = agent.run("q")
    assert [s.kind for s in result.steps] == ["format_error", "format_error", "final"]
    assert result.answer == "Two lines\nof answer"


def test_arguments_run_exactly_as_written_or_not_at_all() -> None:
    agent, _ = minimal_agent(["CALL get_weather {'location': 'Paris'}", "ANSWER ok"])
    result = agent.run("q")
    assert result.tool_calls == []  # no repair of single quotes: the model writes it again
    assert result.steps[0].kind == "format_error" and result.steps[0].feedback == REMINDER


def test_a_step_of_another_protocol_is_shown_in_its_format() -> None:
    [reply] = MinimalProtocol.script(ScriptStep(calls=(("get_weather", {"location": "Rome"}),)))
    assert reply == {"content": 'CALL get_weather {"location": "Rome"}'}
    model = ScriptedModel([tool_call_reply(("get_weather", {"location": "Rome"})), "It is 20."])
    fc = Agent("m", [get_weather], protocol="function_calling", client=model).run("q")
    ctx = RequestContext("m", [UserTurn("q"), *fc.steps], [get_weather], "auto", Capabilities())
    said = [m.content for m in MinimalProtocol().render(ctx)[1:]]
    assert said[:2] == ["q", 'CALL get_weather {"location": "Rome"}']
    assert said[2].startswith("RESULT get_weather: ") and said[3] == "ANSWER It is 20."


# --- everywhere a protocol is named ----------------------------------------------------------


def test_the_cli_runs_it_from_the_scripted_router(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["run", "--protocol", "minimal", "q"])
    assert args.protocol == "minimal"
    # --dry-run's transcript has no minimal replies: the registry writes the native ones
    code = main(["run", "Weather?", "--dry-run", "--protocol", "minimal", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["protocol"] == "minimal"
    assert out["answer"] == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C."
    assert main(["demo", "--dry-run", "--protocol", "minimal"]) == 0
    assert "Beijing is sunny" in capsys.readouterr().out


def test_compare_runs_it_on_the_tasks_scripted_replies(capsys: pytest.CaptureFixture[str]) -> None:
    tasks = load_tasks(only=["weather_single", "chained_fahrenheit", "no_tool_capital"])
    assert all("minimal" not in t.scripted for t in tasks)
    report = run_comparison(
        tasks, [Target("scripted", "minimal", scripted=True)], CompareSettings(), source="scripted"
    )
    assert [(r.protocol, r.success) for r in report.runs] == [("minimal", True)] * 3
    code = main(["compare", "--scripted", "--protocol", "minimal", "--task", "weather_single"])
    assert code == 0
    assert "minimal" in capsys.readouterr().out


def test_eval_bfcl_runs_it() -> None:
    require_module("bfcl_eval", BFCL, BFCL_HINT, module_level=False)
    cases = load_cases(["simple", "parallel", "irrelevance"], only=list(recorded_replies()))
    args = build_parser().parse_args(["eval", "bfcl", "--protocol", "minimal"])
    assert args.protocol == ["minimal"]
    recorded = {"minimal": recorded_replies()}
    report = run_bfcl(cases, ["minimal"], recorded=recorded)
    assert [(r.case, r.correct) for r in report.results] == [
        ("simple_python_0", True),
        ("parallel_0", True),
        ("irrelevance_0", True),
    ]


def recorded_replies() -> dict[str, ModelResponse]:
    """Replies a model speaking the minimal protocol gives three BFCL cases."""
    return {
        "simple_python_0": ModelResponse(
            content='CALL calculate_triangle_area {"base": 10, "height": 5}'
        ),
        "parallel_0": ModelResponse(
            content='CALL spotify_play {"artist": "Maroon 5", "duration": 15}\n'
            'CALL spotify_play {"artist": "taylor swift", "duration": 20}'
        ),
        "irrelevance_0": ModelResponse(content="ANSWER I cannot compute that."),
    }


def test_auto_ranks_it_last_and_falls_back_to_it(registry: None) -> None:
    assert auto_order(Capabilities(function_calling=True)) == [
        "function_calling",
        "text",
        "minimal",
    ]
    assert auto_order(Capabilities(function_calling=False)) == ["text", "minimal"]
    del selection.PROTOCOLS["text"]
    options = ProtocolOptions(Capabilities(function_calling=False))
    chosen, _ = choose("auto", options, "r")
    assert isinstance(chosen, MinimalProtocol)
    # a server that rejects tools: the run auto started goes on under the next in line
    fc = ProtocolOptions(Capabilities(function_calling=True))
    current, _ = choose("auto", fc, "r")
    switched = adapt("tools", current=current, spec="auto", options=fc, model="m", url="u")
    assert switched is not None and isinstance(switched.protocol, MinimalProtocol)
    assert switched.event == "fallback: m at u rejected tools; switched to the minimal protocol"


# --- a protocol registered later ---------------------------------------------------------------


def test_a_protocol_registered_later_is_accepted_everywhere(
    registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from react_engine.compare.suite import replies_for
    from react_engine.eval.bfcl import eval_protocols

    class ScriptedToy(ToyProtocol):
        script = staticmethod(MinimalProtocol.script)

    register(ScriptedToy)
    assert "toy" in protocol_names()
    assert "toy" in eval_protocols()
    parser = build_parser()
    assert parser.parse_args(["compare", "--protocol", "toy"]).protocol == ["toy"]
    assert parser.parse_args(["eval", "bfcl", "--protocol", "toy"]).protocol == ["toy"]
    task = Task.model_validate(
        {
            "id": "t",
            "covers": "c",
            "question": "q",
            "tools": ["get_weather"],
            "check": {},
            "scripted": {"toy": ["ANSWER ok"]},
        }
    )
    assert replies_for(task.scripted, "toy") is not None
    assert main(["run", "Weather?", "--dry-run", "--protocol", "toy"]) == 0
    assert "Beijing is sunny" in capsys.readouterr().out
