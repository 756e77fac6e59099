"""Per-model protocol selection: the registry, run-time fallback, salvaged calls, and
histories that survive a protocol switch. Against the scripted model and against a
loopback HTTP server that answers the way real providers do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelRequestError,
    ScriptedModel,
    reply,
    tool_call_reply,
)
from react_engine.protocols import FunctionCallingProtocol
from react_engine.testing import (
    MockResponse,
    ScriptedServer,
    completion,
)
from react_engine.testing.tools import get_weather

# Error bodies as the providers send them when a model or deployment cannot take tools.
TOOLS_REJECTED = {
    "ollama": MockResponse(
        400,
        {
            "error": {
                "message": "registry.ollama.ai/library/gemma:2b does not support tools",
                "type": "api_error",
            }
        },
    ),
    "deepseek": MockResponse(
        400,
        {
            "error": {
                "message": "deepseek-reasoner does not support Function Calling",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        },
    ),
    "openai": MockResponse(
        400,
        {
            "error": {
                "message": "Unsupported parameter: 'tools' is not supported with this model.",
                "type": "invalid_request_error",
                "param": "tools",
                "code": "unsupported_parameter",
            }
        },
    ),
    "vllm": MockResponse(
        400,
        {
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
}

STOP_REJECTED = MockResponse(
    400,
    {
        "error": {
            "message": "Unsupported parameter: 'stop' is not supported with this model.",
            "type": "invalid_request_error",
            "param": "stop",
            "code": "unsupported_parameter",
        }
    },
)

TEXT_CALL = (
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Beijing"}'
)
TEXT_FINAL = "Thought: I now know the final answer\nFinal Answer: Sunny in Beijing."


def text_provider(rejection: MockResponse | None) -> Any:
    """A provider that rejects ``tools`` (with ``rejection``) and speaks text ReAct."""

    def respond(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        if "tools" in body and rejection is not None:
            return rejection
        observed = any(
            m["role"] == "user" and m["content"].startswith("Observation:")
            for m in body["messages"]
        )
        return completion(TEXT_FINAL if observed else TEXT_CALL)

    return respond


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=lambda body: completion("unset")) as srv:
        yield srv


def fresh(**kwargs: Any) -> dict[str, Any]:
    """Agent options that keep learned capabilities out of the process-wide cache."""
    kwargs.setdefault("capability_cache", CapabilityCache())
    kwargs.setdefault("registry", CapabilityRegistry.from_default(env={}))
    return kwargs


def assert_valid_for_function_calling(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by a tool message with its id, in order."""
    pending: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert pending and m["tool_call_id"] == pending.pop(0), messages
            continue
        assert not pending, f"tool calls {pending} left unanswered before {m['role']}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            pending = [c["id"] for c in m["tool_calls"]]
            assert len(set(pending)) == len(pending)
    assert not pending


def assert_valid_for_text(body: dict[str, Any]) -> None:
    assert "tools" not in body
    for m in body["messages"]:
        assert m["role"] in ("system", "user", "assistant")
        assert "tool_calls" not in m and isinstance(m["content"], str)


# --- the registry decides --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "protocol"),
    [
        ("gpt-4o-mini", "function_calling"),
        ("deepseek-chat", "function_calling"),
        ("deepseek-reasoner", "function_calling"),
        ("deepseek-r1:14b", "text"),
        ("qwen-plus", "function_calling"),
        ("smollm2-135m-instruct", "function_calling"),
        ("gemma2:9b", "text"),
        ("some-unknown-model", "function_calling"),
    ],
)
def test_auto_picks_the_protocol_from_the_registry(model: str, protocol: str) -> None:
    agent = Agent(model, [get_weather], client=ScriptedModel(["Final Answer: x"]), **fresh())
    chosen, why, _ = agent.choose_protocol()
    assert chosen.name == protocol
    assert why.startswith("registry:")
    result = agent.run("q")
    assert result.protocol == protocol
    assert result.protocol_reason == why


def test_registry_overrides_from_python_and_file(tmp_path: Path) -> None:
    registry = CapabilityRegistry.from_default(env={})
    registry.register("gpt-4o-mini", function_calling=False, text_template="zh")
    agent = Agent(
        "gpt-4o-mini",
        [get_weather],
        client=ScriptedModel(["最终答案：好"]),
        **fresh(registry=registry),
    )
    result = agent.run("q")
    assert result.protocol == "text" and result.answer == "好"

    path = tmp_path / "caps.json"
    path.write_text(json.dumps({"models": [{"patterns": ["house-*"], "function_calling": False}]}))
    registry = CapabilityRegistry.from_default(env={})
    registry.load_file(path)
    assert registry.lookup("house-llm")[0].function_calling is False


def test_an_explicit_protocol_wins() -> None:
    agent = Agent(
        "gpt-4o",
        [get_weather],
        client=ScriptedModel(["Final Answer: x"]),
        protocol="text",
        **fresh(),
    )
    assert agent.run("q").protocol_reason == "explicit"


