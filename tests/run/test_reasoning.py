"""Reasoning models: the reasoning kept on the step, sent back where the provider wants it,
never read as an action or an answer; temperature and max_tokens shaped to the model.

The DeepSeek thinking-mode server below follows the provider's rule for tools: while the
tool loop of one question goes on, every assistant tool-call message must carry its
``reasoning_content`` (HTTP 400 otherwise); earlier questions' reasoning is not needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelSettings,
    ScriptedModel,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.cli.render import format_step, format_step_plain
from react_engine.protocols.structured import CUT_SHORT
from react_engine.testing import MockResponse, ScriptedServer, completion
from react_engine.transport.wire import message_dict
from react_engine.types import AssistantMessage, ModelResponse, ToolCall, Usage

URL_MODEL = "deepseek-reasoner"
REASONING_1 = "  The user wants Paris.\n\nI should call get_weather  "
REASONING_2 = "The tool said overcast, 14°C."

MISSING = (
    "Missing `reasoning_content` field in the assistant message at message index {i}. For "
    "more information, please refer to "
    "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)


def fresh(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("capability_cache", CapabilityCache())
    kwargs.setdefault("registry", CapabilityRegistry.from_default(env={}))
    return kwargs


class Recorder:
    """A weather tool that records every call it runs."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        @tool
        def get_weather(location: str) -> str:
            """Current weather for a city."""
            self.calls.append(location)
            return f"{location}: overcast, 14°C"

        self.tool = get_weather


def with_reasoning(body: dict[str, Any], reasoning: str) -> dict[str, Any]:
    body["choices"][0]["message"]["reasoning_content"] = reasoning
    return body


