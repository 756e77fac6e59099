"""The forced final answer (step budget spent, loop detected) under both protocols.

A reply to the forced final request that is a tool call written as text is not an answer:
it is a format error, the model gets one more forced request with feedback, and if that
reply is no answer either the run ends without one and says why.
"""

from __future__ import annotations

from typing import Any

import pytest

from react_engine import Agent, ScriptedModel, TextReActProtocol, reply, tool_call_reply
from react_engine.parsing.salvage import written_call
from react_engine.protocols.policy import WRITTEN_CALL
from react_engine.testing.tools import calculator, get_weather

WRITTEN = {
    "python": 'get_weather(location="Paris")',
    "json": '{"name": "get_weather", "arguments": {"location": "Paris"}}',
    "react": 'Action: get_weather\nAction Input: {"location": "Paris"}',
    "hermes": '<tool_call>{"name": "get_weather", "arguments": {"location": "Paris"}}</tool_call>',
    "llama_cpp": 'functions.get_weather:\n{"location": "Paris"}',
    "fenced_python": 'Let me check again.\n```python\nget_weather(location="Paris")\n```',
}
BUDGET_ERROR = (
    "the model did not give a final answer in words after the step budget: "
    "its last reply was a tool call written as text"
)
TEXT_STEP = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'


def fc_agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    agent = Agent(
        "gpt-4o-mini",
        [get_weather, calculator],
        client=model,
        protocol="function_calling",
        **kwargs,
    )
    return agent, model


def text_agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("protocol", "text")
    agent = Agent("deepseek-v3", [get_weather, calculator], client=model, **kwargs)
    return agent, model


@pytest.mark.parametrize("form", list(WRITTEN))
def test_the_shared_detector_reads_every_form(form: str) -> None:
    names = ["get_weather", "calculator"]
    assert written_call(WRITTEN[form], names)
    assert not written_call(WRITTEN[form], ["other_tool"])
    for answer in (
        "Paris is sunny, 24°C.",
        "I called get_weather(location='Paris') and it said sunny.",  # prose, not a call
        'The tool returned {"city": "Paris", "condition": "sunny"}.',
        "Thought: I know it now.\nFinal Answer: sunny",
        # SmolLM2 reporting the result in llama.cpp's notation: the data, not a call
        'functions.get_weather returned: {"city": "Paris", "condition": "overcast"}',
        "functions.get_weather_v2: {}",  # another name
    ):
        assert not written_call(answer, names)


# --- function calling --------------------------------------------------------------------------


@pytest.mark.parametrize("form", list(WRITTEN))
def test_function_calling_gets_one_more_forced_request(form: str) -> None:
    agent, model = fc_agent(
        [
            tool_call_reply(("get_weather", {"location": "Paris"})),
            reply(WRITTEN[form]),
            reply("Paris is sunny, 24°C."),
        ],
        max_steps=1,
    )
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is sunny, 24°C."
    assert result.stop_reason == "max_steps"
    assert result.error is None
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]
    assert result.steps[1].text == WRITTEN[form]
    assert result.steps[1].actions == []  # nothing ran
    assert result.tool_calls == result.steps[0].actions
    retry = model.payloads[-1]
    assert retry["tool_choice"] == "none"
    said, feedback, force = retry["messages"][-3:]
    assert said == {"role": "assistant", "content": WRITTEN[form]}
    assert feedback == {"role": "user", "content": f"Your reply could not be used: {WRITTEN_CALL}."}
    assert force["role"] == "user" and "Stop calling tools now" in force["content"]


def test_function_calling_ends_with_a_clear_error_after_the_second_written_call() -> None:
    agent, model = fc_agent(
        [
            tool_call_reply(("get_weather", {"location": "Paris"})),
            reply(WRITTEN["python"]),
            reply(WRITTEN["json"]),
            reply("never asked for"),
        ],
        max_steps=1,
    )
    result = agent.run("Weather in Paris?")
    assert (result.answer, result.stop_reason, result.error) == (None, "max_steps", BUDGET_ERROR)
    assert [s.kind for s in result.steps] == ["action", "format_error", "format_error"]
    assert len(model.payloads) == 3  # one forced request, then exactly one more
    assert model.remaining == 1


