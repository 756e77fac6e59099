"""The structured-output protocol through the agent loop, against the scripted model: one
JSON object per reply, read tolerantly, with ``tool_choice`` and the forced final answer
enforced, and histories written under another protocol rendered as its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ConfigurationError,
    ModelResponse,
    ScriptedModel,
    StructuredOutputProtocol,
    TemplateError,
    load_template,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.cli import main
from react_engine.protocols.base import RequestContext
from react_engine.protocols.decision import CallTools, FinalAnswer, FormatError
from react_engine.protocols.policy import CUT_OFF, decide
from react_engine.protocols.structured import step_json
from react_engine.testing.tools import calculator, get_weather
from react_engine.types import Usage


def step(tool_name: str, arguments: dict[str, Any], thought: str = "I will look.") -> str:
    return json.dumps({"thought": thought, "action": {"tool": tool_name, "arguments": arguments}})


def final(answer: str, thought: str = "I now know the final answer") -> str:
    return json.dumps({"thought": thought, "action": {"final_answer": answer}})


def make_agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("tools", [get_weather, calculator])
    kwargs.setdefault("protocol", "structured")
    kwargs.setdefault("capability_cache", CapabilityCache())
    kwargs.setdefault("registry", CapabilityRegistry.from_default(env={}))
    return Agent("house-model", client=model, **kwargs), model


def ctx(**kwargs: Any) -> RequestContext:
    agent, _ = make_agent([])
    kwargs.setdefault("tool_choice", "auto")
    return RequestContext(
        model="m",
        history=[],
        tools=agent.tools,
        capabilities=agent.capabilities()[0],
        **kwargs,
    )


def parse(content: str | None, finish_reason: str = "stop", **kwargs: Any) -> Any:
    return decide(
        StructuredOutputProtocol(),
        ModelResponse(content=content, finish_reason=finish_reason, usage=Usage()),
        ctx(**kwargs),
    )


# --- selection ---------------------------------------------------------------------------------


def test_selected_by_name_and_never_by_auto() -> None:
    agent, _ = make_agent([])
    chosen, why, _ = agent.choose_protocol()
    assert isinstance(chosen, StructuredOutputProtocol) and why == "explicit"
    # "auto" keeps its rule: function calling where the model has it, else text, even on
    # a server that constrains decoding.
    registry = CapabilityRegistry.from_default(env={})
    registry.register("fc-*", constrained_decoding=True, constraint_style="json_schema")
    registry.register(
        "nofc-*", function_calling=False, constrained_decoding=True, constraint_style="json_schema"
    )
    for model, expected in (("fc-1", "function_calling"), ("nofc-1", "text")):
        auto, _ = make_agent([], protocol="auto", registry=registry)
        auto.model = model
        assert auto.choose_protocol()[0].name == expected


def test_an_unknown_protocol_name_lists_structured() -> None:
    with pytest.raises(ConfigurationError, match="'structured'"):
        make_agent([], protocol="json")


def test_the_template_must_be_a_structured_one() -> None:
    with pytest.raises(ValueError, match="not a structured template"):
        StructuredOutputProtocol(template="classic")
    with pytest.raises(TemplateError, match="unknown key"):
        from react_engine.protocols.prompts import parse_template

        parse_template(
            {
                "kind": "structured",
                "system": "{tools}",
                "observation": "{observation}",
                "format_error": "{error}",
                "action_example": "x",
            },
            name="bad",
        )


# --- end to end ----------------------------------------------------------------------------------


def test_call_then_observation_then_final_answer() -> None:
    agent, model = make_agent(
        [
            step("get_weather", {"location": "Beijing"}, "I need the weather in Beijing."),
            final("Beijing is sunny, 24°C."),
        ]
    )
    result = agent.run("What's the weather in Beijing?")
    assert result.answer == "Beijing is sunny, 24°C."
    assert result.protocol == "structured" and result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert result.steps[0].thought == "I need the weather in Beijing."
    assert result.steps[0].repairs == []
    (call,) = result.tool_calls
    assert (call.tool, call.arguments, call.status) == (
        "get_weather",
        {"location": "Beijing"},
        "ok",
    )

    first, second = model.payloads
    assert "tools" not in first and "stop" not in first and "response_format" not in first
    system = first["messages"][0]["content"]
    assert json.dumps(get_weather.parameters, ensure_ascii=False) in system
    assert '"final_answer"' in system and "get_weather, calculator" in system
    assert first["messages"][1] == {"role": "user", "content": "What's the weather in Beijing?"}
    # The step as the model wrote it, then the observation, wrapped.
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": result.steps[0].text}
    observation = second["messages"][3]
    assert observation["role"] == "user"
    assert observation["content"].startswith("Observation: <observation>{")
    assert observation["content"].endswith("</observation>")
    assert '"sunny"' in observation["content"]
    assert len(second["messages"]) == 4


def test_malformed_json_is_a_format_error_then_the_run_recovers() -> None:
    agent, model = make_agent(
        [
            "Let me check the weather for you.",
            '{"thought": "oops", "act": {"tool": "get_weather"}}',
            step("get_weather", {"location": "Paris"}),
            final("Paris is cloudy."),
        ]
    )
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is cloudy."
    assert [s.kind for s in result.steps] == ["format_error", "format_error", "action", "final"]
    no_json, no_action = result.steps[0], result.steps[1]
    assert no_json.feedback is not None and "not a JSON object" in no_json.feedback
    assert '"final_answer"' in no_json.feedback  # the reminder shows both shapes
    assert no_action.feedback is not None and 'no "action"' in no_action.feedback
    # The bad reply and the feedback are in the next request.
    messages = model.payloads[1]["messages"]
    assert messages[-2] == {"role": "assistant", "content": "Let me check the weather for you."}
    assert messages[-1] == {"role": "user", "content": no_json.feedback}


def test_replies_are_read_tolerantly() -> None:
    agent, _ = make_agent(
        [
            # single quotes, a code fence, prose around it
            "Sure!\n```json\n{'thought': 'weather', 'action': {'tool': 'get_weather', "
            "'arguments': {'location': 'Paris'}}}\n```",
            # a flat call with its arguments as a JSON string
            '{"tool": "get_weather", "arguments": "{\\"location\\": \\"Tokyo\\"}"}',
            # a LangChain-style blob
            '{"action": "calculator", "action_input": {"expression": "2+2"}}',
            # a think block, then a flat final answer
            '<think>All done.</think>{"final_answer": "Paris cloudy, Tokyo rainy, 4."}',
        ]
    )
    result = agent.run("q")
    assert result.answer == "Paris cloudy, Tokyo rainy, 4."
    assert [a.arguments for a in result.tool_calls] == [
        {"location": "Paris"},
        {"location": "Tokyo"},
        {"expression": "2+2"},
    ]
    assert all(a.status == "ok" for a in result.tool_calls)
    repairs = [s.repairs for s in result.steps]
    assert "json:single_quotes" in repairs[0]
    assert {"flat_step", "arguments_as_string"} <= set(repairs[1])
    assert "action_blob" in repairs[2]
    assert {"think_block", "flat_step"} <= set(repairs[3])
    assert result.steps[3].thought == "All done."


def test_unknown_tools_pass_through_to_the_loop() -> None:
    agent, _ = make_agent([step("search", {"q": "x"}), final("I cannot search.")])
    result = agent.run("q")
    (call,) = result.tool_calls
    assert call.status == "unknown_tool"
    assert "Valid tools: calculator, get_weather" in call.observation


def test_invalid_arguments_become_an_observation() -> None:
    agent, _ = make_agent(
        [
            '{"thought": "t", "action": {"tool": "get_weather", "arguments": [1, 2]}}',
            step("get_weather", {"city": "Paris"}),
            final("done"),
        ]
    )
    result = agent.run("q")
    first, second = result.tool_calls
    assert first.status == "invalid_arguments" and "must be a JSON object" in first.observation
    assert second.status == "invalid_arguments" and "location" in second.observation


def test_a_reply_cut_by_the_length_limit_never_runs_its_call() -> None:
    calls: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        calls.append(city)
        return "found"

    cut = ModelResponse(
        content='{"thought": "t", "action": {"tool": "lookup", "arguments": {"city": "Par',
        finish_reason="length",
        usage=Usage(requests=1),
    )
    complete_but_long = ModelResponse(
        content=step("lookup", {"city": "Paris"}) + "\nI could go on",
        finish_reason="length",
        usage=Usage(requests=1),
    )
    agent, _ = make_agent([cut, complete_but_long, final("found")], tools=[lookup])
    result = agent.run("q")
    first, second = result.tool_calls
    assert first.status == "invalid_arguments" and first.error == CUT_OFF
    assert second.status == "ok"
    assert calls == ["Paris"]  # only the complete call ran

    decision = parse('{"thought": "I will call the too', finish_reason="length")
    assert isinstance(decision, FormatError)
    assert "cut off by the length limit" in decision.feedback


def test_forced_final_answer() -> None:
    agent, model = make_agent(
        [
            step("get_weather", {"location": "Paris"}),
            final("Paris is cloudy."),
        ],
        max_steps=1,
    )
    result = agent.run("q")
    assert result.stop_reason == "max_steps" and result.answer == "Paris is cloudy."
    forced = model.payloads[1]["messages"][-1]
    assert forced["role"] == "user"
    assert forced["content"] == load_template("structured").fill("force_final")


def test_a_refused_forced_reply_is_not_reminded_of_tools() -> None:
    # The forced request says what to write; its refusal must not offer a tool call again.
    agent, _ = make_agent(
        [
            step("get_weather", {"location": "Paris"}),
            final("<your answer>"),
            final("Paris is cloudy."),
        ],
        max_steps=1,
    )
    result = agent.run("q")
    assert result.answer == "Paris is cloudy."
    refused = result.steps[1]
    assert refused.kind == "format_error"
    assert "is the placeholder from the instructions" in (refused.feedback or "")
    assert '"tool"' not in (refused.feedback or "")
    # Outside a forced request the same refusal does show both shapes.
    agent, _ = make_agent([final("<your answer>"), final("Paris is cloudy.")])
    assert '"tool"' in (agent.run("q").steps[0].feedback or "")


def test_a_call_under_the_forced_final_is_not_run() -> None:
    agent, _ = make_agent(
        [
            step("get_weather", {"location": "Paris"}),
            step("get_weather", {"location": "Rome"}),
            final("Paris is cloudy."),
        ],
        max_steps=1,
    )
    result = agent.run("q")
    assert [a.arguments for a in result.tool_calls] == [{"location": "Paris"}]
    assert result.steps[1].kind == "format_error"
    assert "no tool can run now" in (result.steps[1].feedback or "")
    assert result.stop_reason == "max_steps"


def test_tool_choice_required() -> None:
    agent, model = make_agent(
        [final("no tool needed"), step("calculator", {"expression": "1+1"}), final("2")],
        max_steps=1,
    )
    result = agent.run("1+1?", tool_choice="required")
    assert [s.kind for s in result.steps] == ["format_error", "action", "final"]
    assert "a tool must be used" in (result.steps[0].feedback or "")
    assert "You must use a tool" in model.payloads[0]["messages"][0]["content"]
    assert result.answer == "2"


def test_tool_choice_named() -> None:
    agent, model = make_agent(
        [
            step("get_weather", {"location": "Paris"}),
            step("calculator", {"expression": "1+1"}),
            final("2"),
        ],
        max_steps=1,
    )
    result = agent.run("1+1?", tool_choice="calculator")
    assert [s.kind for s in result.steps] == ["format_error", "action", "final"]
    assert "only calculator may be called now, not get_weather" in (result.steps[0].feedback or "")
    assert "must use the tool calculator" in model.payloads[0]["messages"][0]["content"]
    assert [a.tool for a in result.tool_calls] == ["calculator"]


def test_tool_choice_none() -> None:
    agent, _ = make_agent([step("calculator", {"expression": "1+1"}), final("2")])
    result = agent.run("1+1?", tool_choice="none")
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert "no tool may be used" in (result.steps[0].feedback or "")
    assert not result.tool_calls and result.answer == "2"


@pytest.mark.parametrize(
    "content",
    [
        None,
        "",
        "   ",
        "null",
        "42",
        "[]",
        "[1, 2]",
        '"just a string"',
        "{}",
        '{"action": 5}',
        '{"action": {}}',
        '{"action": {"tool": 5}}',
        '{"action": {"tool": ""}}',
        '{"action": {"tool": "get_weather", "final_answer": "both"}}',
        '{"action": {"final_answer": ""}}',
        '{"action": {"final_answer": null}}',
        '{"thought": ["a"], "action": {"final_answer": {"x": 1}}}',
        '{"action": {"tool": "get_weather", "arguments": null}}',
        '{"action": {"tool": "get_weather", "arguments": "Paris"}}',
        '{"action": {"tool": "get_weather", "arguments": "{broken"}}',
        "<think>unclosed",
        "</think>",
        "{" * 5000,
        '{"a": "\ud800"}',
    ],
)
def test_decide_never_raises(content: str | None) -> None:
    decision = parse(content)
    assert isinstance(decision, CallTools | FinalAnswer | FormatError), decision
    if isinstance(decision, CallTools):
        assert decision.calls
    if isinstance(decision, FormatError):
        assert decision.feedback


def test_both_shapes_at_once_is_a_format_error() -> None:
    decision = parse('{"action": {"tool": "get_weather", "final_answer": "both"}}')
    assert isinstance(decision, FormatError) and "only one of them" in decision.feedback


def test_reasoning_content_stays_out_of_the_thought_and_answer() -> None:
    response = reply(final("x", thought="Short."), reasoning="Long reasoning.")
    decision = decide(StructuredOutputProtocol(), response, ctx())
    assert decision.thought == "Short."
    assert isinstance(decision, FinalAnswer) and decision.answer == "x"


# --- histories from another protocol ------------------------------------------------------------


def test_taking_over_a_conversation_from_function_calling() -> None:
    fc_model = ScriptedModel(
        [
            tool_call_reply(
                ("get_weather", {"location": "Beijing"}),
                ("get_weather", {"location": "Guangzhou"}),
                content="Both cities.",
            ),
            reply("Beijing sunny, Guangzhou rainy."),
        ]
    )
    fc_agent = Agent(
        "house-model",
        [get_weather],
        client=fc_model,
        protocol="function_calling",
        capability_cache=CapabilityCache(),
    )
    conversation = fc_agent.conversation()
    conversation.ask("Weather in Beijing and Guangzhou?")

    model = ScriptedModel([final("Beijing.")])
    conversation.agent = Agent(
        "house-model",
        [get_weather],
        client=model,
        protocol="structured",
        capability_cache=CapabilityCache(),
    )
    assert conversation.ask("Which is sunnier?").answer == "Beijing."
    messages = model.payloads[0]["messages"]
    roles = [m["role"] for m in messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # One canonical JSON object per parallel call, each followed by its observation.
    one, two = json.loads(messages[2]["content"]), json.loads(messages[4]["content"])
    assert one == {
        "thought": "Both cities.",
        "action": {"tool": "get_weather", "arguments": {"location": "Beijing"}},
    }
    assert two["action"] == {"tool": "get_weather", "arguments": {"location": "Guangzhou"}}
    assert "Beijing" in messages[3]["content"] and "<observation>" in messages[3]["content"]
    assert "Guangzhou" in messages[5]["content"]
    assert json.loads(messages[6]["content"]) == {
        "thought": "I now know the final answer",
        "action": {"final_answer": "Beijing sunny, Guangzhou rainy."},
    }
    assert messages[7] == {"role": "user", "content": "Which is sunnier?"}


def test_a_text_step_with_plain_input_is_rendered_as_an_object() -> None:
    text_model = ScriptedModel(
        ["Thought: look\nAction: get_weather\nAction Input: Paris", "Final Answer: cloudy"]
    )
    agent = Agent(
        "house-model",
        [get_weather],
        client=text_model,
        protocol="text",
        capability_cache=CapabilityCache(),
    )
    conversation = agent.conversation()
    conversation.ask("Weather in Paris?")
    model = ScriptedModel([final("ok")])
    conversation.agent = Agent(
        "house-model",
        [get_weather],
        client=model,
        protocol="structured",
        capability_cache=CapabilityCache(),
    )
    conversation.ask("Sure?")
    # The plain-text input is the value of get_weather's one required parameter (a bare
    # input read losslessly), and the step is rendered with it as a JSON object.
    said = json.loads(model.payloads[0]["messages"][2]["content"])
    assert said == {
        "thought": "look",
        "action": {"tool": "get_weather", "arguments": {"location": "Paris"}},
    }


def test_step_json_is_the_canonical_form() -> None:
    assert json.loads(step_json("t", tool="a", arguments={"x": 1})) == {
        "thought": "t",
        "action": {"tool": "a", "arguments": {"x": 1}},
    }
    assert json.loads(step_json(None, final_answer="é")) == {
        "thought": "",
        "action": {"final_answer": "é"},
    }


# --- the command line ------------------------------------------------------------------------------


def test_cli_dry_run_under_the_structured_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["run", "Weather in Beijing and Guangzhou?", "--dry-run", "--protocol", "structured"]
    )
    assert code == 0
    captured = capsys.readouterr()
    out = captured.err
    assert captured.out == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"
    assert "protocol structured (explicit)" in out
    assert 'step 2 [structured] action: get_weather {"location": "Guangzhou"}' in out


@pytest.mark.parametrize("answer", ["<your answer>", " <the final answer> ", "...", "…"])
def test_a_placeholder_copied_from_the_prompt_is_not_an_answer(answer: str) -> None:
    decision = parse(final(answer))
    assert isinstance(decision, FormatError) and "placeholder" in decision.feedback


@pytest.mark.parametrize("answer", ["<html>", "<b>", "See the answer above...", "Yes..."])
def test_answers_that_only_look_like_placeholders_are_kept(answer: str) -> None:
    decision = parse(final(answer))
    assert isinstance(decision, FinalAnswer) and decision.answer == answer


@pytest.mark.parametrize("depth", [150, 1200])
def test_deep_arguments_are_said_to_be_deep_not_a_reply_that_is_no_object(depth: int) -> None:
    # 1,200 levels were reported as "the reply is not a JSON object".
    deep = "[" * depth + '"Paris"' + "]" * depth
    call = '{"thought": "t", "action": {"tool": "get_weather", "arguments": {"location": ' + deep
    final = json.dumps({"thought": "t", "action": {"final_answer": "Sunny."}})
    model = ScriptedModel([call + "}}}", final])
    result = Agent("m", [get_weather], client=model, protocol="structured").run("q")
    first = result.steps[0]
    said = first.feedback if first.kind == "format_error" else first.actions[0].observation
    assert said is not None and "nested deeper than 100 levels" in said
    assert "not a JSON object" not in said
    assert all(a.status != "ok" for a in first.actions)
    assert result.answer == "Sunny."


@pytest.mark.parametrize(
    "step",
    [
        # one closing bracket too early: "unit" lands beside the arguments
        '{"thought": "t", "action": {"tool": "get_weather", "arguments": {"location": "Paris"}, '
        '"unit": "fahrenheit"}}',
        # two too early: "unit" lands beside the action
        '{"thought": "t", "action": {"tool": "get_weather", "arguments": {"location": "Paris"}}, '
        '"unit": "fahrenheit"}',
    ],
)
def test_a_key_beside_the_arguments_is_refused_not_dropped(step: str) -> None:
    # Found by the lossless property test: the tool ran on part of what the model wrote.
    final = json.dumps({"thought": "t", "action": {"final_answer": "Sunny."}})
    model = ScriptedModel([step, final])
    result = Agent("m", [get_weather], client=model, protocol="structured").run("q")
    first = result.steps[0]
    assert first.kind == "format_error" and not first.actions
    assert '"unit"' in (first.feedback or "")
    assert result.answer == "Sunny."
