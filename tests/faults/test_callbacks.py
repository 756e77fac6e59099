"""Callbacks share the run's one budget of time.

``on_step`` and ``on_call``, sync or async, end at the run's deadline; a sync callback runs
on a worker thread, so a slow one stalls neither its run past the deadline nor the other
runs of the event loop. A slow approver, sync or async, is bounded by the deadline too, and
a sync one does not block the event loop. ``approve=`` with no tool that asks for approval
is warned about.

No test measures time: each slow callback waits on an event the test sets only after the
run has returned, so a run that waited for its callback would never return (the callback
gives up after a long timeout, and the test then fails on what it recorded).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from support.faults import agent_for, calls

from react_engine import ActionRecord, Agent, ScriptedModel, Tool, reply, tool, tool_call_reply
from react_engine.testing.tools import get_weather
from react_engine.wording import NoticeCode

LONG = 20.0
"""How long a blocked callback waits before it gives up (only reached when the run
wrongly waits for it)."""


def weather_agent(**options: Any) -> Agent:
    script = [tool_call_reply(("get_weather", {"location": "Paris"})), reply("Overcast.")]
    return Agent("m", [get_weather], client=ScriptedModel(script), **options)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_slow_on_step_ends_at_the_deadline(asynchronous: bool) -> None:
    released = threading.Event()
    finished_first: list[bool] = []

    def slow_sync(step: Any) -> None:
        finished_first.append(released.wait(LONG))

    async def slow_async(step: Any) -> None:
        await asyncio.sleep(LONG)
        finished_first.append(False)

    agent = weather_agent(on_step=slow_async if asynchronous else slow_sync, deadline=0.5)
    result = agent.run("Weather in Paris?")
    released.set()
    assert result.stop_reason == "deadline"
    assert any(
        "on_step did not return before the run's deadline" in e
        for e in [n.message for n in result.notices]
    )
    assert False not in finished_first  # no callback had to give up for the run to return


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_slow_on_call_ends_at_the_deadline_and_its_call_does_not_run(asynchronous: bool) -> None:
    released = threading.Event()
    ran: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        ran.append(city)
        return "found"

    def slow_sync(record: Any) -> None:
        released.wait(LONG)

    async def slow_async(record: Any) -> None:
        await asyncio.sleep(LONG)

    script = [tool_call_reply(("lookup", {"city": "Paris"})), reply("done")]
    agent = Agent(
        "m",
        [lookup],
        client=ScriptedModel(script),
        on_call=slow_async if asynchronous else slow_sync,
        deadline=0.5,
    )
    result = agent.run("Look Paris up.")
    released.set()
    assert ran == []
    (action,) = result.steps[0].actions
    assert action.status == "error"
    assert "deadline passed before this call could start" in (action.observation or "")
    assert result.stop_reason == "deadline"


def test_a_sync_on_step_does_not_stall_the_other_runs_of_the_loop() -> None:
    other_done = threading.Event()
    order: list[str] = []

    def blocking_on_step(step: Any) -> None:
        # Returns once the other run has finished: on the event loop it never could.
        order.append("blocked" if other_done.wait(LONG) else "gave up")

    async def main() -> None:
        slow = weather_agent(on_step=blocking_on_step)
        fast = weather_agent()

        async def fast_run() -> None:
            await fast.arun("Weather in Paris?")
            order.append("other run done")
            other_done.set()

        await asyncio.gather(slow.arun("Weather in Paris?"), fast_run())

    asyncio.run(main())
    assert order[0] == "other run done"
    assert "gave up" not in order


def test_an_approver_that_no_tool_asks_for_is_warned_about() -> None:
    with pytest.warns(UserWarning, match="no tool of this agent has requires_approval=True"):
        Agent("m", [get_weather], client=ScriptedModel([]), approve=lambda record: True)


def test_the_deadline_counts_from_the_call_not_from_the_first_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A first run imports the run machinery and the protocol before its first request (a
    # few hundred ms): that time is the run's too. Here choosing the protocol takes longer
    # than the whole deadline, so no request may be sent.
    original = Agent.choose_protocol

    def slow(self: Agent) -> Any:
        released = threading.Event()
        released.wait(0.4)  # stands for the imports of a first run
        return original(self)

    monkeypatch.setattr(Agent, "choose_protocol", slow)
    model = ScriptedModel([reply("never sent")])
    agent = Agent("m", client=model, protocol="function_calling")
    result = agent.run("q", deadline=0.2)
    assert result.stop_reason == "deadline"
    assert model.payloads == []
    assert result.duration_s >= 0.4


# --- approvals within the deadline ---------------------------------------------------------


def wipe_tool() -> Tool:
    def wipe(x: int) -> str:
        """Wipe something.

        Args:
            x: anything.
        """
        return "wiped"

    return Tool.from_function(wipe, requires_approval=True)


def test_a_slow_sync_approver_is_bounded_by_the_deadline(gate: threading.Event) -> None:
    answered: list[bool] = []

    def approve(record: ActionRecord) -> bool:
        gate.wait(30)
        answered.append(True)
        return True

    agent = agent_for([wipe_tool()], [calls("wipe", 1), reply("never")], approve=approve)
    result = agent.run("go", deadline=1)
    assert answered == []  # the run ended before the approver answered
    assert result.stop_reason == "deadline"
    (action,) = result.steps[0].actions
    assert action.status == "denied" and "deadline" in action.observation


def test_a_slow_async_approver_is_bounded_by_the_deadline() -> None:
    answered: list[bool] = []

    async def approve(record: ActionRecord) -> bool:
        await asyncio.sleep(30)
        answered.append(True)
        return True

    agent = agent_for([wipe_tool()], [calls("wipe", 1), reply("never")], approve=approve)
    result = agent.run("go", deadline=1)
    assert answered == []  # the run ended before the approver answered
    assert result.stop_reason == "deadline"
    assert result.steps[0].actions[0].status == "denied"


def test_a_sync_approver_does_not_block_the_event_loop() -> None:
    ticks = 0

    def approve(record: ActionRecord) -> bool:
        time.sleep(0.5)
        return True

    async def main() -> None:
        nonlocal ticks
        agent = agent_for([wipe_tool()], [calls("wipe", 1), reply("done")], approve=approve)
        run = asyncio.create_task(agent.arun("go"))
        while not run.done():
            ticks += 1
            await asyncio.sleep(0.02)
        result = await run
        assert result.steps[0].actions[0].observation == "wiped"

    asyncio.run(main())
    assert ticks >= 5


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_approvers_own_timeout_error_is_its_failure_not_the_deadline(
    asynchronous: bool,
) -> None:
    """Every callback goes through ``call_user``: only the run's deadline is the deadline."""

    def approve_sync(record: ActionRecord) -> bool:
        raise TimeoutError("the approval service timed out")

    async def approve_async(record: ActionRecord) -> bool:
        raise TimeoutError("the approval service timed out")

    approve = approve_async if asynchronous else approve_sync
    agent = agent_for([wipe_tool()], [calls("wipe", 1), reply("done")], approve=approve)
    result = agent.run("go", deadline=30)
    assert result.answer == "done"
    (action,) = result.steps[0].actions
    assert action.status == "denied"
    assert action.observation_code == NoticeCode.APPROVAL_FAILED
    assert "TimeoutError" in str(action.error or "")
