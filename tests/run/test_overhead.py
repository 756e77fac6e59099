"""What keeps the engine's own cost per request low (docs/performance.md): a run leaves no
garbage in reference cycles, a request renders only the steps it has not rendered yet, and
the capability lookup is kept per model name until the registry changes."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from react_engine import Agent, ScriptedModel, reply, tool_call_reply
from react_engine.errors import ModelUnavailableError
from react_engine.protocols.base import RequestContext
from react_engine.protocols.text import TextReActProtocol
from react_engine.testing.tools import get_weather
from react_engine.transport.capabilities import Capabilities, CapabilityRegistry
from react_engine.transport.retries import RetryPolicy, with_retries
from react_engine.types import Message, Step


def _script(protocol: str) -> list[Any]:
    if protocol == "function_calling":
        return [
            tool_call_reply(("get_weather", {"location": "Beijing"}, "call_a")),
            tool_call_reply(("get_weather", {"location": "Paris"}, "call_b")),
            reply("Sunny in both."),
        ]
    blobs = [
        json.dumps({"action": "get_weather", "action_input": {"location": city}})
        for city in ("Beijing", "Paris")
    ]
    return [
        *(reply(f"Thought: I need the weather.\nAction:\n```json\n{b}\n```") for b in blobs),
        reply("Thought: I now know the final answer\nFinal Answer: Sunny in both."),
    ]


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_run_leaves_no_reference_cycles(protocol: str) -> None:
    """Cyclic garbage triggers collections, and now and then a full one of the whole heap:
    the retry loop used to leave some on every request."""

    async def runs() -> None:
        for _ in range(3):
            agent = Agent(
                "gpt-4o-mini",
                [get_weather],
                client=ScriptedModel(_script(protocol)),
                protocol=protocol,
                template="json" if protocol == "text" else None,
            )
            result = await agent.arun("Weather in Beijing and Paris?")
            assert result.answer == "Sunny in both."

    asyncio.run(runs())  # warm: imports, caches, the tool threads
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(runs())
        finally:
            loop.close()
        gc.collect()
        ours = [type(o).__qualname__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []


def test_once_computes_once_per_owner_and_key() -> None:
    ctx = RequestContext("m", [], [], "auto", Capabilities())
    calls: list[str] = []

    def compute(value: str) -> str:
        calls.append(value)
        return value

    first, second = object(), object()
    assert ctx.once((first,), "k", lambda: compute("a")) == "a"
    assert ctx.once((first,), "k", lambda: compute("b")) == "a"  # kept
    assert ctx.once((first,), "other", lambda: compute("c")) == "c"
    assert ctx.once((second,), "k", lambda: compute("d")) == "d"
    assert calls == ["a", "c", "d"]
    unhashable: list[int] = []
    assert ctx.once((first, unhashable), None, lambda: compute("e")) == "e"


def test_each_step_is_rendered_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[int] = []
    original = TextReActProtocol._render_step

    def counting(self: TextReActProtocol, step: Step, *flag: object) -> list[Message]:
        rendered.append(step.index)
        return original(self, step, *flag)

    monkeypatch.setattr(TextReActProtocol, "_render_step", counting)
    agent = Agent(
        "gpt-4o-mini",
        [get_weather],
        client=ScriptedModel(_script("text")),
        protocol="text",
        template="json",
    )
    result = agent.run("Weather in Beijing and Paris?")
    assert result.answer == "Sunny in both."
    assert rendered == [0, 1]  # not [0, 0, 1]: the third request reuses step 0's messages


def test_a_kept_capability_lookup_follows_the_registry() -> None:
    registry = CapabilityRegistry()
    registry.register("acme-*", stop=False)
    assert registry.lookup("acme-1")[1] == "acme-*"
    assert registry.lookup("acme-1")[1] == "acme-*"
    registry.register("acme-1", stop=True)
    caps, pattern = registry.lookup("acme-1")
    assert pattern == "acme-1" and caps.stop


def test_with_retries_stops_after_max_attempts_and_says_so() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    attempts = 0

    async def failing() -> str:
        nonlocal attempts
        attempts += 1
        raise ModelUnavailableError("HTTP 503", retry_after=0.25)

    policy = RetryPolicy(max_attempts=3, sleep=sleep)
    with pytest.raises(ModelUnavailableError) as info:
        asyncio.run(with_retries(policy, failing))
    assert attempts == 3 and info.value.attempts == 3
    assert waits == [0.25, 0.25]
    assert "(after 3 attempts)" in str(info.value)
