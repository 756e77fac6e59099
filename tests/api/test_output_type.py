"""Typed final answers (``output_type``) under every protocol: the schema shown the model
its own way (a ``final_result`` tool, the system prompt and grammar, the step schema), the
answer validated once in the policy, failures fed back naming the fields within the run's
error budget, and ``result.output`` the validated value."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from support.gbnf import matcher
from typing_extensions import TypedDict

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ConfigurationError,
    ErrorBudgetExhausted,
    ScriptedModel,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.protocols.function_calling import FINAL_ALONE
from react_engine.protocols.output import FINAL_RESULT, output_spec
from react_engine.testing import ScriptedServer, tool_calls_completion
from react_engine.testing.tools import get_weather
from react_engine.transport.grammar import react_grammar, step_schema


class City(BaseModel):
    name: str
    temperature_c: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


class Opaque:
    """A class pydantic has no schema for."""


PARIS = {"name": "Paris", "temperature_c": 21}
WEATHER = ("get_weather", {"location": "Paris"})


def registry(**fields: Any) -> CapabilityRegistry:
    found = CapabilityRegistry.from_default(env={})
    if fields:
        found.register("house-*", **fields)
    return found


def make_agent(
    script: list[Any], protocol: str, *, caps: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("tools", [get_weather])
    kwargs.setdefault("output_type", City)
    agent = Agent(
        "house-model",
        client=model,
        protocol=protocol,
        registry=registry(**(caps or {})),
        capability_cache=CapabilityCache(),
        **kwargs,
    )
    return agent, model


def text_final(value: Any, thought: str = "I now know the final answer") -> str:
    return f"Thought: {thought}\nFinal Answer: {json.dumps(value)}"


def text_call() -> str:
    return 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'


def json_final(value: Any) -> str:
    return json.dumps({"thought": "I now know the final answer", "action": {"final_answer": value}})


def json_call() -> str:
    return json.dumps(
        {"thought": "I need the weather.", "action": {"tool": "get_weather", "arguments": {}}}
    )


# --- the spec ------------------------------------------------------------------------------


def test_str_is_the_plain_answer_and_a_model_is_an_object_schema() -> None:
    assert output_spec(str) is None
    spec = output_spec(City)
    assert spec is not None and not spec.wrapped and spec.strict
    assert spec.schema == spec.parameters
    assert spec.schema["required"] == ["name", "temperature_c"]
    assert spec.schema["additionalProperties"] is False and "title" not in spec.schema


def test_a_value_that_is_not_an_object_is_wrapped_in_the_tool_parameters() -> None:
    spec = output_spec(list[City])
    assert spec is not None and spec.wrapped
    assert spec.parameters["required"] == ["response"]
    assert spec.schema["type"] == "array" and "$defs" not in spec.schema
    assert spec.unwrap({"response": [PARIS]}) == [PARIS]
    assert spec.unwrap([PARIS]) == [PARIS]  # a model that left the wrapper out


def test_reading_repairs_json_and_names_the_failing_fields() -> None:
    spec = output_spec(City)
    assert spec is not None
    value, repairs = spec.read("```json\n{'name': 'Paris', 'temperature_c': 21,}\n```")
    assert value == City(**PARIS) and repairs
    with pytest.raises(ValueError, match=r"temperature_c: Input should be a valid integer"):
        spec.read('{"name": "Paris", "temperature_c": "warm"}')
    with pytest.raises(ValueError, match=r"temperature_c: Field required"):
        spec.read('{"name": "Paris"}')
    with pytest.raises(ValueError, match="not a JSON value"):
        spec.read("It is sunny in Paris")
    word = output_spec(Literal["yes", "no"])
    assert word is not None and word.read("yes")[0] == "yes"
    short = output_spec(Annotated[str, Field(max_length=20)])
    assert short is not None and short.read("Paris [1]")[0] == "Paris [1]"


def test_a_type_without_a_schema_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match="output_type"):
        make_agent([], "text", output_type=object())
    agent, _ = make_agent([], "text", output_type=str)
    with pytest.raises(ConfigurationError, match="output_type"):
        agent.run("q", output_type=Opaque)


# --- function calling --------------------------------------------------------------------------


def test_function_calling_answers_through_the_final_result_tool() -> None:
    agent, model = make_agent(
        [tool_call_reply(WEATHER), tool_call_reply((FINAL_RESULT, PARIS))], "function_calling"
    )
    result = agent.run("Weather in Paris?")
    assert result.output == City(**PARIS)
    assert json.loads(result.answer or "") == PARIS
    assert result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert [a.tool for a in result.tool_calls] == ["get_weather"]  # final_result never runs
    assert json.loads(result.to_jsonl().splitlines()[-1])["answer"] == result.answer
    first = model.payloads[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["get_weather", FINAL_RESULT]
    final = first["tools"][1]["function"]
    assert final["parameters"] == output_spec(City).parameters  # type: ignore[union-attr]
    assert final["strict"] is True and "City" in final["description"]
    assert "final_result" in first["messages"][0]["content"]


def test_function_calling_asks_for_a_call_where_the_server_honours_required() -> None:
    agent, model = make_agent(
        [tool_call_reply((FINAL_RESULT, PARIS))],
        "function_calling",
        caps={"function_calling": True, "tool_choice_required": True},
    )
    agent.run("q")
    assert model.payloads[0]["tool_choice"] == "required"
    agent, model = make_agent(
        [tool_call_reply((FINAL_RESULT, PARIS))],
        "function_calling",
        caps={"function_calling": True, "tool_choice_required": False},
    )
    agent.run("q")
    assert model.payloads[0]["tool_choice"] == "auto"


def test_an_invalid_final_result_is_fed_back_naming_the_field_then_corrected() -> None:
    agent, model = make_agent(
        [
            tool_call_reply((FINAL_RESULT, {"name": "Paris", "temperature_c": "warm"})),
            tool_call_reply((FINAL_RESULT, PARIS)),
        ],
        "function_calling",
    )
    result = agent.run("q")
    assert result.output == City(**PARIS)
    refused = result.steps[0]
    assert refused.kind == "format_error"
    assert refused.feedback is not None
    assert "temperature_c: Input should be a valid integer" in refused.feedback
    assert "'warm'" in refused.feedback and FINAL_RESULT in refused.feedback
    sent = model.payloads[1]["messages"]
    assert sent[-1]["role"] == "user" and "temperature_c" in sent[-1]["content"]


def test_final_result_beside_another_call_is_refused_and_the_other_call_runs() -> None:
    agent, _ = make_agent(
        [
            tool_call_reply(WEATHER, (FINAL_RESULT, PARIS)),
            tool_call_reply((FINAL_RESULT, PARIS)),
        ],
        "function_calling",
    )
    result = agent.run("q")
    first = result.steps[0].actions
    assert [(a.tool, a.status) for a in first] == [
        ("get_weather", "ok"),
        (FINAL_RESULT, "invalid_arguments"),
    ]
    assert first[1].error == FINAL_ALONE and FINAL_ALONE.text() in first[1].observation
    assert "unknown tool" not in first[1].observation
    assert result.output == City(**PARIS)


def test_a_text_reply_is_taken_when_it_validates_and_refused_when_it_does_not() -> None:
    agent, _ = make_agent([reply(json.dumps(PARIS))], "function_calling")
    assert agent.run("q").output == City(**PARIS)
    agent, _ = make_agent(
        [reply("It is 21 degrees in Paris."), tool_call_reply((FINAL_RESULT, PARIS))],
        "function_calling",
    )
    result = agent.run("q")
    assert result.steps[0].kind == "format_error"
    assert FINAL_RESULT in (result.steps[0].feedback or "")
    assert result.output == City(**PARIS)


def test_final_result_written_as_text_is_the_answer() -> None:
    written = (
        f'<tool_call>{{"name": "{FINAL_RESULT}", "arguments": {json.dumps(PARIS)}}}</tool_call>'
    )
    agent, _ = make_agent([reply(written)], "function_calling")
    result = agent.run("q")
    assert result.output == City(**PARIS)
    assert any(r.startswith("salvaged:") for r in result.steps[0].repairs)


def test_a_tool_named_final_result_is_refused_with_an_output_type() -> None:
    @tool(name=FINAL_RESULT)
    def clash(x: int) -> int:
        """Clash."""
        return x

    agent, _ = make_agent([], "function_calling", tools=[clash])
    with pytest.raises(ConfigurationError, match="final_result"):
        agent.run("q")
    agent, _ = make_agent(["Sunny."], "function_calling", tools=[clash], output_type=str)
    assert agent.run("q").answer == "Sunny."


def test_a_forced_final_offers_only_final_result() -> None:
    agent, model = make_agent(
        [tool_call_reply(WEATHER), tool_call_reply((FINAL_RESULT, PARIS))],
        "function_calling",
        caps={"function_calling": True, "tool_choice_required": True},
        max_steps=1,
    )
    result = agent.run("q")
    assert result.stop_reason == "max_steps" and result.output == City(**PARIS)
    forced = model.payloads[1]
    assert [t["function"]["name"] for t in forced["tools"]] == [FINAL_RESULT]
    assert forced["tool_choice"] == "required"
    assert "call final_result" in forced["messages"][-1]["content"]


def test_an_empty_forced_reply_is_asked_for_final_result_again() -> None:
    agent, _ = make_agent(
        [tool_call_reply(WEATHER), reply(""), tool_call_reply((FINAL_RESULT, PARIS))],
        "function_calling",
        max_steps=1,
    )
    result = agent.run("q")
    assert result.output == City(**PARIS)
    assert "call final_result" in (result.steps[1].feedback or "")


def test_without_tools_final_result_is_the_only_tool() -> None:
    agent, model = make_agent(
        [tool_call_reply((FINAL_RESULT, {"response": [1, 2, 3]}))],
        "function_calling",
        tools=[],
        output_type=list[int],
    )
    result = agent.run("q")
    assert result.output == [1, 2, 3] and result.answer == "[1,2,3]"
    assert [t["function"]["name"] for t in model.payloads[0]["tools"]] == [FINAL_RESULT]


def test_over_http_the_final_result_tool_is_in_the_request_body() -> None:
    with ScriptedServer(
        tool_calls_completion(WEATHER),
        tool_calls_completion((FINAL_RESULT, PARIS)),
    ) as server:
        agent = Agent(
            "house-model",
            [get_weather],
            base_url=server.base_url,
            api_key="sk-test",
            protocol="function_calling",
            capability_cache=CapabilityCache(),
            registry=registry(),
            output_type=City,
        )
        result = agent.run("q")
        bodies = server.requests
    assert result.output == City(**PARIS)
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["get_weather", FINAL_RESULT]


# --- text --------------------------------------------------------------------------------------


def test_text_final_answer_is_json_for_the_schema_shown_in_the_prompt() -> None:
    agent, model = make_agent([text_call(), text_final(PARIS)], "text")
    result = agent.run("Weather in Paris?")
    assert result.output == City(**PARIS)
    system = model.payloads[0]["messages"][0]["content"]
    assert json.dumps(output_spec(City).schema, ensure_ascii=False) in system  # type: ignore[union-attr]
    assert "Final Answer must be one JSON value" in system


def test_text_invalid_answer_is_fed_back_then_corrected() -> None:
    agent, _ = make_agent(
        [text_final({"name": "Paris"}), text_final(PARIS)], "text", output_type=City
    )
    result = agent.run("q")
    assert result.output == City(**PARIS)
    feedback = result.steps[0].feedback or ""
    assert feedback.startswith("Observation: Your reply could not be used")
    assert "temperature_c: Field required" in feedback and "Final Answer:" in feedback


def test_text_forced_final_with_an_output_type() -> None:
    agent, _ = make_agent([text_call(), text_final(PARIS)], "text", max_steps=1)
    result = agent.run("q")
    assert result.stop_reason == "max_steps" and result.output == City(**PARIS)


def test_text_grammar_makes_the_final_answer_the_schemas_json() -> None:
    agent, model = make_agent(
        [text_final(PARIS)],
        "text",
        caps={"constrained_decoding": True, "constraint_style": "llama.cpp"},
    )
    agent.run("q")
    grammar = model.payloads[0]["extra_body"]["grammar"]
    assert '\\"temperature_c\\"' in grammar and "answer-text ::= output" in grammar


def test_text_grammar_accepts_the_typed_answer_only() -> None:
    gbnf = matcher()
    spec = output_spec(City)
    assert spec is not None
    grammar = react_grammar([], answer_schema=spec.schema)
    head = "Thought: I now know the final answer\nFinal Answer: "
    assert gbnf.accepts(grammar, head + '{"name": "Paris", "temperature_c": 21}')
    assert not gbnf.accepts(grammar, head + "Sunny in Paris.")
    assert not gbnf.accepts(grammar, head + '{"name": "Paris"}')


@pytest.mark.parametrize(
    ("output_type", "value", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Pair, {"left": "a", "right": "b"}, {"left": "a", "right": "b"}),
        (list[int], [3, 4], [3, 4]),
        (Literal["yes", "no"], "yes", "yes"),
    ],
)
def test_text_accepts_other_types_pydantic_validates(
    output_type: Any, value: Any, expected: Any
) -> None:
    agent, _ = make_agent([text_final(value)], "text", output_type=output_type)
    assert agent.run("q").output == expected


# --- structured --------------------------------------------------------------------------------


def test_structured_final_answer_holds_the_typed_value() -> None:
    agent, model = make_agent(
        [json_call(), json_final(PARIS)],
        "structured",
        caps={"constrained_decoding": True, "constraint_style": "json_schema"},
    )
    result = agent.run("q")
    assert result.output == City(**PARIS)
    schema = model.payloads[0]["response_format"]["json_schema"]["schema"]
    branches = schema["properties"]["action"]["anyOf"]
    assert branches[-1]["properties"]["final_answer"] == output_spec(City).schema  # type: ignore[union-attr]
    assert "final_answer" in model.payloads[0]["messages"][0]["content"]


def test_structured_invalid_answer_is_fed_back_then_corrected() -> None:
    agent, _ = make_agent(
        [json_final({"name": "Paris", "temperature_c": "warm"}), json_final(PARIS)], "structured"
    )
    result = agent.run("q")
    assert result.output == City(**PARIS)
    assert "temperature_c" in (result.steps[0].feedback or "")


def test_step_schema_keeps_the_answer_definitions_at_the_root() -> None:
    schema = step_schema(
        [], answer_schema={"$defs": {"A": {"type": "integer"}}, "$ref": "#/$defs/A"}
    )
    assert schema["$defs"] == {"A": {"type": "integer"}}
    assert schema["properties"]["action"]["properties"]["final_answer"] == {"$ref": "#/$defs/A"}


# --- the run -----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["function_calling", "text", "structured"])
def test_the_error_budget_ends_a_run_that_never_validates(protocol: str) -> None:
    bad = {"name": "Paris", "temperature_c": "warm"}
    answer = {
        "function_calling": tool_call_reply((FINAL_RESULT, bad)),
        "text": text_final(bad),
        "structured": json_final(bad),
    }[protocol]
    agent, _ = make_agent([], protocol, max_consecutive_errors=1)
    agent._model = ScriptedModel(default=answer)
    with pytest.raises(ErrorBudgetExhausted) as caught:
        agent.run("q")
    result = caught.value.result
    assert result is not None and result.output is None and result.answer is None
    assert [s.kind for s in result.steps] == ["format_error", "format_error"]
    assert all("temperature_c" in (s.feedback or "") for s in result.steps)


def test_without_an_output_type_the_output_is_the_answer_text() -> None:
    agent, _ = make_agent(["Thought: done\nFinal Answer: Sunny."], "text", output_type=str)
    result = agent.run("q")
    assert result.output == result.answer == "Sunny."


def test_per_run_output_type_async_and_conversations() -> None:
    agent, _ = make_agent(
        [text_final([1, 2]), text_final(PARIS), text_final({"x": 1, "y": 2})], "text"
    )
    assert agent.run("q", output_type=list[int]).output == [1, 2]
    assert asyncio.run(agent.arun("q")).output == City(**PARIS)
    chat = agent.conversation()
    assert chat.ask("q", output_type=Point).output == Point(1, 2)
    assert len(chat.steps) == 1
