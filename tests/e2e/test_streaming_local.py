"""A streamed text-protocol run against the real local llama.cpp server.

The same run, streamed and not, at temperature 0 with a seed: streaming changes how the
reply travels, not what it is. Each step's text arrives in several deltas, and the usage
is the server's (its usage chunk, or the count of chunks when it sends none).
"""

from __future__ import annotations

import pytest

from react_engine import Agent, CapabilityCache, ModelSettings, RunAborted, RunResult
from react_engine.cli.agents import DEMO_TOOLS
from react_engine.local import LocalEndpoint
from react_engine.run.events import Event, RunDone, TextDelta

pytestmark = pytest.mark.e2e

SETTINGS = ModelSettings(temperature=0.0, seed=42, max_tokens=96)
QUESTION = "What's the weather like in Paris?"


def test_a_streamed_text_run_matches_the_same_run_not_streamed(
    local_endpoint: LocalEndpoint,
) -> None:
    agent = Agent(
        local_endpoint.model,
        DEMO_TOOLS,
        base_url=local_endpoint.base_url,
        api_key=local_endpoint.api_key,
        protocol="text",
        capability_cache=CapabilityCache(),
        settings=SETTINGS,
        max_steps=2,
    )
    try:
        plain = agent.run(QUESTION)
    except RunAborted as exc:
        plain = exc.result
    events: list[Event] = []
    streamed: RunResult | None = None
    try:
        for event in agent.run_stream(QUESTION):
            events.append(event)
            if isinstance(event, RunDone):
                streamed = event.result
    except RunAborted as exc:
        streamed = exc.result
    assert streamed is not None
    assert [s.text for s in streamed.steps] == [s.text for s in plain.steps]
    assert streamed.stop_reason == plain.stop_reason and streamed.answer == plain.answer
    first = [e.text for e in events if isinstance(e, TextDelta) and e.step == 0]
    assert len(first) > 1, "the reply arrived in pieces"
    for step in streamed.steps:
        assert step.usage.completion_tokens > 0
