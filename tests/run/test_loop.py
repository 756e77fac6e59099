"""The loop stands on its own: built from :class:`LoopDeps` with a scripted model and no
``Agent``; and the tool runner returns its records and writes no control state (that no module
is part of an import cycle: tests/api/test_layers.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from react_engine import ScriptedModel, Step, reply, tool, tool_call_reply
from react_engine.protocols.registry import ProtocolOptions, registration
from react_engine.run.config import AgentConfig
from react_engine.run.execution import Ran, ToolRunner
from react_engine.run.loop import Loop, LoopDeps
from react_engine.run.state import RunState
from react_engine.transport.capabilities import Capabilities
from react_engine.types import PendingCall, UserTurn


@tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a path.

    Args:
        path: what to delete.
    """
    return f"deleted {path}"


def run_state(model: ScriptedModel, protocol: str = "function_calling", **config: Any) -> RunState:
    caps = Capabilities()
    return RunState(
        question="Weather in Paris?",
        history=[UserTurn("Weather in Paris?")],
        protocol=registration(protocol).cls.from_options(ProtocolOptions(caps, None, False)),
        protocol_reason="explicit",
        caps=caps,
        config=AgentConfig(**config),
        model=model,
        model_name="scripted",
        tools=[weather, wipe],
    )


TEXT_CALL = 'Thought: look it up\nAction: weather\nAction Input: {"city": "Paris"}'
TEXT_ANSWER = "Thought: done\nFinal Answer: It is sunny in Paris."


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_loop_runs_without_an_agent(protocol: str) -> None:
    if protocol == "function_calling":
        script: list[Any] = [
            tool_call_reply(("weather", {"city": "Paris"})),
            reply("It is sunny in Paris."),
        ]
    else:
        script = [reply(TEXT_CALL), reply(TEXT_ANSWER)]
    model = ScriptedModel(script)
    seen: list[Step] = []
    loop = Loop(LoopDeps(instructions="Be brief.", on_step=seen.append))

    result = asyncio.run(loop.run(run_state(model, protocol)))

    assert result.answer == "It is sunny in Paris."
    assert result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert result.steps[0].actions[0].observation == "sunny in Paris"
    assert seen == result.steps
    assert model.requests[0].model == "scripted"
    assert "Be brief." in str(model.payloads[0]["messages"][0]["content"])


def test_the_loop_forces_the_final_answer_on_the_runners_verdict() -> None:
    """The runner reports a repeated call; the loop, not the runner, forces the answer."""
    call = tool_call_reply(("weather", {"city": "Paris"}))
    model = ScriptedModel([call, call, call, reply("Sunny.")])
    state = run_state(model, loop_limit=2)

    result = asyncio.run(Loop(LoopDeps()).run(state))

    assert result.answer == "Sunny."
    assert result.stop_reason == "loop"
    assert result.steps[2].actions[0].status == "skipped"
    assert model.requests[3].tool_choice == "none"  # the forced request: no more calls
    assert model.requests[2].tool_choice == "auto"


def pending(tool_name: str, **args: Any) -> PendingCall:
    return PendingCall(id="call_1", tool=tool_name, arguments=args, raw_arguments=str(args))


def test_the_runner_returns_its_records_and_writes_no_control_state() -> None:
    state = run_state(ScriptedModel(), loop_limit=1)
    runner = ToolRunner()
    control = {"force_final", "abort", "tool_calls", "consecutive_errors", "action_turns"}
    assert not control & set(RunState.__slots__)

    first = asyncio.run(runner.run(state, [pending("weather", city="Paris")]))
    again = asyncio.run(runner.run(state, [pending("weather", city="Paris")]))

    assert isinstance(first, Ran) and not first.repeated
    assert (first.deferred, first.abort) == ([], None)
    assert first.actions[0].observation == "sunny in Paris"
    assert again.repeated
    assert again.actions[0].status == "skipped"


def test_a_base_exception_from_a_tool_is_returned_not_raised() -> None:
    @tool
    def explode() -> str:
        """Stop everything."""
        raise KeyboardInterrupt

    state = run_state(ScriptedModel())
    state.tools = [explode]

    ran = asyncio.run(ToolRunner().run(state, [pending("explode")]))

    assert isinstance(ran.abort, KeyboardInterrupt)
    assert ran.actions[0].status == "error"


def test_a_deferred_approval_is_returned(tmp_path: Path) -> None:
    from react_engine.store import open_store

    state = run_state(ScriptedModel())
    journal = open_store(tmp_path / "runs.db").journal()
    state.journal = journal

    async def run() -> Ran:
        await journal.store.begin(
            journal.run_id, question="q", model="scripted", protocol="fc", history=[]
        )
        return await ToolRunner(approve="defer").run(state, [pending("wipe", path="/tmp/x")])

    ran = asyncio.run(run())

    assert ran.deferred == [ran.actions[0]]
    assert ran.actions[0].status == "skipped"
    assert state.deferred == []  # the loop, not the runner, keeps what awaits approval
