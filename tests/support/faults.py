"""Shared by the fault tests (tests/faults): a city-lookup tool that records its calls,
agents on a real ``openai`` client against a loopback server (``Harness``, ``run_agent``),
and tools that block, sleep or count, for runs whose tools misbehave."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import openai

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelSettings,
    RetryPolicy,
    RunResult,
    ScriptedModel,
    Tool,
    ToolAnnotations,
    runtime,
    tool_call_reply,
)
from react_engine.testing import ScriptedServer
from support.replies import (
    FakeSleep,
    final_body,
)

PROTOCOLS = ["function_calling", "text"]
CLIENTS = ["sync", "async"]
ATTEMPTS = 3


class Lookup:
    """A city lookup tool that records every call it really receives."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        def lookup(city: str) -> dict[str, Any]:
            """Facts about a city.

            Args:
                city: the city's name.
            """
            self.calls.append(city)
            return {"city": city, "population": len(city) * 1000}

        self.tool = Tool.from_function(lookup, annotations=ToolAnnotations(read_only=True))


class Harness:
    """Builds an agent on a real SDK client for the server, runs it, closes the client."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.lookup = Lookup()
        self.sleep = FakeSleep()

    def run(
        self,
        protocol: str,
        question: str = "Tell me about Paris.",
        *,
        client: str = "sync",
        timeout: float = 10.0,
        **options: Any,
    ) -> RunResult:
        options.setdefault("retry", RetryPolicy(max_attempts=ATTEMPTS, sleep=self.sleep))
        options.setdefault("max_consecutive_errors", 2)

        def build(sdk: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
            return Agent(
                "mock-model",
                [self.lookup.tool],
                protocol=protocol,
                client=sdk,
                settings=ModelSettings(timeout=timeout),
                capability_cache=CapabilityCache(),
                registry=CapabilityRegistry.from_default(env={}),
                **options,
            )

        url, key = self.server.base_url, "sk-test-faults"
        if client == "sync":
            with openai.OpenAI(base_url=url, api_key=key) as sdk:
                return build(sdk).run(question)

        async def arun() -> RunResult:
            async with openai.AsyncOpenAI(base_url=url, api_key=key) as sdk:
                return await build(sdk).arun(question)

        return asyncio.run(arun())


def assert_first_step_kept(result: RunResult) -> None:
    """The tool step made before the fault is in the transcript, exactly once."""
    first = result.steps[0]
    assert first.kind == "action"
    assert [(a.tool, a.arguments, a.status) for a in first.actions] == [
        ("lookup", {"city": "Paris"}, "ok")
    ]
    assert json.loads(first.actions[0].observation) == {"city": "Paris", "population": 5000}
    assert [s.index for s in result.steps] == list(range(len(result.steps)))


GOOD = final_body("function_calling", "unused")  # a well-formed body, cut or delayed below


def lookup(city: str) -> str:
    """Facts about a city.

    Args:
        city: the city's name.
    """
    return f"{city}: 5000 people"


def run_agent(
    base_url: str,
    protocol: str = "function_calling",
    *,
    client: str = "sync",
    api_key: str = "sk-test-reply-faults",
    timeout: float | None = 10.0,
    **options: Any,
) -> RunResult:
    options.setdefault("retry", RetryPolicy(max_attempts=1, sleep=FakeSleep()))

    def build(sdk: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
        return Agent(
            "mock-model",
            [Tool.from_function(lookup)],
            protocol=protocol,
            client=sdk,
            settings=ModelSettings(timeout=timeout),
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
            **options,
        )

    if client == "sync":
        with openai.OpenAI(base_url=base_url, api_key=api_key) as sdk:
            return build(sdk).run("Tell me about Paris.")

    async def arun() -> RunResult:
        async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key) as sdk:
            return await build(sdk).arun("Tell me about Paris.")

    return asyncio.run(arun())


def with_usage(body: dict[str, Any], **usage: Any) -> dict[str, Any]:
    body["usage"] = usage
    return body


def tool_threads() -> int:
    """The sync-tool pool's live threads, stuck ones included (the pool's own count)."""
    pool = runtime._TOOLS
    return pool.threads + pool.stuck


def wait_for_stuck_threads() -> None:
    stuck = getattr(runtime, "stuck_threads", lambda: 0)
    deadline = time.monotonic() + 10
    while stuck() and time.monotonic() < deadline:
        time.sleep(0.01)


def blocking_tool(gate: threading.Event, name: str = "stuck") -> Tool:
    def stuck(x: int) -> str:
        """Wait for the gate.

        Args:
            x: anything.
        """
        gate.wait(30)
        return f"released {x}"

    return Tool.from_function(stuck, name=name)


def sleeper(seconds: float) -> Tool:
    def nap(x: int) -> str:
        """Block the thread for a while.

        Args:
            x: anything.
        """
        time.sleep(seconds)
        return f"slept {x}"

    return Tool.from_function(nap)


def calls(tool: str, n: int) -> Any:
    return tool_call_reply(*[(tool, {"x": i}) for i in range(n)])


def agent_for(tools: list[Tool], script: list[Any], **kwargs: Any) -> Agent:
    kwargs.setdefault("multi_action", "all")  # these tools' many calls per reply all run
    return Agent(
        "gpt-4o-mini", tools, protocol="function_calling", client=ScriptedModel(script), **kwargs
    )