def weather_call(location: str) -> list[dict[str, Any]]:
    arguments = json.dumps({"location": location})
    return [
        {
            "id": f"call_{location}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
    ]


def deepseek_thinking(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
    """DeepSeek's thinking mode with tools: one call per question, then the answer."""
    messages = body["messages"]
    question = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for i, m in enumerate(messages[question:], question):
        if m["role"] == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
            error = {"message": MISSING.format(i=i), "type": "invalid_request_error"}
            return MockResponse(400, {"error": error})
    city = messages[question]["content"].split()[-1].rstrip("?")
    if not any(m["role"] == "tool" for m in messages[question:]):
        reasoning = REASONING_1.replace("Paris", city)
        return with_reasoning(completion(None, tool_calls=weather_call(city)), reasoning)
    return with_reasoning(completion(f"{city} is overcast."), REASONING_2)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=deepseek_thinking) as srv:
        yield srv


# --- sending reasoning_content back ------------------------------------------------------------


def test_deepseek_thinking_mode_gets_its_reasoning_back_and_the_run_succeeds(
    server: ScriptedServer,
) -> None:
    weather = Recorder()
    agent = Agent(URL_MODEL, [weather.tool], base_url=server.base_url, api_key="sk-x", **fresh())
    assert agent.capabilities()[0].reasoning_echo
    result = agent.run("Weather in Paris?")

    assert result.answer == "Paris is overcast."
    assert result.protocol == "function_calling"
    assert weather.calls == ["Paris"]
    assert len(server.requests) == 2  # no 400 on the way
    sent = server.requests[1]["messages"]
    call_turn = next(m for m in sent if m["role"] == "assistant")
    assert call_turn["reasoning_content"] == REASONING_1  # verbatim, spaces and all
    assert all("reasoning_content" not in m for m in sent if m["role"] != "assistant")
    assert result.steps[0].reasoning == REASONING_1
    assert result.steps[1].reasoning == REASONING_2


def test_earlier_questions_reasoning_is_not_sent(server: ScriptedServer) -> None:
    weather = Recorder()
    agent = Agent(URL_MODEL, [weather.tool], base_url=server.base_url, api_key="sk-x", **fresh())
    conversation = agent.conversation()
    assert conversation.ask("Weather in Paris?").answer == "Paris is overcast."
    assert conversation.ask("And in Tokyo?").answer == "Tokyo is overcast."

    last = server.requests[-1]["messages"]
    assistants = [m for m in last if m["role"] == "assistant"]
    assert len(assistants) == 3  # Paris call, Paris answer, Tokyo call
    assert "reasoning_content" not in assistants[0]
    assert "reasoning_content" not in assistants[1]
    assert assistants[2]["reasoning_content"] == REASONING_1.replace("Paris", "Tokyo")


def test_a_server_that_wants_the_reasoning_back_is_learned(server: ScriptedServer) -> None:
    weather = Recorder()
    cache = CapabilityCache()
    # deepseek-chat with thinking switched on: the registry does not know it reasons.
    agent = Agent(
        "deepseek-chat",
        [weather.tool],
        base_url=server.base_url,
        api_key="sk-x",
        **fresh(capability_cache=cache, probe=False),  # only what the run learned
    )
    assert not agent.capabilities()[0].reasoning_echo
    result = agent.run("Weather in Paris?")

    assert result.answer == "Paris is overcast."
    assert weather.calls == ["Paris"]  # the tool ran once: the 400 came before the answer
    assert len(server.requests) == 3  # the call, the 400, the same request with reasoning
    assert "reasoning_content" not in server.requests[1]["messages"][2]
    assert server.requests[2]["messages"][2]["reasoning_content"] == REASONING_1
    assert any("reasoning_content back" in e for e in [n.message for n in result.notices])
    assert cache.get(agent.base_url, "deepseek-chat") == {"reasoning_echo": True}

    server.requests.clear()
    agent.run("Weather in Paris?")
    assert len(server.requests) == 2  # learned: no 400 the second time


def test_a_server_that_rejects_reasoning_content_is_learned() -> None:
    def strict(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        for i, m in enumerate(body["messages"]):
            if "reasoning_content" in m:
                message = (
                    "Additional properties are not allowed ('reasoning_content' was "
                    f"unexpected) - 'messages.{i}'"
                )
                return MockResponse(400, {"error": {"message": message, "param": None}})
        if any(m["role"] == "tool" for m in body["messages"]):
            return with_reasoning(completion("Paris is overcast."), REASONING_2)
        return with_reasoning(completion(None, tool_calls=weather_call("Paris")), REASONING_1)

    weather = Recorder()
    cache = CapabilityCache()
    with ScriptedServer(default=strict) as srv:
        agent = Agent(
            "kimi-k2-thinking",
            [weather.tool],
            base_url=srv.base_url,
            api_key="sk-x",
            **fresh(capability_cache=cache, probe=False),  # only what the run learned
        )
        assert agent.capabilities()[0].reasoning_echo
        result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."
    assert cache.get(agent.base_url, "kimi-k2-thinking") == {"reasoning_echo": False}
    assert "reasoning_content" not in srv.requests[-1]["messages"][2]


def test_models_that_do_not_want_it_never_get_reasoning_content() -> None:
    weather = Recorder()
    model = ScriptedModel(
        [
            _with(tool_call_reply(("get_weather", {"location": "Paris"})), reasoning="r1"),
            reply("Paris is overcast.", reasoning="r2"),
        ]
    )
    agent = Agent("gpt-4o", [weather.tool], client=model, **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."
    assert result.steps[0].reasoning == "r1"
    assert all("reasoning_content" not in m for p in model.payloads for m in p["messages"])


def _with(response: Any, *, reasoning: str) -> Any:
    response.reasoning = reasoning
    return response


def test_message_dict_sends_reasoning_only_when_set() -> None:
    call = ToolCall("call_1", "get_weather", '{"location": "Paris"}')
    assert "reasoning_content" not in message_dict(AssistantMessage(None, (call,)))
    assert message_dict(AssistantMessage(None, (call,), reasoning=""))["reasoning_content"] == ""
    echoed = message_dict(AssistantMessage("x", (call,), reasoning="why\ud83d"))
    assert echoed["reasoning_content"] == "why\ufffd"  # valid Unicode on the way out


def test_a_step_without_reasoning_sends_an_empty_one_in_thinking_mode() -> None:
    weather = Recorder()
    model = ScriptedModel(
        [tool_call_reply(("get_weather", {"location": "Paris"})), reply("Paris is overcast.")]
    )
    agent = Agent(URL_MODEL, [weather.tool], client=model, **fresh())
    agent.run("Weather in Paris?")
    call_turn = next(m for m in model.payloads[1]["messages"] if m["role"] == "assistant")
    assert call_turn["reasoning_content"] == ""


# --- the step, the trace and the CLI -------------------------------------------------------------


def test_the_step_keeps_the_reasoning_verbatim_and_apart() -> None:
    model = ScriptedModel([reply("Paris is overcast.", reasoning=REASONING_1)])
    agent = Agent("gpt-4o", [Recorder().tool], client=model, **fresh())
    result = agent.run("Weather in Paris?")
    step = result.steps[0]
    assert step.reasoning == REASONING_1
    assert step.thought is None
    assert result.answer == "Paris is overcast."
    record = json.loads(result.to_jsonl().splitlines()[1])
    assert record["reasoning"] == REASONING_1
    assert "Reasoning: " in format_step(step)
    assert "step 1 [function_calling] reasoning: The user wants Paris." in format_step_plain(step)


# --- sampling settings and max_tokens --------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "sent"),
    [("gpt-4o", True), ("qwen3-8b", True), ("o3-mini", False), ("gpt-5", False)],
)
def test_temperature_is_not_sent_to_models_that_reject_it(model: str, sent: bool) -> None:
    scripted = ScriptedModel(["Final Answer: 1"])
    agent = Agent(
        model, [], client=scripted, settings=ModelSettings(temperature=0.0, seed=1), **fresh()
    )
    agent.run("1?")
    assert ("temperature" in scripted.payloads[0]) is sent
    assert scripted.payloads[0]["seed"] == 1


def test_a_temperature_rejection_is_learned() -> None:
    def picky(body: dict[str, Any]) -> MockResponse | dict[str, Any]:
        if "temperature" in body:
            message = (
                "Unsupported value: 'temperature' does not support 0.0 with this model. "
                "Only the default (1) value is supported."
            )
            error = {"message": message, "param": "temperature", "code": "unsupported_value"}
            return MockResponse(400, {"error": error})
        return completion("42")

    cache = CapabilityCache()
    with ScriptedServer(default=picky) as srv:
        agent = Agent(
            "house-reasoner",
            [],
            base_url=srv.base_url,
            api_key="sk-x",
            settings=ModelSettings(temperature=0.0),
            **fresh(capability_cache=cache, probe=False),  # only what the run learned
        )
        assert agent.run("6 times 7?").answer == "42"
    assert cache.get(agent.base_url, "house-reasoner") == {"sampling": False}
    assert "temperature" not in srv.requests[-1]


@pytest.mark.parametrize("model", ["deepseek-reasoner", "o3-mini", "qwen3-8b", "gpt-4o"])
def test_no_max_tokens_is_sent_unless_asked(model: str) -> None:
    scripted = ScriptedModel(["Final Answer: 1", "Final Answer: 1"])
    agent = Agent(model, [], client=scripted, **fresh())
    agent.run("1?")
    assert "max_tokens" not in scripted.payloads[0]
    agent.run("1?", settings=ModelSettings(max_tokens=64_000))
    assert scripted.payloads[1]["max_tokens"] == 64_000


# --- think blocks never reach the action search or the answer --------------------------------------

ACTION = 'Action: get_weather\nAction Input: {"location": "Paris"}'


@pytest.mark.parametrize(
    "content",
    [
        f"<think>\nI could do:\n{ACTION}\nBut I know it already.\n</think>\n"
        "Thought: I know it.\nFinal Answer: Paris is overcast.",
        # DeepSeek-R1: the template opens the block, only the close is in the reply
        f"I could do:\n{ACTION}\n</think>\n\nThought: I know it.\nFinal Answer: Paris is overcast.",
        # a second block, after the visible thought
        f"<think>a</think>\nThought: I know it.\n<think>\n{ACTION}\n</think>\n"
        "Final Answer: Paris is overcast.",
        f"<thinking>\n{ACTION}\n</thinking>\nFinal Answer: Paris is overcast.",
    ],
)
def test_text_an_action_inside_a_think_block_never_runs(content: str) -> None:
    weather = Recorder()
    model = ScriptedModel([content])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="text", **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."
    assert weather.calls == []
    assert "get_weather" in (result.steps[0].thought or "")


@pytest.mark.parametrize(
    "content",
    [
        f"<think>\nMaybe: Final Answer: Paris is rainy.\nFinal Answer: rainy\n</think>\n"
        f"Thought: I must check.\n{ACTION}",
        f"Final Answer: Paris is rainy.\n</think>\nThought: I must check.\n{ACTION}",
    ],
)
def test_text_a_final_answer_inside_a_think_block_is_no_answer(content: str) -> None:
    weather = Recorder()
    model = ScriptedModel([content, "Thought: done\nFinal Answer: Paris is overcast."])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="text", **fresh())
    result = agent.run("Weather in Paris?")
    assert weather.calls == ["Paris"]
    assert result.answer == "Paris is overcast."


@pytest.mark.parametrize(
    "content",
    [
        f"<think>\nThought: I need the weather.\n{ACTION}",  # cut, or never closed
        f"Thought: I need the weather.\n<think>\n{ACTION}",
    ],
)
def test_text_an_unclosed_think_block_is_reasoning_to_the_end(content: str) -> None:
    weather = Recorder()
    model = ScriptedModel([content, "Thought: done\nFinal Answer: Paris is overcast."])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="text", **fresh())
    result = agent.run("Weather in Paris?")
    assert weather.calls == []
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert result.answer == "Paris is overcast."


