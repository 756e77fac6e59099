"""The blocking API's event loop (``agent.run()``): one per thread, kept between runs while
it is as clean as a new one, and otherwise closed the way ``asyncio.run`` closes its loop
(docs/performance.md). And a sync tool's outcome handed back without a
``concurrent.futures.Future``: timeouts and errors as before."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from react_engine import Agent, ScriptedModel, reply, tool, tool_call_reply
from react_engine.runtime import run_sync_call
from react_engine.testing.script import ScriptExhausted

LOOPS: list[asyncio.AbstractEventLoop] = []
LEFT: list[asyncio.Task[None]] = []


@tool
async def where(note: str) -> str:
    """Say which event loop runs the call.

    Args:
        note: anything.
    """
    LOOPS.append(asyncio.get_running_loop())  # kept alive: ids cannot be reused
    return "here"


@tool
async def leave_a_task(note: str) -> str:
    """Start a task that outlives the run.

    Args:
        note: anything.
    """
    LOOPS.append(asyncio.get_running_loop())
    LEFT.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
    return "left"


def _agent(name: str) -> Agent:
    script = [tool_call_reply((name, {"note": "x"}, "c1")), reply("done")]
    return Agent("m", [where, leave_a_task], client=ScriptedModel(script * 10))


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    LOOPS.clear()
    LEFT.clear()
    yield


def _no_current_loop() -> bool:
    return asyncio.get_event_loop_policy()._local._loop is None  # type: ignore[attr-defined]


def test_runs_of_one_thread_share_a_loop_and_leave_none_current() -> None:
    agent = _agent("where")
    for _ in range(3):
        assert agent.run("go").answer == "done"
        assert _no_current_loop()  # as asyncio.run leaves it
    assert len(LOOPS) == 3
    assert LOOPS[0] is LOOPS[1] is LOOPS[2]
    assert not LOOPS[0].is_closed()


def test_each_thread_has_its_own_loop() -> None:
    agent = _agent("where")
    agent.run("go")

    def other() -> None:
        agent.run("go")
        agent.run("go")

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert LOOPS[1] is LOOPS[2]
    assert LOOPS[0] is not LOOPS[1]


def test_a_task_left_behind_is_cancelled_and_the_loop_closed() -> None:
    """What asyncio.run does with a task a run left: cancel it, close the loop."""
    agent = _agent("leave_a_task")
    agent.run("go")
    assert LEFT[0].cancelled()
    assert LOOPS[0].is_closed()
    _agent("where").run("go")
    assert LOOPS[1] is not LOOPS[0]


def test_a_failed_run_closes_its_loop() -> None:
    agent = Agent("m", [where], client=ScriptedModel([tool_call_reply(("where", {"note": "x"}))]))
    with pytest.raises(ScriptExhausted):
        agent.run("go")
    assert LOOPS[0].is_closed()


def test_a_sync_call_still_times_out_and_still_raises() -> None:
    def slow() -> str:
        time.sleep(0.5)
        return "late"

    def fails() -> None:
        raise KeyError("boom")

    def own_timeout() -> None:
        raise TimeoutError("the tool's own")

    async def main() -> None:
        with pytest.raises(TimeoutError, match=r"did not finish within 0\.05s"):
            await run_sync_call(slow, timeout=0.05)
        with pytest.raises(KeyError, match="boom"):
            await run_sync_call(fails, timeout=5)
        with pytest.raises(TimeoutError, match="the tool's own"):
            await run_sync_call(own_timeout, timeout=5)
        assert await run_sync_call(lambda: 7, timeout=None) == 7

    asyncio.run(main())
