"""A megabyte of reply never stalls the event loop for more than about 50 ms.

Wall-clock gaps of a heartbeat say little on a loaded 2-core machine: the operating system
deschedules the whole process at will. What the engine controls is measured instead, in
CPU time of the loop's own thread (``time.thread_time``, which does not advance while the
thread waits or is descheduled):

* the most CPU any one callback of the event loop takes while an agent receives a 1 MB
  reply and records its step (the reply is past ``MAX_REPLY_CHARS``: it is refused at the
  edge, before any reader runs, whatever it holds: thousands of calls included), and the
  same shapes at exactly ``MAX_REPLY_CHARS``, the longest reply every reader reads;
* a heartbeat task runs beside the run (the refusal takes no reading to wait for).

Python's cyclic garbage collector is off while a reply's CPU is measured: a full
collection stops every thread for as long as the whole program's heap takes to walk, so
it would measure the heap, not the engine. What the engine owes the collector is measured
apart: a refused reply is never read into objects, so the objects the collector tracks
that are alive at once stay few. A reply of 45,000 calls read into 45,000 call objects (and
as many match objects, records...) made the collector run full collections of 60-110 ms
during the read, each one stalling the loop.

``make bench`` reports the same numbers with the heartbeat's wall-clock gaps
(``bench/stall.py``).
"""

from __future__ import annotations

import asyncio
import asyncio.events
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.tracked import tracked_peak

from bench.stall import READ as BENCH_READ
from bench.stall import REPLIES as BENCH_REPLIES
from bench.stall import stall_agent, weather
from react_engine import Agent, CapabilityCache, CapabilityRegistry, Tool
from react_engine.errors import ReactEngineError
from react_engine.protocols.limits import MAX_CALLS, MAX_REPLY_CHARS
from react_engine.testing import ScriptedModel

LOOP_CPU_LIMIT = 0.025
"""CPU seconds one callback of the loop may take (half the 50 ms target: the rest is the
worker's turn at the interpreter, at most ``sys.getswitchinterval()`` plus one C call)."""


REPLIES = {name: text for name, text in BENCH_REPLIES.items() if name != "final_answer"}
"""The benchmark's 1 MB replies (``bench/stall.py``), those that hold calls or look like they
might: thousands of calls each would cost a record, a message and a request entry."""

READ = {f"{name}@limit": text for name, text in BENCH_READ.items()}
"""The same shapes at ``MAX_REPLY_CHARS``: not refused by size, read by every reader."""


@contextmanager
def loop_cpu() -> Iterator[list[float]]:
    """The CPU time of the loop's thread in each callback the event loop runs."""
    spent: list[float] = []
    original = asyncio.events.Handle._run
    collecting = gc.isenabled()
    gc.disable()  # see the module's docstring

    def run(handle: Any) -> None:
        start = time.thread_time()
        try:
            original(handle)
        finally:
            spent.append(time.thread_time() - start)

    asyncio.events.Handle._run = run  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        asyncio.events.Handle._run = original  # type: ignore[method-assign]
        if collecting:
            gc.enable()


FEW_OBJECTS = 2_000
"""Objects the collector may track, alive at once, while a run refuses a 1 MB reply: a
run's own (its state, its step, the request); none per call of the reply."""


async def _read(agent: Agent) -> int:
    """Run ``agent`` beside a heartbeat; the heartbeat's ticks during the run."""
    ticks = 0
    running = True

    async def heartbeat() -> None:
        nonlocal ticks
        while running:
            await asyncio.sleep(0)
            ticks += 1

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    try:
        await agent.arun("What is the weather in Paris?")
    except ReactEngineError:
        pass  # a reply the run gives up on is fine: only the loop's freedom is measured
    finally:
        running = False
        await beat
    return ticks


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("name", sorted(REPLIES) + sorted(READ))
def test_a_hostile_reply_leaves_the_event_loop_free(name: str, protocol: str) -> None:
    # a first run loads what only a run needs (imports, on first use): not the reply's cost
    asyncio.run(_read(stall_agent("Final Answer: warm", protocol)))
    agent = stall_agent({**REPLIES, **READ}[name], protocol)
    with loop_cpu() as spent:
        ticks = asyncio.run(_read(agent))
    worst = max(spent)
    assert worst <= LOOP_CPU_LIMIT, (
        f"one event-loop callback took {worst * 1000:.1f} ms of CPU reading {name!r} "
        f"under {protocol} (limit {LOOP_CPU_LIMIT * 1000:.0f} ms)"
    )
    assert ticks >= 1, "the heartbeat ran beside the run"


@pytest.mark.parametrize(
    ("name", "protocol"),
    [
        pytest.param(name, protocol, id=f"{protocol}-{name}")
        for name in sorted(REPLIES)
        for protocol in ("function_calling", "text")
    ],
)
def test_a_megabyte_reply_is_refused_in_few_objects(name: str, protocol: str) -> None:
    asyncio.run(_read(stall_agent("Final Answer: warm", protocol)))
    agent = stall_agent(REPLIES[name], protocol)
    with tracked_peak() as peak:
        asyncio.run(_read(agent))
    assert peak[0] <= FEW_OBJECTS, (
        f"reading {name!r} under {protocol} held {peak[0]} tracked objects at once "
        f"(limit {FEW_OBJECTS})"
    )


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_megabyte_reply_is_refused_with_its_length(protocol: str) -> None:
    text = REPLIES["json_call_lines"]
    agent = stall_agent(text, protocol)
    result = agent.run("q")
    step = result.steps[0]
    assert step.kind == "format_error" and not step.actions
    assert step.feedback is not None
    assert f"the reply is {len(text):,} characters; at most {MAX_REPLY_CHARS:,}" in step.feedback


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_reply_of_more_calls_than_the_most_is_refused(protocol: str) -> None:
    line = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    agent = Agent(
        "scripted",
        [Tool.from_function(weather, name="get_weather")],
        protocol=protocol,
        client=ScriptedModel([line * (MAX_CALLS + 1)], default="Final Answer: done"),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        multi_action="all",
    )
    result = agent.run("q")
    step = result.steps[0]
    assert step.kind == "format_error" and not step.actions
    assert step.feedback is not None and f"more than {MAX_CALLS} tool calls" in step.feedback
    assert result.answer == "done"
