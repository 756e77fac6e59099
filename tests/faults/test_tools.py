"""Tools that misbehave inside a run: sync tools that block, hang or overrun their timeout,
tools that raise ``BaseException``, and one agent used across many event loops.

Stuck tools wait on a :class:`threading.Event` (the ``gate`` fixture) that the test sets
when it ends, so no thread outlives the test that started it by more than a moment.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import openai
import pytest
from support.faults import (
    agent_for,
    blocking_tool,
    calls,
    sleeper,
    tool_threads,
    wait_for_stuck_threads,
)

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    RunAborted,
    ScriptedModel,
    Tool,
    reply,
    runtime,
    tool_call_reply,
)
from react_engine.testing import ScriptedServer, completion

REPO = Path(__file__).resolve().parents[2]


# --- sync tools never run on the event loop -------------------------------------------------


def test_a_lone_sync_tool_is_bounded_by_tool_timeout(gate: threading.Event) -> None:
    wait_for_stuck_threads()  # of earlier tests
    agent = agent_for([blocking_tool(gate)], [calls("stuck", 1), reply("gave up")])
    result = agent.run("go", tool_timeout=0.3)
    # The run is over and the tool is still blocked (until the gate, or 30 s): the run did
    # not wait for it.
    assert runtime.stuck_threads() == 1
    (action,) = result.steps[0].actions
    assert action.status == "timeout"
    assert "within 0.3s" in action.observation and "still running" in action.observation
    assert result.answer == "gave up"
    assert any("left running" in e for e in [n.message for n in result.notices])


def test_a_sync_tool_does_not_block_the_event_loop() -> None:
    ticks = 0

    async def main() -> None:
        nonlocal ticks
        agent = agent_for([sleeper(0.6)], [calls("nap", 1), reply("done")])
        run = asyncio.create_task(agent.arun("go"))
        while not run.done():
            ticks += 1
            await asyncio.sleep(0.02)
        assert (await run).answer == "done"

    asyncio.run(main())
    assert ticks >= 5  # the loop kept turning while the tool slept


def test_concurrent_runs_with_a_blocking_tool_overlap() -> None:
    lock = threading.Lock()
    running = [0]
    most = [0]

    def nap(x: int) -> str:
        """Block the thread for a while.

        Args:
            x: anything.
        """
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return f"slept {x}"

    async def main() -> None:
        def script(request: Any) -> Any:
            if any(m.role == "tool" for m in request.messages):
                return reply("done")
            return calls("nap", 1)

        agent = Agent(
            "gpt-4o-mini",
            [Tool.from_function(nap)],
            protocol="function_calling",
            client=ScriptedModel(script),
        )
        results = await asyncio.gather(*(agent.arun(f"q{i}") for i in range(20)))
        assert all(r.answer == "done" for r in results)

    asyncio.run(main())
    # A tool blocking the event loop would run its calls one after another (at most 1).
    assert most[0] >= 5


# --- stuck threads are bounded and never hold the process ----------------------------------


def test_stuck_sync_tools_do_not_starve_other_runs(gate: threading.Event) -> None:
    wait_for_stuck_threads()  # of earlier tests
    agent = agent_for(
        [blocking_tool(gate)], [calls("stuck", 40), reply("gave up")], max_calls_per_step=40
    )
    result = agent.run("go", tool_timeout=0.2)
    assert [a.status for a in result.steps[0].actions] == ["timeout"] * 40
    assert runtime.stuck_threads() == 40
    # An unrelated run with a sync tool and a sync client gets threads at once.
    other = agent_for([sleeper(0.01)], [calls("nap", 2), reply("fine")])
    result = other.run("go")
    assert [a.observation for a in result.steps[0].actions] == ["slept 0", "slept 1"]
    assert runtime.stuck_threads() == 40  # it ran while all 40 were still stuck


def test_too_many_stuck_threads_refuse_new_sync_calls(
    gate: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    wait_for_stuck_threads()  # of earlier tests
    monkeypatch.setattr(runtime, "MAX_STUCK_THREADS", 3)
    agent = agent_for([blocking_tool(gate)], [calls("stuck", 3), reply("gave up")])
    agent.run("go", tool_timeout=0.2)
    assert runtime.stuck_threads() == 3
    refused = agent_for([sleeper(0.01)], [calls("nap", 1), reply("no tool")])
    result = refused.run("go")
    (action,) = result.steps[0].actions
    assert action.status == "error"
    assert "was not run: 3 earlier sync calls are still running" in action.observation
    assert any("not run" in e for e in [n.message for n in result.notices])
    gate.set()
    wait_for_stuck_threads()
    again = agent_for([sleeper(0.01)], [calls("nap", 1), reply("ran")])
    assert again.run("go").steps[0].actions[0].status == "ok"


def test_a_stuck_tool_does_not_keep_the_interpreter_alive() -> None:
    script = textwrap.dedent(
        """
        import time
        from react_engine import Agent, ScriptedModel, Tool, reply, tool_call_reply

        def stuck(x: int) -> str:
            '''Sleep a minute.

            Args:
                x: anything.
            '''
            time.sleep(60)
            return "never"

        model = ScriptedModel(
            [tool_call_reply(("stuck", {"x": 1}), ("stuck", {"x": 2})), reply("answered")]
        )
        agent = Agent("m", [Tool.from_function(stuck)], protocol="function_calling", client=model)
        print(agent.run("go", tool_timeout=0.2).answer, flush=True)
        """
    )
    # The process must end before its stuck tools do (60 s): the 40 s timeout catches one
    # that waits for them.
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=40
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "answered"


# --- BaseException from a tool -----------------------------------------------------------------


def raiser(exc: BaseException, *, asynchronous: bool = False) -> Tool:
    if asynchronous:

        async def boom(x: int) -> str:
            """Raise.

            Args:
                x: anything.
            """
            raise exc

        return Tool.from_function(boom)

    def boom_sync(x: int) -> str:
        """Raise.

        Args:
            x: anything.
        """
        raise exc

    return Tool.from_function(boom_sync, name="boom")


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("exc_type", [SystemExit, asyncio.CancelledError])
def test_a_tool_raising_a_base_exception_aborts_with_the_transcript(
    exc_type: type[BaseException], asynchronous: bool
) -> None:
    ok = sleeper(0)
    agent = agent_for(
        [raiser(exc_type(), asynchronous=asynchronous), ok],
        [
            calls("nap", 1),
            tool_call_reply(("boom", {"x": 1}), ("nap", {"x": 2})),
            reply("never"),
        ],
    )
    with pytest.raises(RunAborted) as info:
        agent.run("go")
    assert isinstance(info.value.__cause__, exc_type)
    result = info.value.result
    assert result.stop_reason == "error"
    assert len(result.steps) == 2
    boom, nap = result.steps[1].actions
    assert boom.status == "error" and exc_type.__name__ in boom.observation
    assert nap.status == "ok"  # the other call of the step ran and was kept


def test_keyboard_interrupt_from_a_tool_is_reraised_with_the_result() -> None:
    agent = agent_for([raiser(KeyboardInterrupt())], [calls("boom", 1), reply("never")])
    conversation = agent.conversation()
    with pytest.raises(KeyboardInterrupt) as info:
        conversation.ask("go")
    result = info.value.result  # type: ignore[attr-defined]
    assert result.steps[0].actions[0].status == "error"
    assert "KeyboardInterrupt" in result.steps[0].actions[0].observation
    assert conversation.steps == result.steps  # the history kept the step


def test_cancelling_the_run_still_cancels_it(gate: threading.Event) -> None:
    async def main() -> None:
        agent = agent_for([blocking_tool(gate)], [calls("stuck", 1), reply("never")])
        run = asyncio.create_task(agent.arun("go"))
        await asyncio.sleep(0.2)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())


# --- one agent across many event loops ----------------------------------------------------------


def test_one_agent_across_event_loops_keeps_no_loop_or_client_alive() -> None:
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def on_step(step: Any) -> None:  # async: it runs on the run's loop (a sync one
        loops.append(weakref.ref(asyncio.get_running_loop()))  # runs on a worker thread)

    def async_clients() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, openai.AsyncOpenAI))

    with ScriptedServer(default=completion("done")) as server:
        agent = Agent(
            "m",
            [],
            protocol="function_calling",
            base_url=server.base_url,
            api_key="sk-test",
            on_step=on_step,
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
        )
        gc.collect()
        before = async_clients()
        for _ in range(20):
            assert asyncio.run(agent.arun("go")).answer == "done"
        gc.collect()
        assert len(loops) == 20
        assert sum(1 for ref in loops if ref() is not None) == 0
        assert async_clients() - before <= 1  # at most the agent's first client, closed


# --- the stuck-thread cap holds under many runs at once ----------------------------------------


def test_many_runs_of_stuck_calls_stay_within_the_thread_caps(gate: threading.Event) -> None:
    # 12 runs x 16 calls that never return within their timeout: 192 sync calls for a pool
    # of 64 threads and 64 stuck ones. The cap was checked only when a call was submitted,
    # so stuck threads grew past it (192 threads here), and calls that never got a thread
    # were reported as "still running on its thread".
    entered: list[int] = []
    peak: list[int] = [0]

    def stuck(x: int) -> str:
        """Wait for the gate.

        Args:
            x: anything.
        """
        entered.append(x)
        peak[0] = max(peak[0], tool_threads())
        gate.wait(30)
        return f"released {x}"

    tool = Tool.from_function(stuck, name="stuck")

    async def run(timeout: float, delay: float) -> Any:
        await asyncio.sleep(delay)
        agent = agent_for([tool], [calls("stuck", 16), reply("gave up")])
        return await agent.arun("go", tool_timeout=timeout)

    async def main() -> list[Any]:
        # Staggered: the first runs' calls get stuck while the later ones wait for a thread,
        # and each stuck thread was replaced by a fresh one that took a waiting call.
        first = [run(0.3, 0.0) for _ in range(4)]
        later = [run(1.0, 0.1) for _ in range(8)]
        return list(await asyncio.gather(*first, *later))

    results = asyncio.run(main())
    actions = [a for r in results for a in r.steps[0].actions]
    assert len(actions) == 192
    still_running = [a for a in actions if "still running on its thread" in (a.observation or "")]
    never_ran = [a for a in actions if a not in still_running]
    assert len(still_running) == len(entered)  # only calls that started say they run on
    assert all(a.status in ("timeout", "error") for a in actions)
    assert all(
        "never ran" in (a.observation or "")
        or "could not" in (a.observation or "")
        or "stuck" in (a.observation or "")
        for a in never_ran
    )
    cap = runtime.MAX_TOOL_THREADS + runtime.MAX_STUCK_THREADS
    assert tool_threads() <= cap and peak[0] <= cap
    assert len(entered) <= cap