def test_after_a_loop_the_error_says_so() -> None:
    same = tool_call_reply(("calculator", {"expression": "2+2"}))
    agent, model = fc_agent(
        [same, same, same, same, reply(WRITTEN["python"]), reply(WRITTEN["react"])],
        loop_limit=3,
    )
    result = agent.run("q")
    assert (result.answer, result.stop_reason) == (None, "loop")
    assert result.error == (
        "the model did not give a final answer in words after a loop was detected: "
        "its last reply was a tool call written as text"
    )
    assert [p["tool_choice"] for p in model.payloads[-2:]] == ["none", "none"]


def test_an_empty_forced_reply_also_gets_one_more_request() -> None:
    agent, _ = fc_agent(
        [tool_call_reply(("get_weather", {"location": "Paris"})), reply(None), reply(None)],
        max_steps=1,
    )
    result = agent.run("q")
    assert (result.answer, result.stop_reason) == (None, "max_steps")
    assert result.error == (
        "the model did not give a final answer in words after the step budget: "
        "its last reply was empty"
    )
    agent, _ = fc_agent(
        [tool_call_reply(("get_weather", {"location": "Paris"})), reply(""), reply("sunny")],
        max_steps=1,
    )
    assert agent.run("q").answer == "sunny"


# --- text ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        WRITTEN["react"],
        WRITTEN["json"],
        WRITTEN["hermes"],
        WRITTEN["python"],  # no label: not even read as an action
        "Thought: I will check.\nFinal Answer: " + WRITTEN["python"],
        '{"action": "get_weather", "action_input": {"location": "Paris"}}',
    ],
)
def test_text_gets_one_more_forced_request(written: str) -> None:
    agent, model = text_agent([TEXT_STEP, written, "Final Answer: sunny, 24°C"], max_steps=1)
    result = agent.run("Weather in Paris?")
    assert result.answer == "sunny, 24°C"
    assert result.stop_reason == "max_steps"
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]
    assert len(result.tool_calls) == 1
    feedback = result.steps[1].feedback or ""
    assert feedback == f"Observation: Your reply could not be used: {WRITTEN_CALL}"
    said, sent_feedback, force = model.payloads[-1]["messages"][-3:]
    assert said["role"] == "assistant"
    assert sent_feedback == {"role": "user", "content": feedback}
    assert "Do not use any more tools" in force["content"]


def test_text_ends_with_a_clear_error_after_the_second_written_call() -> None:
    agent, model = text_agent(
        [TEXT_STEP, WRITTEN["react"], WRITTEN["python"], "Final Answer: never asked for"],
        max_steps=1,
    )
    result = agent.run("Weather in Paris?")
    assert (result.answer, result.stop_reason, result.error) == (None, "max_steps", BUDGET_ERROR)
    assert [s.kind for s in result.steps] == ["action", "format_error", "format_error"]
    assert model.remaining == 1


def test_text_forced_reply_without_labels_gets_the_retry_unless_implicit_answers_are_on() -> None:
    words = "Paris is sunny, 24°C."
    agent, _ = text_agent([TEXT_STEP, words, "Final Answer: sunny"], max_steps=1)
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]
    assert result.answer == "sunny"
    feedback = result.steps[1].feedback or ""
    assert "the reply has no label" in feedback
    assert "Action Input: <JSON object>" not in feedback  # no Action is offered now

    agent, _ = text_agent(
        [TEXT_STEP, words], max_steps=1, protocol=TextReActProtocol(implicit_final_answer=True)
    )
    assert agent.run("Weather in Paris?").answer == words


def test_text_error_after_two_unreadable_forced_replies() -> None:
    agent, _ = text_agent([TEXT_STEP, "Thought: hmm", "Thought: still"], max_steps=1)
    result = agent.run("q")
    assert (result.answer, result.stop_reason) == (None, "max_steps")
    assert (result.error or "").startswith(
        "the model did not give a final answer in words after the step budget: "
        "its last reply was not in the expected format ("
    )