# --- run-time fallback ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(TOOLS_REJECTED))
def test_fallback_to_text_when_the_server_rejects_tools(
    server: ScriptedServer, provider: str
) -> None:
    server.default = text_provider(TOOLS_REJECTED[provider])
    cache = CapabilityCache()
    agent = Agent(
        "deepseek-chat",
        [get_weather],
        base_url=server.base_url,
        api_key="sk-x",
        probe=False,  # the subject: a rejection met by the run itself
        **fresh(capability_cache=cache),
    )
    result = agent.run("Weather in Beijing?")
    assert result.answer == "Sunny in Beijing."
    assert result.protocol == "text"
    assert result.protocol_reason.startswith("fallback")
    assert any("switched to the text protocol" in e for e in [n.message for n in result.notices])
    assert any(
        "switched to the text protocol" in e for e in [n.message for n in result.steps[0].notices]
    )
    # One wasted request, and the question was not lost.
    assert len(server.requests) == 3
    assert "tools" in server.requests[0]
    for body in server.requests[1:]:
        assert_valid_for_text(body)
        assert body["messages"][1]["content"] == "Question: Weather in Beijing?"
    assert cache.get(server.base_url, "deepseek-chat") == {"function_calling": False}

    # The next run on the same model and endpoint wastes nothing.
    server.requests.clear()
    again = agent.run("Weather in Beijing?")
    assert again.protocol == "text" and again.answer == "Sunny in Beijing."
    assert len(server.requests) == 2 and all("tools" not in b for b in server.requests)
    assert again.protocol_reason.startswith("learned")


def test_fallback_decision_persists_in_a_cache_file(server: ScriptedServer, tmp_path: Path) -> None:
    server.default = text_provider(TOOLS_REJECTED["ollama"])
    path = tmp_path / "caps-cache.json"
    Agent(
        "llama3.1:8b",
        [get_weather],
        base_url=server.base_url,
        **fresh(capability_cache=CapabilityCache(path)),
    ).run("q")
    assert path.exists()
    server.requests.clear()
    # A new process would build a new cache object from the same file.
    agent = Agent(
        "llama3.1:8b",
        [get_weather],
        base_url=server.base_url,
        **fresh(capability_cache=CapabilityCache(path)),
    )
    assert agent.run("q").protocol == "text"
    assert all("tools" not in b for b in server.requests)


def test_done_when_deepseek_reasoner_on_a_server_that_rejects_tools(
    server: ScriptedServer,
) -> None:
    server.default = text_provider(TOOLS_REJECTED["deepseek"])
    agent = Agent(
        "deepseek-reasoner", [get_weather], base_url=server.base_url, api_key="sk-x", **fresh()
    )
    result = agent.run("Weather in Beijing?")
    assert result.answer == "Sunny in Beijing."
    assert result.protocol == "text"
    wasted = sum(1 for b in server.requests if "tools" in b)
    assert wasted <= 1
    server.requests.clear()
    agent.run("Weather in Beijing?")
    assert not any("tools" in b for b in server.requests)


def test_no_fallback_when_the_protocol_was_explicit(server: ScriptedServer) -> None:
    server.default = text_provider(TOOLS_REJECTED["openai"])
    agent = Agent(
        "gpt-4o", [get_weather], base_url=server.base_url, protocol="function_calling", **fresh()
    )
    with pytest.raises(ModelRequestError) as info:
        agent.run("q")
    assert info.value.status_code == 400
    assert info.value.result is not None and info.value.result.stop_reason == "error"


