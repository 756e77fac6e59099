"""The agent, both protocols, end to end against the real local llama.cpp server.

These assert on the engine, not on the 135M model's wisdom: the requests have the right
shape, every run ends with a final answer or a typed stop reason (never an unexpected
exception), the trace is complete and consistent, usage is counted, and runs repeat.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from react_engine import (
    Agent,
    CapabilityCache,
    ChatModel,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    RunAborted,
    RunResult,
)
from react_engine.cli.agents import DEMO_TOOLS
from react_engine.local import LocalEndpoint
from react_engine.transport.wire import request_payload

pytestmark = pytest.mark.e2e

SETTINGS = ModelSettings(temperature=0.0, seed=42, max_tokens=96)
QUESTION = "What's the weather like in Paris?"


class Recording(ChatModel):
    """Pass-through to the real server that keeps every request payload."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.base_url = inner.base_url
        self.payloads: list[dict[str, Any]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.payloads.append(request_payload(request))
        return await self.inner.complete(request)


_CLIENTS: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Close the clients a test made when it ends: their sockets are closed by the test
    that opened them, not by whichever later collection finds them."""
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def make_agent(ep: LocalEndpoint, protocol: str, **kwargs: Any) -> tuple[Agent, Recording]:
    client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, timeout=120)
    _CLIENTS.append(client)
    recording = Recording(OpenAIChatModel(client))
    agent = Agent(
        ep.model,
        DEMO_TOOLS,
        client=recording,
        protocol=protocol,
        capability_cache=CapabilityCache(),
        settings=SETTINGS,
        max_steps=2,
        **kwargs,
    )
    return agent, recording


def run_to_end(agent: Agent, question: str = QUESTION) -> RunResult:
    try:
        return agent.run(question)
    except RunAborted as exc:  # a typed stop that carries the transcript is an outcome too
        return exc.result


def assert_consistent(result: RunResult) -> None:
    assert result.stop_reason in {"final_answer", "max_steps", "loop", "error_budget"}
    if result.stop_reason == "final_answer":
        assert result.answer is not None and result.steps[-1].kind == "final"
    ids = [a.id for a in result.tool_calls]
    assert len(ids) == len(set(ids)) and all(ids)
    for step in result.steps:
        assert step.usage.prompt_tokens > 0 and step.usage.completion_tokens >= 0
        assert step.protocol == result.protocol
        for action in step.actions:
            assert action.observation, "every call is paired with its observation"
            assert action.status in {"ok", "error", "unknown_tool", "invalid_arguments", "skipped"}
        if step.kind == "format_error":
            assert step.feedback
    assert result.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in result.steps)
    assert result.usage.requests >= len(result.steps)


def test_function_calling_end_to_end(local_endpoint: LocalEndpoint) -> None:
    agent, recording = make_agent(local_endpoint, "function_calling")
    result = run_to_end(agent)
    assert result.protocol == "function_calling"
    assert_consistent(result)
    first = recording.payloads[0]
    assert first["model"] == local_endpoint.model
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "calculator"]
    assert first["tool_choice"] == "auto"
    assert "stop" not in first
    assert first["temperature"] == 0.0 and first["seed"] == 42


def test_text_protocol_end_to_end(local_endpoint: LocalEndpoint) -> None:
    agent, recording = make_agent(local_endpoint, "text")
    result = run_to_end(agent)
    assert result.protocol == "text"
    assert_consistent(result)
    for payload in recording.payloads:
        assert payload["model"] == local_endpoint.model
        assert "tools" not in payload
        assert "Observation:" in payload["stop"]
        assert payload["messages"][0]["content"].count('"name": "get_weather"') == 1
        assert payload["messages"][1]["content"] == f"Question: {QUESTION}"


def test_required_tool_choice_makes_the_model_call(local_endpoint: LocalEndpoint) -> None:
    agent, recording = make_agent(local_endpoint, "function_calling")
    result = run_to_end(agent, "Weather in Beijing?")
    forced = agent.run("Weather in Beijing?", tool_choice="get_weather", max_steps=1)
    assert forced.steps[0].actions, "a named tool_choice yields a call from the server"
    assert forced.steps[0].actions[0].tool == "get_weather"
    assert recording.payloads[-2]["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    assert result.usage.total_tokens > 0


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_runs_repeat_with_temperature_zero_and_a_seed(
    local_endpoint: LocalEndpoint, protocol: str
) -> None:
    agent, _ = make_agent(local_endpoint, protocol)
    one, two = run_to_end(agent), run_to_end(agent)
    assert [s.text for s in one.steps] == [s.text for s in two.steps]
    assert [(a.tool, a.arguments) for a in one.tool_calls] == [
        (a.tool, a.arguments) for a in two.tool_calls
    ]
    assert one.answer == two.answer


def test_auto_chooses_from_the_registry(local_endpoint: LocalEndpoint) -> None:
    agent, _ = make_agent(local_endpoint, "auto")
    result = run_to_end(agent)
    assert result.protocol == "function_calling"
    assert result.protocol_reason.startswith("registry: smollm2")
    assert_consistent(result)


def test_async_runs_concurrently(local_endpoint: LocalEndpoint) -> None:
    client = openai.AsyncOpenAI(
        base_url=local_endpoint.base_url, api_key=local_endpoint.api_key, timeout=300
    )
    agent = Agent(
        local_endpoint.model,
        DEMO_TOOLS,
        client=client,
        protocol="text",
        settings=SETTINGS,
        max_steps=2,
    )

    async def both() -> list[RunResult]:
        async def one(q: str) -> RunResult:
            try:
                return await agent.arun(q)
            except RunAborted as exc:
                return exc.result

        try:
            return await asyncio.gather(one("Weather in Tokyo?"), one("What is 6*7?"))
        finally:
            await client.close()

    results = asyncio.run(both())
    assert [r.question for r in results] == ["Weather in Tokyo?", "What is 6*7?"]
    for r in results:
        assert_consistent(r)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_make_demo_answers_from_the_tool(protocol: str) -> None:
    """What ``make demo`` runs, as a new user runs it: its own server, exit 0 only when
    the answer carries the temperature get_weather returned."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.pop("REACT_ENGINE_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "react_engine", "demo", "--protocol", protocol],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "14" in done.stdout  # the answer (stdout holds it alone)
    assert "→ calling get_weather(" in done.stderr  # the steps and the check: on stderr
    assert "✓ the answer carries the temperature get_weather returned (14)" in done.stderr