def test_text_a_think_block_inside_the_answer_is_taken_out() -> None:
    content = "Thought: I know it.\nFinal Answer: Paris is <think>checking units</think> overcast."
    model = ScriptedModel([content])
    agent = Agent("gpt-4o", [Recorder().tool], client=model, protocol="text", **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer is not None and "think" not in result.answer
    assert "checking units" not in result.answer


CALL = json.dumps(
    {"thought": "check", "action": {"tool": "get_weather", "arguments": {"location": "Paris"}}}
)
FINAL = json.dumps({"thought": "done", "action": {"final_answer": "Paris is overcast."}})


@pytest.mark.parametrize(
    "content",
    [
        f"<think>I could send {CALL}</think>\n{FINAL}",
        f"I could send {CALL}\n</think>\n{FINAL}",  # stray close, a quoted object before it
        f"Sure.\n<think>{CALL}</think>\n{FINAL}",
        f"<think>a</think><think>{CALL}</think>{FINAL}",
    ],
)
def test_structured_a_call_inside_a_think_block_never_runs(content: str) -> None:
    weather = Recorder()
    model = ScriptedModel([content])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="structured", **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."
    assert weather.calls == []


def test_structured_an_answer_inside_a_think_block_is_no_answer() -> None:
    weather = Recorder()
    model = ScriptedModel([f"<think>I could answer {FINAL}</think>\n{CALL}", FINAL])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="structured", **fresh())
    result = agent.run("Weather in Paris?")
    assert weather.calls == ["Paris"]
    assert [s.kind for s in result.steps] == ["action", "final"]