def test_stop_rejected_is_dropped_and_replies_are_cut_client_side(server: ScriptedServer) -> None:
    def respond(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        if "stop" in body:
            return STOP_REJECTED
        observed = any(
            m["content"].startswith("Observation:") for m in body["messages"] if m["role"] == "user"
        )
        # Without stop, the model runs on and invents an observation and an answer.
        return completion(
            TEXT_FINAL if observed else TEXT_CALL + "\nObservation: raining\nFinal Answer: rain"
        )

    server.default = respond
    cache = CapabilityCache()
    agent = Agent(
        "house-model",
        [get_weather],
        base_url=server.base_url,
        protocol="text",
        **fresh(capability_cache=cache),
    )
    result = agent.run("Weather in Beijing?")
    assert result.answer == "Sunny in Beijing."
    assert result.steps[0].text == TEXT_CALL
    assert "cut_observation" in result.steps[0].repairs
    assert any("stop sequences rejected" in e for e in [n.message for n in result.notices])
    assert len(server.requests) == 3 and "stop" in server.requests[0]
    assert cache.get(server.base_url, "house-model") == {"stop": False}


def test_other_client_errors_are_not_taken_for_a_missing_capability(
    server: ScriptedServer,
) -> None:
    server.default = lambda body: MockResponse(
        404, {"error": {"message": "The model `nope` does not exist", "code": "model_not_found"}}
    )
    agent = Agent("nope", [get_weather], base_url=server.base_url, **fresh())
    with pytest.raises(ModelRequestError, match="does not exist"):
        agent.run("q")
    assert len(server.requests) == 1


# --- salvaged calls ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fmt"),
    [
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>',
            "hermes",
        ),
        (
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
            '{"location": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
            "deepseek",
        ),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>",
            "qwen_xml",
        ),
        ('get_weather(location="Paris")', "python"),
        (
            'Thought: I should check.\nAction: get_weather\nAction Input: {"location": "Paris"}',
            "react_text",
        ),
    ],
)
def test_calls_written_as_text_are_salvaged(content: str, fmt: str) -> None:
    model = ScriptedModel([reply(content), reply("Overcast in Paris.")])
    agent = Agent("qwen2.5-7b-instruct", [get_weather], client=model, **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Overcast in Paris."
    action = result.steps[0].actions[0]
    assert action.salvaged and action.tool == "get_weather"
    assert action.arguments == {"location": "Paris"}
    assert f"salvaged:{fmt}" in result.steps[0].repairs
    # The salvaged call goes back as a native call with its tool message.
    assert_valid_for_function_calling(model.payloads[1]["messages"])
    assert model.payloads[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_prose_that_mentions_a_tool_is_an_answer() -> None:
    model = ScriptedModel([reply("You could use get_weather for that, but Paris is usually mild.")])
    agent = Agent("gpt-4o", [get_weather], client=model, **fresh())
    result = agent.run("Weather in Paris?")
    assert result.stop_reason == "final_answer" and not result.tool_calls


# --- histories that survive a switch --------------------------------------------------------------------


def test_three_turns_switching_protocol_every_turn() -> None:
    registry = CapabilityRegistry.from_default(env={})
    fc_model = ScriptedModel(
        [
            tool_call_reply(
                ("get_weather", {"location": "Beijing"}, "call_b1"), content="Checking Beijing."
            ),
            reply("Beijing is sunny."),
            tool_call_reply(("get_weather", {"location": "Tokyo"}, "call_t1")),
            reply("Tokyo is partly cloudy."),
        ]
    )
    text_model = ScriptedModel(
        [
            'Thought: Guangzhou now.\nAction: get_weather\nAction Input: {"location": "Guangzhou"}',
            "Thought: I now know the final answer\nFinal Answer: Guangzhou is rainy.",
        ]
    )
    fc_agent = Agent("gpt-4o", [get_weather], client=fc_model, **fresh(registry=registry))
    text_agent = Agent("deepseek-r1", [get_weather], client=text_model, **fresh(registry=registry))

    conv = fc_agent.conversation()
    assert conv.ask("Weather in Beijing?").protocol == "function_calling"
    conv.agent = text_agent
    assert conv.ask("And Guangzhou?").protocol == "text"
    conv.agent = fc_agent
    assert conv.ask("And Tokyo?").protocol == "function_calling"

    for body in fc_model.payloads:
        assert_valid_for_function_calling(body["messages"])
    for body in text_model.payloads:
        assert_valid_for_text(body)

    # The text turn saw the native turn as Thought/Action/Observation text.
    history = text_model.payloads[0]["messages"]
    assert history[1]["content"] == "Question: Weather in Beijing?"
    assert "Action: get_weather" in history[2]["content"] and "Beijing" in history[2]["content"]
    assert history[3]["content"].startswith("Observation: <observation>")
    assert history[4] == {
        "role": "assistant",
        "content": "Thought: I now know the final answer\nFinal Answer: Beijing is sunny.",
    }
    # The last native turn saw the text turn as native calls with generated, paired ids.
    last = fc_model.payloads[-1]["messages"]
    calls = [m for m in last if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["tool_calls"][0]["function"]["name"] for c in calls] == ["get_weather"] * 3
    text_call = calls[1]["tool_calls"][0]
    assert text_call["id"].startswith("call_") and json.loads(
        text_call["function"]["arguments"]
    ) == {"location": "Guangzhou"}


PARALLEL_REJECTED = MockResponse(
    400,
    {
        "error": {
            "message": "Unsupported parameter: 'parallel_tool_calls' is not supported.",
            "type": "invalid_request_error",
            "param": "parallel_tool_calls",
            "code": "unsupported_parameter",
        }
    },
)


@pytest.mark.parametrize("listed", [False, True])
def test_parallel_tool_calls_is_sent_only_while_the_model_accepts_it(
    server: ScriptedServer, listed: bool
) -> None:
    """``FunctionCallingProtocol(parallel_tool_calls=False)``: sent to a model listed as
    accepting it, and no longer once the server rejects it; never to one not listed."""
    server.default = lambda body: (
        PARALLEL_REJECTED if "parallel_tool_calls" in body else completion("Sunny.")
    )
    registry = CapabilityRegistry.from_default(env={})
    if listed:
        registry.register("house-*", function_calling=True, parallel_tool_calls=True)
    cache = CapabilityCache()
    agent = Agent(
        "house-model",
        [get_weather],
        base_url=server.base_url,
        protocol=FunctionCallingProtocol(parallel_tool_calls=False),
        **fresh(capability_cache=cache, registry=registry),
    )
    assert agent.run("Weather?").answer == "Sunny."
    sent = ["parallel_tool_calls" in body for body in server.requests]
    assert sent == ([True, False] if listed else [False])
    assert cache.get(server.base_url, "house-model") == (
        {"parallel_tool_calls": False} if listed else {}
    )
