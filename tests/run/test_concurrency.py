"""Many runs at once against one loopback server, with no cross-talk.

Each question carries a unique token. The server answers a request by calling ``echo`` with
the token it finds in that request, then gives the final answer built from the tool result
it finds, so a run that received another run's reply, tool result or history would end
with the wrong answer. The checks: each answer matches its question, each run's trace holds
its own token and no other, and each request the server received held exactly one token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelSettings,
    RetryPolicy,
    RunResult,
    Tool,
)
from react_engine.testing import MockResponse, ScriptedServer, completion, tool_calls_completion

TOKEN = re.compile(r"T-[0-9a-f]{16}")
RUNS = 500
OWN_AGENT_EVERY = 10  # every tenth run has an Agent (and a client) of its own


def new_token() -> str:
    return f"T-{uuid.uuid4().hex[:16]}"


def tokens_in(value: Any) -> set[str]:
    return set(TOKEN.findall(json.dumps(value, ensure_ascii=False)))


def echo_server_reply(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
    """Call ``echo`` with the question's token, then answer from the echoed tool result."""
    messages = body["messages"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    asked = TOKEN.findall(question)
    if len(asked) != 1:
        return MockResponse(400, {"error": {"message": "no token in the question"}})
    if "tools" in body:  # function calling: the result is in a tool message
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return tool_calls_completion(("echo", {"token": asked[0]}))
        return completion(f"answer {results[-1].removeprefix('echo:')}")
    observed = [m["content"] for m in messages[2:] if m["role"] == "user"]
    if not observed:
        return completion(
            f'Thought: echo it.\nAction: echo\nAction Input: {{"token": "{asked[0]}"}}'
        )
    echoed = TOKEN.findall(observed[-1])
    return completion(f"Thought: done.\nFinal Answer: answer {echoed[0] if echoed else '?'}")


class Echo:
    """An async tool that reports how many of its calls were in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()

        async def echo(token: str) -> str:
            """Echo a token.

            Args:
                token: the token.
            """
            with self.lock:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(0.01)
                return f"echo:{token}"
            finally:
                with self.lock:
                    self.in_flight -= 1

        self.tool = Tool.from_function(echo)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=echo_server_reply) as srv:
        yield srv


def make_agent(client: Any, protocol: str, echo: Echo) -> Agent:
    return Agent(
        "mock-model",
        [echo.tool],
        protocol=protocol,
        client=client,
        settings=ModelSettings(timeout=60),
        retry=RetryPolicy(max_attempts=1),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
    )


def assert_own(result: RunResult, token: str) -> None:
    assert result.answer == f"answer {token}", result.answer
    assert result.stop_reason == "final_answer"
    assert token in result.question
    assert tokens_in(result.trace()) == {token}
    calls = result.tool_calls
    assert [(a.tool, a.arguments, a.observation) for a in calls] == [
        ("echo", {"token": token}, f"echo:{token}")
    ]


async def test_500_concurrent_runs_have_no_cross_talk(server: ScriptedServer) -> None:
    echo = Echo()
    tokens = [new_token() for _ in range(RUNS)]
    own_clients: list[openai.AsyncOpenAI] = []
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test") as shared_client:
        shared = make_agent(shared_client, "function_calling", echo)

        def agent_for(i: int) -> Agent:
            if i % OWN_AGENT_EVERY:
                return shared
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
            own_clients.append(client)
            protocol = "text" if i % (2 * OWN_AGENT_EVERY) else "function_calling"
            return make_agent(client, protocol, echo)

        agents = [agent_for(i) for i in range(RUNS)]
        try:
            results = await asyncio.gather(
                *(a.arun(f"What is the echo of {t}?") for a, t in zip(agents, tokens, strict=True))
            )
        finally:
            for client in own_clients:
                await client.close()

    for result, token in zip(results, tokens, strict=True):
        assert_own(result, token)
    assert {r.protocol for r in results} == {"function_calling", "text"}
    # Every request the server saw belonged to exactly one run.
    assert len(server.requests) == 2 * RUNS
    per_request = [tokens_in(body["messages"]) for body in server.requests]
    assert all(len(found) == 1 for found in per_request)
    assert sorted(t for found in per_request for t in found) == sorted(tokens * 2)
    assert echo.peak > 10  # the runs really overlapped


def test_concurrent_blocking_runs_from_threads(server: ScriptedServer) -> None:
    """``agent.run`` from many threads at once, sharing one sync client."""
    echo = Echo()
    tokens = [new_token() for _ in range(40)]
    results: dict[str, RunResult] = {}
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test") as client:
        agent = make_agent(client, "function_calling", echo)

        def work(token: str) -> None:
            results[token] = agent.run(f"What is the echo of {token}?")

        threads = [threading.Thread(target=work, args=(t,)) for t in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(results) == sorted(tokens)
    for token, result in results.items():
        assert_own(result, token)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_one_agent_serves_one_event_loop_after_another(
    server: ScriptedServer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent built from ``base_url`` owns its async client; each ``asyncio.run`` gets
    connections of its own, closed when that loop ends (no retry hides a stale one)."""
    echo = Echo()
    agent = Agent(
        "mock-model",
        [echo.tool],
        protocol=protocol,
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_attempts=1),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
    )
    caplog.set_level(logging.WARNING)
    for _ in range(3):
        token = new_token()
        assert_own(asyncio.run(agent.arun(f"What is the echo of {token}?")), token)
        # Alternate with a blocking run: the sync client is untouched by event loops.
        token = new_token()
        assert_own(agent.run(f"What is the echo of {token}?"), token)
    assert len(server.requests) == 12  # no attempt failed and was retried
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
