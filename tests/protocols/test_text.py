"""The text ReAct protocol through the agent loop, against the scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from react_engine import (
    Agent,
    ErrorBudgetExhausted,
    Protocol,
    ScriptedModel,
    StructuredOutputProtocol,
    TemplateError,
    TextReActProtocol,
    list_templates,
    load_template,
)
from react_engine.protocols.prompts import parse_template
from react_engine.testing.tools import calculator, get_weather


def make_agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("tools", [get_weather, calculator])
    kwargs.setdefault("protocol", "text")
    return Agent("deepseek-v3", client=model, **kwargs), model


WEATHER_STEP = """Thought: I need the weather in Beijing first.
Action: get_weather
Action Input: {"location": "Beijing"}"""


def test_weather_task_in_text_mode() -> None:
    agent, model = make_agent(
        [
            WEATHER_STEP,
            'Thought: Now Guangzhou.\nAction: get_weather\nAction Input: {"location": "Guangzhou"}',
            "Thought: I now know the final answer\nFinal Answer: Beijing is sunny; Guangzhou is rainy.",
        ]
    )
    result = agent.run("What's the weather in Beijing and Guangzhou?")
    assert result.answer == "Beijing is sunny; Guangzhou is rainy."
    assert result.protocol == "text"
    assert [s.kind for s in result.steps] == ["action", "action", "final"]
    assert [a.arguments for a in result.tool_calls] == [
        {"location": "Beijing"},
        {"location": "Guangzhou"},
    ]

    first, second, third = model.payloads
    # No tools array; the tools are described in the system prompt from the same schema.
    assert "tools" not in first and "tool_choice" not in first
    assert first["stop"] == list(load_template("classic").stop)
    system = first["messages"][0]["content"]
    assert json.dumps(get_weather.parameters, ensure_ascii=False) in system
    assert first["messages"][1] == {
        "role": "user",
        "content": "Question: What's the weather in Beijing and Guangzhou?",
    }
    # Each step: the reply as an assistant message, observations as a user message.
    assert second["messages"][2] == {"role": "assistant", "content": WEATHER_STEP}
    obs = second["messages"][3]
    assert obs["role"] == "user"
    assert obs["content"].startswith("Observation: <observation>{")
    assert '"city":"Beijing"' in obs["content"]
    # Prefix stability: each prompt starts with the previous one.
    assert second["messages"][:2] == first["messages"]
    assert third["messages"][:4] == second["messages"]
    assert len(third["messages"]) == 6


def test_invented_observation_is_cut_and_not_kept() -> None:
    agent, model = make_agent(
        [
            WEATHER_STEP + "\nObservation: it is snowing\nThought: done\nFinal Answer: snow",
            "Final Answer: sunny",
        ]
    )
    result = agent.run("Weather in Beijing?")
    assert result.answer == "sunny"
    assert result.steps[0].text == WEATHER_STEP
    assert "cut_observation" in result.steps[0].repairs
    assert model.payloads[1]["messages"][2]["content"] == WEATHER_STEP
    # The model sees the real result, not the one it invented.
    assert "sunny" in model.payloads[1]["messages"][3]["content"]
    assert "snowing" not in json.dumps(model.payloads[1]["messages"])


def test_several_actions_in_one_reply_run_as_one_step() -> None:
    two = (
        'Thought: both cities.\nAction: get_weather\nAction Input: {"location": "Paris"}\n'
        'Thought: and London.\nAction: get_weather\nAction Input: {"location": "London"}'
    )
    agent, model = make_agent([two, "Final Answer: overcast and drizzle"])
    result = agent.run("Paris and London?")
    assert [a.arguments["location"] for a in result.steps[0].actions] == ["Paris", "London"]  # type: ignore[index]
    obs = model.payloads[1]["messages"][3]["content"]
    assert obs.startswith("Observation 1 (get_weather): <observation>")
    assert "\nObservation 2 (get_weather): <observation>" in obs

    agent, model = make_agent([two, "Final Answer: overcast"], multi_action="first")
    result = agent.run("Paris and London?")
    first, second = result.steps[0].actions
    assert first.status == "ok" and second.status == "skipped"
    assert "one call runs per reply" in second.observation
    assert "one call runs per reply" in model.payloads[1]["messages"][3]["content"]


def test_tolerated_deviations_run_and_are_reported() -> None:
    agent, _ = make_agent(
        [
            "**Thought**：查一下北京\n**Action**： get_weather\n**Action Input**： {'location': '北京',}",
            "Final Answer: 晴",
        ]
    )
    result = agent.run("北京天气？")
    assert result.answer == "晴"
    action = result.steps[0].actions[0]
    assert action.status == "ok" and action.arguments == {"location": "北京"}
    assert result.steps[0].repairs  # bold labels, full-width colons, JSON repairs


def test_format_errors_go_back_to_the_model_with_the_expected_format() -> None:
    agent, model = make_agent(["Action:", "Final Answer: 42"])
    result = agent.run("q")
    assert result.answer == "42"
    assert result.steps[0].kind == "format_error"
    feedback = model.payloads[1]["messages"][-1]["content"]
    assert feedback.startswith("Observation: Your reply could not be used:")
    assert "Action Input: <JSON object>" in feedback


def test_a_reply_with_no_label_is_a_format_error_by_default() -> None:
    # SmolLM2 answered "28°C" from its own weights without calling get_weather; that
    # reply is sent back as a format error instead of being taken for the answer.
    invented = "The weather in Paris is sunny, 28°C."
    agent, model = make_agent([invented, WEATHER_STEP, "Final Answer: sunny, 24°C"])
    result = agent.run("What is the weather in Paris?")
    assert [s.kind for s in result.steps] == ["format_error", "action", "final"]
    assert result.answer == "sunny, 24°C"
    assert result.steps[0].text == invented
    assert "implicit_final_answer" not in result.steps[0].repairs
    feedback = model.payloads[1]["messages"][-1]["content"]
    assert feedback.startswith("Observation: Your reply could not be used: the reply has no label")
    assert "Final Answer: <the answer>" in feedback
    assert repr(TextReActProtocol()) == "TextReActProtocol(template='classic')"


def test_implicit_final_answer_can_be_enabled() -> None:
    reply = "<think>Easy.</think>\nParis is the capital of France."
    # on the protocol
    proto = TextReActProtocol(implicit_final_answer=True)
    assert repr(proto) == "TextReActProtocol(template='classic', implicit_final_answer=True)"
    agent, _ = make_agent([reply], protocol=proto)
    result = agent.run("Capital of France?")
    assert result.answer == "Paris is the capital of France."
    assert result.steps[0].thought == "Easy."
    assert result.steps[0].repairs == ["think_block", "implicit_final_answer"]
    # on the agent, for the text protocol it chooses (explicitly, by the registry or as a
    # run-time fallback)
    from react_engine import CapabilityRegistry

    registry = CapabilityRegistry.from_default(env={})
    registry.register("deepseek-v3", function_calling=False)
    for protocol in ("text", "auto"):
        agent, _ = make_agent(
            [reply], protocol=protocol, registry=registry, implicit_final_answer=True
        )
        chosen, _, _ = agent.choose_protocol()
        assert isinstance(chosen, TextReActProtocol) and chosen.implicit_final_answer
        assert agent.run("Capital of France?").answer == "Paris is the capital of France."


def test_format_retry_budget_is_separate_and_bounded() -> None:
    agent, _ = make_agent(["Action:"] * 5, max_consecutive_errors=2)
    with pytest.raises(ErrorBudgetExhausted) as info:
        agent.run("q")
    assert [s.kind for s in info.value.result.steps] == ["format_error"] * 3


def test_unparseable_json_input_becomes_an_argument_error() -> None:
    agent, model = make_agent(
        ['Thought: x\nAction: get_weather\nAction Input: {"location": ', "Final Answer: ?"]
    )
    result = agent.run("q")
    action = result.steps[0].actions[0]
    assert action.status == "invalid_arguments"
    assert "not valid JSON" in action.observation
    assert model.payloads[1]["messages"][3]["content"].startswith(
        "Observation: <observation>Error:"
    )


def test_plain_string_input_for_a_single_argument_tool() -> None:
    agent, _ = make_agent(["Thought: compute\nAction: calculator[6*7]", "Final Answer: 42"])
    result = agent.run("6*7?")
    assert result.steps[0].actions[0].observation == "42"
    assert result.answer == "42"


def test_finish_bracket_is_a_final_answer() -> None:
    agent, _ = make_agent(["Thought: easy\nAction: Finish[Paris]"])
    assert agent.run("Capital of France?").answer == "Paris"


def test_tool_choice_emulation() -> None:
    # "none": told to answer directly; an action is a format error.
    agent, model = make_agent([WEATHER_STEP, "Final Answer: no tools"])
    result = agent.run("q", tool_choice="none")
    assert "answer with Final Answer directly" in model.payloads[0]["messages"][0]["content"]
    assert result.steps[0].kind == "format_error"
    assert result.answer == "no tools"

    # a named tool: any other action is a format error.
    agent, model = make_agent(
        ['Action: calculator\nAction Input: {"expression": "1"}', WEATHER_STEP, "Final Answer: ok"]
    )
    result = agent.run("q", tool_choice="get_weather", max_steps=1)
    assert "Your next Action must be get_weather." in model.payloads[0]["messages"][0]["content"]
    assert result.steps[0].kind == "format_error"
    assert result.steps[1].actions[0].tool == "get_weather"

    # "required": a bare answer is a format error.
    agent, _ = make_agent(["Final Answer: guess", WEATHER_STEP, "Final Answer: sunny"])
    result = agent.run("q", tool_choice="required", max_steps=1)
    assert result.steps[0].kind == "format_error"
    assert result.answer == "sunny"


def test_forced_final_answer_in_text() -> None:
    agent, model = make_agent(
        [WEATHER_STEP, WEATHER_STEP.replace("Beijing", "Paris"), "Final Answer: done"], max_steps=2
    )
    result = agent.run("q")
    assert result.stop_reason == "max_steps"
    assert result.answer == "done"
    last = model.payloads[-1]["messages"][-1]["content"]
    assert "Do not use any more tools" in last


def test_no_stop_when_the_model_does_not_support_it() -> None:
    from react_engine import CapabilityRegistry

    registry = CapabilityRegistry.from_default(env={})
    registry.register("nostop-*", function_calling=False, stop=False)
    model = ScriptedModel([WEATHER_STEP + "\nObservation: fake", "Final Answer: x"])
    agent = Agent("nostop-1", [get_weather], client=model, registry=registry)
    result = agent.run("q")
    assert "stop" not in model.payloads[0]
    assert result.protocol == "text"
    assert result.steps[0].text == WEATHER_STEP  # cut client-side


@pytest.mark.parametrize("name", list_templates())
def test_every_shipped_template_renders(name: str) -> None:
    template = load_template(name)
    if template.kind == "function_calling":
        assert template.fill("system", instructions="Be brief.").startswith("Be brief.")
        return
    proto: Protocol
    if template.kind == "structured":
        proto = StructuredOutputProtocol(template=template)
        model = ScriptedModel(['{"thought": "t", "action": {"final_answer": "ok"}}'])
    else:
        proto = TextReActProtocol(template=template)
        model = ScriptedModel(["Final Answer: ok"])
    agent = Agent("m", [get_weather], client=model, protocol=proto)
    agent.run("q?")
    system = model.payloads[0]["messages"][0]["content"]
    assert "get_weather" in system and "{" in system and "{tools}" not in system
    values: dict[str, Any] = {
        "instructions": "",
        "tools": "T",
        "tool_names": "a",
        "question": "q",
        "observation": "o",
        "index": 1,
        "tool": "t",
        "error": "e",
        "reminder": "r",
        "thought": "th",
        "input": "{}",
        "answer": "a",
        "schema": "S",
        "type_name": "N",
        "line": 1,
        "column": 2,
        "wrong": "w",
        "detail": "d",
        "retry": "again",
    }
    for key in template.texts:
        filled = template.fill(key, **values)
        assert not any("{" + name + "}" in filled for name in values), key


def test_templates_are_filled_strictly() -> None:
    with pytest.raises(TemplateError, match="unknown placeholder"):
        parse_template(
            {
                "system": "{tools} {tool_names} {oops}",
                "question": "{question}",
                "observation": "{observation}",
                "format_error": "{error}",
            },
            name="bad",
        )
    with pytest.raises(TemplateError, match="must use tools"):
        parse_template(
            {
                "system": "{tool_names}",
                "question": "{question}",
                "observation": "{observation}",
                "format_error": "{error}",
            },
            name="bad",
        )
    with pytest.raises(TemplateError, match="lacks"):
        parse_template({"system": "{tools} {tool_names}"}, name="bad")
    template = load_template("classic")
    with pytest.raises(TemplateError, match="needs a value for question"):
        template.fill("question")
    with pytest.raises(TemplateError, match="no template"):
        load_template("nonexistent")


def test_a_label_nothing_reads_is_an_error() -> None:
    texts = {
        "system": "{tools} {tool_names}",
        "question": "{question}",
        "observation": "{observation}",
        "format_error": "{error}",
    }
    with pytest.raises(TemplateError, match="unknown labels observation"):
        parse_template({**texts, "labels": {"observation": "Obs"}}, name="bad")
    labels = {"thought": "T", "final_thought": "done", "colon": ": ", "action_format": "lines"}
    assert parse_template({**texts, "labels": labels}, name="ok").labels["thought"] == "T"


def test_user_template_from_a_file(tmp_path: Any) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'kind = "text"\nstop = ["Obs:"]\n'
        'system = "Tools:\\n{tools}\\nNames: {tool_names}"\n'
        'question = "Q: {question}"\nobservation = "Obs: {observation}"\n'
        'format_error = "Obs: bad: {error}"\n',
        encoding="utf-8",
    )
    model = ScriptedModel(["Final Answer: fine"])
    agent = Agent("m", [get_weather], client=model, protocol="text", template=str(path))
    assert agent.run("hi").answer == "fine"
    assert model.payloads[0]["messages"][1]["content"] == "Q: hi"
    assert model.payloads[0]["stop"] == ["Obs:"]


def test_chinese_template() -> None:
    model = ScriptedModel(
        [
            '思考：需要查询北京天气\n行动：get_weather\n行动输入：{"location": "北京"}',
            "思考：我已经知道最终答案了\n最终答案：北京晴，24度。",
        ]
    )
    agent = Agent("qwen-max", [get_weather], client=model, protocol="text", template="zh")
    result = agent.run("北京天气怎么样？")
    assert result.answer == "北京晴，24度。"
    assert model.payloads[0]["messages"][1]["content"] == "问题：北京天气怎么样？"
    # The labels and colons the zh template asks for are its style, not repairs.
    assert result.steps[0].repairs == []
    assert result.steps[1].repairs == []
    assert model.payloads[1]["messages"][3]["content"].startswith("观察：<observation>")
    assert "观察：" in model.payloads[0]["stop"][0]


def test_json_blob_template() -> None:
    model = ScriptedModel(
        [
            'Thought: weather\nAction:\n```json\n{"action": "get_weather", "action_input": {"location": "Tokyo"}}\n```',
            'Thought: done\nAction:\n```json\n{"action": "Final Answer", "action_input": "Partly cloudy."}\n```',
        ]
    )
    agent = Agent("deepseek-v3", [get_weather], client=model, protocol="text", template="json")
    result = agent.run("Tokyo?")
    assert result.tool_calls[0].arguments == {"location": "Tokyo"}
    assert result.answer == "Partly cloudy."
