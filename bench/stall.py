"""How long a hostile reply stalls the event loop (issue 21: at most about 50 ms).

Two sizes of each reply: 1 MB, which the edge refuses before any reader runs
(``react_engine.protocols.limits.MAX_REPLY_CHARS``), and exactly ``MAX_REPLY_CHARS``, the
longest reply the readers read whole (calls past ``MAX_CALLS`` stop them). An agent reads
each one (a scripted model, in process) while a heartbeat task sleeps 1 ms at a time on the
same loop. Per reply and protocol:

* *loop CPU*: the most CPU time of the loop's thread in one callback (``time.thread_time``,
  which a loaded machine does not inflate): what the engine does on the loop;
* *heartbeat gap*: the longest wall-clock wait of the heartbeat beyond its 1 ms sleep (the
  stall as another task sees it: loop work, full garbage collections, and the machine's
  other load);
* *full GC*: the longest collection of the oldest generation during the run (CPU time),
  which stops every thread and lasts as long as the process's heap takes to walk.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import gc
import time
from typing import Any

from react_engine import Agent, CapabilityCache, CapabilityRegistry, Tool
from react_engine.errors import ReactEngineError
from react_engine.protocols.limits import MAX_REPLY_CHARS
from react_engine.testing import ScriptedModel

__all__ = ["REPLIES", "measure_stall"]

MB = 1_000_000


def _fill(unit: str, size: int = MB) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _listed(head: str, call: str, tail: str, size: int = MB) -> str:
    """A reply of about ``size`` characters that is one list of calls: ``head``, calls, ``tail``."""
    body = ", ".join([call] * ((size - len(head) - len(tail)) // (len(call) + 2)))
    return head + body + tail


def _replies(size: int) -> dict[str, str]:
    return {
        "json_call_lines": _fill('{"name": "get_weather", "arguments": {"city": "Paris"}}\n', size),
        "function_tags": _fill("<function=get_weather>", size),
        "actions": _fill('Action: get_weather\nAction Input: {"city": "Paris"}\n', size),
        "hermes_open_tags": _fill("<tool_call>{", size),
        "prose_with_brackets": _fill("Prose about the weather { and [ brackets ( here. ", size),
        "final_answer": "Final Answer: " + _fill("answer ", size - 14),
        "tool_calls_wrapper": _listed(
            '{"tool_calls": [',
            '{"name": "get_weather", "arguments": {"city": "Paris"}}',
            "]}",
            size,
        ),
        "python_list": _listed("[", 'get_weather(city="Paris")', "]", size),
        "llama4_list": _listed(
            "<|python_start|>[", 'get_weather(city="Paris")', "]<|python_end|>", size
        ),
    }


REPLIES = _replies(MB)
"""Replies of 1 MB: refused at the edge, whatever they hold."""

READ = _replies(MAX_REPLY_CHARS)
"""Replies of exactly ``MAX_REPLY_CHARS``: the longest the readers read."""


def weather(city: str) -> str:
    """The weather.

    Args:
        city: the city.
    """
    return f"{city}: 14"


def stall_agent(reply: str, protocol: str) -> Agent:
    """The agent that reads ``reply`` (then answers), as the bench and the stall tests run it."""
    return Agent(
        "scripted",
        [Tool.from_function(weather, name="get_weather")],
        protocol=protocol,
        client=ScriptedModel([reply], default="Final Answer: done"),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        max_steps=2,
        max_consecutive_errors=1,
    )


async def _run(agent: Agent, gaps: list[float]) -> None:
    running = True

    async def heartbeat() -> None:
        while running:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            gaps.append(time.perf_counter() - start - 0.001)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.005)
    try:
        await agent.arun("What is the weather in Paris?")
    except ReactEngineError:
        pass
    finally:
        running = False
        await beat


def _one(reply: str, protocol: str) -> dict[str, Any]:
    agent = stall_agent(reply, protocol)
    loop_cpu: list[float] = [0.0]
    full_gc: list[float] = [0.0]
    gaps: list[float] = [0.0]
    original = asyncio.events.Handle._run
    gc_started = [0.0]

    def run(handle: Any) -> None:
        start = time.thread_time()
        try:
            original(handle)
        finally:
            loop_cpu.append(time.thread_time() - start)

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            gc_started[0] = time.thread_time()
        else:
            full_gc.append(time.thread_time() - gc_started[0])

    asyncio.events.Handle._run = run  # type: ignore[method-assign]
    gc.callbacks.append(on_gc)
    started = time.perf_counter()
    try:
        asyncio.run(_run(agent, gaps))
    finally:
        asyncio.events.Handle._run = original  # type: ignore[method-assign]
        gc.callbacks.remove(on_gc)
    return {
        "loop_cpu_ms": max(loop_cpu) * 1000,
        "heartbeat_gap_ms": max(gaps) * 1000,
        "full_gc_ms": max(full_gc) * 1000,
        "run_ms": (time.perf_counter() - started) * 1000,
    }


def measure_stall(quick: bool = False) -> dict[str, Any]:
    """Per reply and protocol, the worst of a few runs of each figure."""
    rounds = 1 if quick else 3
    for protocol in ("function_calling", "text"):  # first use: imports, not the reply
        _one("Final Answer: warm", protocol)
    cases: dict[str, Any] = {}
    chosen = ("json_call_lines", "prose_with_brackets") if quick else tuple(REPLIES)
    for size, replies in (("1 MB", REPLIES), (f"{MAX_REPLY_CHARS:,} chars", READ)):
        for name in chosen:
            for protocol in ("function_calling", "text"):
                runs = [_one(replies[name], protocol) for _ in range(rounds)]
                cases[f"{name} ({size}) / {protocol}"] = {
                    key: min(r[key] for r in runs) for key in runs[0]
                }  # the best of the rounds: the engine's share, the least of the machine's
    worst = {
        key: max(c[key] for c in cases.values())
        for key in ("loop_cpu_ms", "heartbeat_gap_ms", "full_gc_ms")
    }
    return {"cases": cases, "worst": worst, "rounds": rounds}


if __name__ == "__main__":
    result = measure_stall()
    for case, figures in result["cases"].items():
        shown = "  ".join(f"{k} {v:7.1f}" for k, v in figures.items())
        print(f"{case:40} {shown}")
    print("worst:", {k: round(v, 1) for k, v in result["worst"].items()})