def test_structured_an_unclosed_think_block_is_reasoning_to_the_end() -> None:
    weather = Recorder()
    model = ScriptedModel([f"<think>{CALL}", FINAL])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="structured", **fresh())
    result = agent.run("Weather in Paris?")
    assert weather.calls == []
    assert result.steps[0].kind == "format_error"
    assert "never closed" in (result.steps[0].feedback or "")
    assert result.answer == "Paris is overcast."


def test_function_calling_a_call_inside_a_think_block_never_runs() -> None:
    weather = Recorder()
    content = (
        '<think>I could write <tool_call>{"name": "get_weather", "arguments": '
        '{"location": "Paris"}}</tool_call></think>\nParis is overcast.'
    )
    agent = Agent("gpt-4o", [weather.tool], client=ScriptedModel([content]), **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."
    assert weather.calls == []


def test_function_calling_a_think_block_after_the_answer_is_not_in_it() -> None:
    content = "<think>a</think>Paris is overcast.<think>b: get_weather(location='Paris')"
    agent = Agent("gpt-4o", [Recorder().tool], client=ScriptedModel([content]), **fresh())
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is overcast."


def test_structured_a_reply_cut_while_thinking_asks_for_a_shorter_one() -> None:
    weather = Recorder()
    cut = ModelResponse(content=f"<think>{CALL}", finish_reason="length", usage=Usage())
    model = ScriptedModel([cut, FINAL])
    agent = Agent("gpt-4o", [weather.tool], client=model, protocol="structured", **fresh())
    result = agent.run("Weather in Paris?")
    assert weather.calls == []
    assert CUT_SHORT in (result.steps[0].feedback or "")
    assert result.answer == "Paris is overcast."
