"""``protocol="auto"`` probes a new HTTP endpoint once, before the first question.

A server that silently drops ``tools`` (the loopback server's ``ignore_tools`` mode) is
caught by the probe: the run speaks the text protocol from its first request, and the
tool runs. Without the probe (``probe=False``) the model, never shown the tools, answers
"I cannot access real-time data" and that is taken as the answer. The probe's answer is
kept in the capability cache: one request per new endpoint and model.
"""

from __future__ import annotations

from typing import Any

import pytest

from react_engine import Agent, CapabilityCache, Tool
from react_engine.testing import ScriptedModel
from react_engine.testing.server import ScriptedServer, completion
from react_engine.transport.probe import PROBE_TOOL

CANNOT = "I cannot access real-time data."
seen: list[dict[str, str]] = []


def get_weather(city: str) -> str:
    """The weather in a city."""
    seen.append({"city": city})
    return f"{city}: 21 degrees, sunny"


def model_without_tools(body: dict[str, Any]) -> dict[str, Any]:
    """A model behind a server that never shows it ``tools``: it answers a ReAct prompt in
    ReAct, and anything else (the probe, a function-calling question) in plain text."""
    assert "tools" not in body and "tool_choice" not in body  # the server dropped them
    messages = body["messages"]
    prompt = " ".join(str(m.get("content") or "") for m in messages)
    if "Action Input" not in prompt:
        return completion(CANNOT)
    if "21 degrees" in str(messages[-1].get("content") or ""):
        return completion("Thought: I have it.\nFinal Answer: 21 degrees and sunny in Paris.")
    return completion(
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
    )


def is_probe(body: dict[str, Any]) -> bool:
    return PROBE_TOOL in str(body["messages"][-1].get("content"))


@pytest.fixture
def ignoring() -> Any:
    seen.clear()
    with ScriptedServer(default=model_without_tools, ignore_tools=True) as server:
        yield server


def agent(server: ScriptedServer, cache: CapabilityCache, **kwargs: Any) -> Agent[str]:
    return Agent(
        "mock-model",
        [Tool.from_function(get_weather)],
        base_url=server.base_url,
        capability_cache=cache,
        max_steps=4,
        **kwargs,
    )


def test_auto_probes_first_and_switches_to_text_before_the_question(
    ignoring: ScriptedServer,
) -> None:
    cache = CapabilityCache()
    result = agent(ignoring, cache).run("What is the weather in Paris?")
    first, *rest = ignoring.requests
    assert is_probe(first)  # the probe went first, before the question
    assert rest and not any(is_probe(r) for r in rest)
    assert "Paris" in str(rest[0]["messages"][-1]["content"])  # then the question, in text
    assert result.protocol == "text"
    assert seen == [{"city": "Paris"}]
    assert result.answer == "21 degrees and sunny in Paris."
    assert cache.get(ignoring.base_url, "mock-model")["function_calling"] is False


def test_the_probe_is_sent_once_per_endpoint_and_model(ignoring: ScriptedServer) -> None:
    cache = CapabilityCache()
    bot = agent(ignoring, cache)
    bot.run("What is the weather in Paris?")
    bot.run("And now?")
    assert sum(is_probe(r) for r in ignoring.requests) == 1


def test_probe_false_sends_no_probe_and_the_refusal_is_taken(ignoring: ScriptedServer) -> None:
    result = agent(ignoring, CapabilityCache(), probe=False).run("What is the weather in Paris?")
    assert not any(is_probe(r) for r in ignoring.requests)
    assert result.protocol == "function_calling"
    assert result.answer == CANNOT and seen == []  # what the probe is there to catch


def test_a_server_honouring_tools_answers_the_probe_outside_the_script() -> None:
    with ScriptedServer(completion("Paris is sunny.")) as server:
        cache = CapabilityCache()
        result = agent(server, cache).run("What is the weather in Paris?")
        assert len(server.probes) == 1 and server.remaining == 0
        assert result.protocol == "function_calling" and result.answer == "Paris is sunny."
        assert cache.get(server.base_url, "mock-model")["function_calling"] is True


def test_an_in_process_model_is_not_probed() -> None:
    model = ScriptedModel(["Paris is sunny."])
    result = Agent("m", [Tool.from_function(get_weather)], client=model).run("Weather?")
    assert result.answer == "Paris is sunny."
    assert len(model.requests) == 1