class Verdict(BaseModel):
    """An output type whose every value is short (no free string the model could run on
    in until max_tokens): under a grammar its JSON always closes."""

    sunny: bool
    temperature_c: int


@pytest.mark.parametrize("protocol", ["function_calling", "text", "structured"])
def test_a_typed_answer_under_the_servers_grammar(
    local_endpoint: LocalEndpoint, protocol: str
) -> None:
    ep = local_endpoint
    with openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, timeout=120) as client:
        recording = Recording(OpenAIChatModel(client))
        agent = Agent(
            ep.model,
            DEMO_TOOLS,
            client=recording,
            protocol=protocol,
            capability_cache=CapabilityCache(),
            settings=SETTINGS,
            output_type=Verdict,
        )
        result = agent.run(
            "Is it sunny in Paris, and how warm? Answer without tools.", tool_choice="none"
        )
    assert isinstance(result.output, Verdict)
    assert Verdict.model_validate_json(result.answer or "") == result.output
    first = recording.payloads[0]
    if protocol == "function_calling":  # the server holds the call to final_result's schema
        assert [t["function"]["name"] for t in first["tools"]] == ["final_result"]
    else:
        assert "grammar" in first["extra_body"]


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_an_observation_over_the_context_window_is_shortened(
    local_endpoint: LocalEndpoint, protocol: str
) -> None:
    """The real server's 400 for a request over its context window (8,192 tokens) is
    recognised: the observation the model reads is shortened and the turn sent again."""
    from react_engine import tool

    @tool
    def read_log() -> str:
        """Read the whole build log."""
        return "".join(f"step {i}: compiled module_{i}.c without warnings\n" for i in range(900))

    with openai.OpenAI(base_url=local_endpoint.base_url, api_key=local_endpoint.api_key) as client:
        recording = Recording(OpenAIChatModel(client))
        agent = Agent(
            local_endpoint.model,
            [read_log],
            client=recording,
            protocol=protocol,
            capability_cache=CapabilityCache(),
            settings=SETTINGS,
            max_steps=1,
            max_observation_chars=None,
        )
        result = agent.run("Read the build log. Were there warnings?", tool_choice="required")
    assert [a.tool for a in result.tool_calls] == ["read_log"]
    whole = result.tool_calls[0].observation
    assert len(whole) > 40_000  # the trace keeps it whole
    assert any(
        "did not fit the model's context window" in e for e in [n.message for n in result.notices]
    )
    assert result.stop_reason in {"final_answer", "max_steps"}
    # The request the server refused carried the whole log; the one after it a shortened one.
    sizes = [len(json.dumps(p["messages"])) for p in recording.payloads]
    assert max(sizes) > 40_000 and sizes[-1] < 5_000
