"""Constrained decoding: the grammars and schemas, where each kind of server finds them in
the request, and the run-time fallback when a server rejects them.

Payloads are checked twice: as :func:`request_payload` builds them (what the ``openai`` SDK
is called with) and as a loopback HTTP server receives them (``extra_body`` fields arrive
at the top level of the JSON body). Grammars are checked with llama.cpp's own grammar
engine where llama-cpp-python is installed: each must parse, accept a valid sample and
reject an invalid one (see ``tests/support/gbnf.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel, Field
from support.gbnf import matcher
from support.parts import LOCAL, LOCAL_HINT, require_module

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelRequestError,
    ScriptedModel,
    Tool,
    tool,
    tool_call_reply,
)
from react_engine.protocols import StructuredOutputProtocol, TextReActProtocol
from react_engine.protocols.base import Protocol, RequestContext
from react_engine.testing import MockResponse, ScriptedServer, completion
from react_engine.testing.tools import calculator, get_weather
from react_engine.transport.grammar import (
    GrammarError,
    ReactLabels,
    react_grammar,
    schema_grammar,
    schema_rules,
    step_schema,
)
from react_engine.transport.rejections import classify_rejection
from react_engine.transport.wire import request_payload
from react_engine.types import ModelRequest

TEXT_CALL = (
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Beijing"}'
)
TEXT_FINAL = "Thought: I now know the final answer\nFinal Answer: Sunny in Beijing."
JSON_CALL = json.dumps(
    {
        "thought": "I need the weather.",
        "action": {"tool": "get_weather", "arguments": {"location": "Beijing"}},
    }
)
JSON_FINAL = json.dumps(
    {"thought": "I now know the final answer", "action": {"final_answer": "Sunny in Beijing."}}
)

# Error bodies as servers send them for a constraint parameter they do not take.
GRAMMAR_REJECTED = MockResponse(
    400,
    {
        "error": {
            "message": "Unrecognized request argument supplied: grammar",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    },
)
RESPONSE_FORMAT_REJECTED = MockResponse(
    400,
    {
        "error": {
            "message": "Invalid parameter: 'response_format' of type 'json_schema' is not "
            "supported with this model.",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    },
)
GUIDED_JSON_REJECTED = MockResponse(
    400,
    {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "guided_json"],
                "msg": "Extra inputs are not permitted",
                "input": {},
            }
        ]
    },
)


def registry(style: str | None, pattern: str = "house-*") -> CapabilityRegistry:
    """The shipped registry, plus ``pattern`` served by a constraining server of ``style``."""
    found = CapabilityRegistry.from_default(env={})
    if style is not None:
        found.register(pattern, constrained_decoding=True, constraint_style=style)
    return found


def scripted_agent(
    protocol: str | Protocol, style: str | None, script: list[Any], **kwargs: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("tools", [get_weather])
    agent = Agent(
        "house-model",
        client=model,
        protocol=protocol,
        registry=registry(style),
        capability_cache=CapabilityCache(),
        **kwargs,
    )
    return agent, model


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=lambda body: completion("unset")) as srv:
        yield srv


def http_agent(server: ScriptedServer, protocol: str, style: str | None, **kwargs: Any) -> Agent:
    kwargs.setdefault("capability_cache", CapabilityCache())
    return Agent(
        "house-model",
        [get_weather],
        base_url=server.base_url,
        api_key="sk-test",
        protocol=protocol,
        registry=registry(style),
        **kwargs,
    )


def answers(protocol: str) -> Any:
    """A provider that calls get_weather once, then answers, in ``protocol``'s format."""
    call, final = (JSON_CALL, JSON_FINAL) if protocol == "structured" else (TEXT_CALL, TEXT_FINAL)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        observed = any(
            m["role"] == "user" and m["content"].startswith("Observation:")
            for m in body["messages"]
        )
        return completion(final if observed else call)

    return respond


# --- (a) each mechanism in the payload ----------------------------------------------------------


def test_text_protocol_sends_a_llama_cpp_grammar() -> None:
    agent, model = scripted_agent("text", "llama.cpp", [TEXT_CALL, TEXT_FINAL])
    assert agent.run("Weather in Beijing?").answer == "Sunny in Beijing."
    first, second = model.payloads
    grammar = first["extra_body"]["grammar"]
    assert grammar.startswith("root ::= thought ( call-get-weather | answer )")
    assert '"get_weather"' in grammar and '"Action Input"' in grammar
    assert "response_format" not in first and "guided_grammar" not in first["extra_body"]
    assert second["extra_body"]["grammar"] == grammar  # every step of the run


def test_text_protocol_sends_a_vllm_guided_grammar() -> None:
    agent, model = scripted_agent("text", "vllm", [TEXT_FINAL])
    agent.run("q")
    extra = model.payloads[0]["extra_body"]
    assert set(extra) == {"guided_grammar"}
    assert '"get_weather"' in extra["guided_grammar"]


def test_text_protocol_sends_nothing_to_a_json_schema_only_server() -> None:
    # A JSON Schema cannot describe a Thought/Action reply.
    agent, model = scripted_agent("text", "json_schema", [TEXT_FINAL])
    agent.run("q")
    assert "extra_body" not in model.payloads[0]
    assert "response_format" not in model.payloads[0]


def test_structured_protocol_sends_its_schema_as_a_llama_cpp_grammar() -> None:
    agent, model = scripted_agent("structured", "llama.cpp", [JSON_CALL, JSON_FINAL])
    assert agent.run("Weather in Beijing?").answer == "Sunny in Beijing."
    request = model.requests[0]
    assert request.constraint is not None
    assert request.constraint.json_schema == step_schema([get_weather.openai_schema()])
    payload = model.payloads[0]
    assert set(payload["extra_body"]) == {"grammar"}
    assert payload["extra_body"]["grammar"] == schema_grammar(
        request.constraint.json_schema, "step"
    )
    assert "response_format" not in payload and "tools" not in payload


def test_structured_protocol_sends_vllm_guided_json() -> None:
    agent, model = scripted_agent("structured", "vllm", [JSON_FINAL])
    agent.run("q")
    extra = model.payloads[0]["extra_body"]
    assert set(extra) == {"guided_json"}  # vLLM compiles the schema itself
    assert extra["guided_json"] == step_schema([get_weather.openai_schema()])


def test_structured_protocol_sends_a_json_schema_response_format() -> None:
    agent, model = scripted_agent("structured", "json_schema", [JSON_FINAL])
    agent.run("q")
    payload = model.payloads[0]
    assert "extra_body" not in payload
    spec = payload["response_format"]["json_schema"]
    assert payload["response_format"]["type"] == "json_schema"
    assert spec["name"] == "react_step"
    assert spec["schema"] == step_schema([get_weather.openai_schema()])
    # get_weather has an optional parameter: its schema is not strict-compatible.
    assert "strict" not in spec


def test_strict_only_when_every_admitted_tool_is_strict_compatible() -> None:
    calc = json.dumps(
        {"thought": "t", "action": {"tool": "calculator", "arguments": {"expression": "1+1"}}}
    )
    agent, model = scripted_agent(
        "structured", "json_schema", [JSON_FINAL, JSON_FINAL, calc, JSON_FINAL], tools=[calculator]
    )
    agent.run("q")
    assert model.payloads[-1]["response_format"]["json_schema"]["strict"] is True
    # Both tools: one is not strict-compatible, so the step schema is not sent strict.
    agent.tools = [calculator, get_weather]
    agent.run("q")
    assert "strict" not in model.payloads[-1]["response_format"]["json_schema"]
    # Only calculator admitted (tool_choice names it): strict again.
    assert agent.run("q", tool_choice="calculator", max_steps=1).answer == "Sunny in Beijing."
    assert model.payloads[-2]["response_format"]["json_schema"]["strict"] is True


class Address(BaseModel):
    city: str
    zip_code: str | None = None


def test_strict_needs_every_nested_object_closed_and_required() -> None:
    @tool
    def ship(address: Address) -> str:
        """Ship to an address."""
        return "ok"

    # Every top-level property is required, but the nested optional zip_code breaks
    # OpenAI's strict rules: the tool is not sent strict, nor is the step schema.
    assert not ship.strict
    agent, model = scripted_agent("structured", "json_schema", [JSON_FINAL], tools=[ship])
    agent.run("q")
    assert "strict" not in model.payloads[0]["response_format"]["json_schema"]


def test_forced_final_constrains_to_the_answer_only() -> None:
    agent, model = scripted_agent("structured", "json_schema", [JSON_CALL, JSON_FINAL], max_steps=1)
    result = agent.run("Weather in Beijing?")
    assert result.stop_reason == "max_steps" and result.answer == "Sunny in Beijing."
    first, forced = (p["response_format"]["json_schema"]["schema"] for p in model.payloads)
    assert "anyOf" in first["properties"]["action"]
    assert forced["properties"]["action"]["required"] == ["final_answer"]
    assert forced["properties"]["action"]["properties"] == {"final_answer": {"type": "string"}}

    agent, model = scripted_agent("text", "llama.cpp", [TEXT_CALL, TEXT_FINAL], max_steps=1)
    agent.run("Weather in Beijing?")
    forced_grammar = model.payloads[1]["extra_body"]["grammar"]
    assert forced_grammar.startswith('root ::= "Thought: I now know the final answer\\n" answer')
    assert "Action" not in forced_grammar


@pytest.mark.parametrize("protocol", ["text", "structured"])
def test_tool_choice_shapes_the_constraint(protocol: str) -> None:
    tools = [get_weather, calculator]
    proto = StructuredOutputProtocol() if protocol == "structured" else TextReActProtocol()
    caps = registry("llama.cpp").lookup("house-model")[0]

    def constraint(choice: str) -> Any:
        ctx = RequestContext(
            model="house-model", history=[], tools=tools, tool_choice=choice, capabilities=caps
        )
        found = proto.build_request(ctx).constraint
        assert found is not None and found.grammar is not None
        return found

    required = constraint("required").grammar
    named = constraint("calculator").grammar
    none = constraint("none").grammar
    # Tool names appear only as literals (rule names spell them with dashes).
    assert "get_weather" in required and "calculator" in required
    assert "get_weather" not in named and "calculator" in named
    assert "get_weather" not in none and "calculator" not in none
    if protocol == "structured":
        schema = constraint("required").json_schema
        branches = schema["properties"]["action"]["anyOf"]
        assert all("final_answer" not in b["properties"] for b in branches)
        assert "final_answer" not in required and "final_answer" in none
    else:
        assert "answer" not in required.splitlines()[0]


def test_no_constraint_without_the_capability() -> None:
    agent, model = scripted_agent("structured", None, [JSON_FINAL])
    agent.run("q")
    assert model.requests[0].constraint is None
    assert "extra_body" not in model.payloads[0] and "response_format" not in model.payloads[0]


def test_function_calling_sends_no_constraint() -> None:
    agent, model = scripted_agent("function_calling", "llama.cpp", ["Sunny."])
    agent.run("q")
    assert model.requests[0].constraint is None


def test_request_payload_puts_each_style_where_its_server_reads_it() -> None:
    from react_engine.types import Constraint, ModelSettings, UserMessage

    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}

    def payload(constraint: Constraint, **settings: Any) -> dict[str, Any]:
        return request_payload(
            ModelRequest(
                model="m",
                messages=(UserMessage("q"),),
                settings=ModelSettings(**settings),
                constraint=constraint,
            )
        )

    assert payload(Constraint("llama.cpp", grammar="root ::= [a]"))["extra_body"] == {
        "grammar": "root ::= [a]"
    }
    assert payload(Constraint("vllm", grammar="root ::= [a]"))["extra_body"] == {
        "guided_grammar": "root ::= [a]"
    }
    assert payload(Constraint("vllm", json_schema=schema))["extra_body"] == {"guided_json": schema}
    assert payload(Constraint("json_schema", json_schema=schema, strict=True))[
        "response_format"
    ] == {
        "type": "json_schema",
        "json_schema": {"name": "react_step", "schema": schema, "strict": True},
    }
    # The user's own extra_body fields are kept beside the constraint.
    both = payload(Constraint("llama.cpp", grammar="g"), extra_body={"top_k": 5})
    assert both["extra_body"] == {"top_k": 5, "grammar": "g"}


@pytest.mark.parametrize(
    ("protocol", "style", "field"),
    [
        ("text", "llama.cpp", "grammar"),
        ("structured", "llama.cpp", "grammar"),
        ("text", "vllm", "guided_grammar"),
        ("structured", "vllm", "guided_json"),
        ("structured", "json_schema", "response_format"),
    ],
)
def test_constraints_travel_over_http(
    server: ScriptedServer, protocol: str, style: str, field: str
) -> None:
    server.default = answers(protocol)
    result = http_agent(server, protocol, style).run("Weather in Beijing?")
    assert result.answer == "Sunny in Beijing."
    assert len(server.requests) == 2
    for body in server.requests:
        assert field in body, sorted(body)
        assert "extra_body" not in body  # the SDK merges it into the body
        others = {"grammar", "guided_grammar", "guided_json", "response_format"} - {field}
        assert not others & set(body)
    sent = server.requests[0][field]
    if field == "response_format":
        assert sent["json_schema"]["schema"] == step_schema([get_weather.openai_schema()])
    elif field == "guided_json":
        assert sent == step_schema([get_weather.openai_schema()])
    else:
        assert sent.startswith("root ::= ") and "get_weather" in sent


def test_the_grammar_sent_admits_the_reply_received(server: ScriptedServer) -> None:
    """End to end with llama.cpp's engine: the server checks each reply against the grammar
    the request carried, as llama.cpp would have enforced it."""
    gbnf = matcher()
    checked: list[str] = []

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        reply = answers("structured")(body)
        content = reply["choices"][0]["message"]["content"]
        assert gbnf.accepts(body["grammar"], content), content
        assert not gbnf.accepts(body["grammar"], content + " {}")
        assert not gbnf.accepts(body["grammar"], content.replace('"thought"', '"thinking"'))
        if "get_weather" in content:
            assert not gbnf.accepts(body["grammar"], content.replace("get_weather", "get_wether"))
        checked.append(content)
        return reply

    server.default = respond
    result = http_agent(server, "structured", "llama.cpp").run("Weather in Beijing?")
    assert result.answer == "Sunny in Beijing." and len(checked) == 2


# --- (b) the fallback when a server rejects the constraint -------------------------------------


def test_rejection_bodies_are_classified() -> None:
    for response in (GRAMMAR_REJECTED, RESPONSE_FORMAT_REJECTED, GUIDED_JSON_REJECTED):
        assert classify_rejection(response.status, json.dumps(response.body)) == (
            "constrained_decoding"
        )


@pytest.mark.parametrize(
    ("protocol", "style", "field", "rejection"),
    [
        ("text", "llama.cpp", "grammar", GRAMMAR_REJECTED),
        ("structured", "llama.cpp", "grammar", GRAMMAR_REJECTED),
        ("structured", "json_schema", "response_format", RESPONSE_FORMAT_REJECTED),
        ("structured", "vllm", "guided_json", GUIDED_JSON_REJECTED),
    ],
)
def test_a_rejected_constraint_is_dropped_and_learned(
    server: ScriptedServer, protocol: str, style: str, field: str, rejection: MockResponse
) -> None:
    provider = answers(protocol)
    server.default = lambda body: rejection if field in body else provider(body)
    cache = CapabilityCache()
    agent = http_agent(server, protocol, style, capability_cache=cache)
    result = agent.run("Weather in Beijing?")

    assert result.answer == "Sunny in Beijing." and result.stop_reason == "final_answer"
    assert result.protocol == protocol  # structured keeps going, on prompted JSON
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert result.tool_calls[0].status == "ok"
    # One wasted request; the same turn is re-sent without the constraint.
    assert len(server.requests) == 3
    assert field in server.requests[0]
    assert all(field not in body for body in server.requests[1:])
    assert server.requests[1]["messages"] == server.requests[0]["messages"]
    assert any("constrained decoding rejected" in e for e in [n.message for n in result.notices])
    assert any(
        "constrained decoding rejected" in e for e in [n.message for n in result.steps[0].notices]
    )
    assert cache.get(server.base_url, "house-model") == {"constrained_decoding": False}
    assert agent.capabilities()[0].constrained_decoding is False
    assert agent.capabilities()[1].startswith("learned: constrained_decoding=False")

    # The next run on the same model and endpoint wastes nothing.
    server.requests.clear()
    again = agent.run("Weather in Beijing?")
    assert again.answer == "Sunny in Beijing." and not [n.message for n in again.notices]
    assert len(server.requests) == 2 and all(field not in b for b in server.requests)


def test_a_constraint_error_is_not_adapted_when_none_was_asked_for(
    server: ScriptedServer,
) -> None:
    server.default = lambda body: GRAMMAR_REJECTED
    agent = http_agent(server, "structured", None)
    with pytest.raises(ModelRequestError):
        agent.run("q")
    assert len(server.requests) == 1


def test_the_fallback_works_with_a_sdk_client(server: ScriptedServer) -> None:
    provider = answers("text")
    server.default = lambda body: GRAMMAR_REJECTED if "grammar" in body else provider(body)
    cache = CapabilityCache()
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test") as sdk:
        agent = Agent(
            "house-model",
            [get_weather],
            client=sdk,
            protocol="text",
            registry=registry("llama.cpp"),
            capability_cache=cache,
        )
        assert agent.run("Weather in Beijing?").answer == "Sunny in Beijing."
    assert [learned for _, _, learned in cache.entries()] == [{"constrained_decoding": False}]


# --- (d) the grammar writer ---------------------------------------------------------------------


def check(grammar: str, valid: list[Any], invalid: list[Any]) -> None:
    """llama.cpp parses the grammar, accepts every valid sample and rejects every invalid
    one. Samples are JSON values (dumped with and without spaces) or raw strings."""
    llama_cpp = require_module("llama_cpp", LOCAL, LOCAL_HINT, module_level=False)
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
    gbnf = matcher()
    assert gbnf.parses(grammar), grammar

    def texts(sample: Any) -> list[str]:
        if isinstance(sample, Raw):
            return [sample.text]
        return [json.dumps(sample), json.dumps(sample, separators=(",", ":"))]

    for sample in valid:
        for text in texts(sample):
            assert gbnf.accepts(grammar, text), f"rejected valid {text!r}\n{grammar}"
    for sample in invalid:
        for text in texts(sample):
            assert not gbnf.accepts(grammar, text), f"accepted invalid {text!r}\n{grammar}"


class Raw:
    """A sample given as the exact text to feed the grammar."""

    def __init__(self, text: str) -> None:
        self.text = text


def test_object_with_required_and_optional_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "ok"],
        "additionalProperties": False,
    }
    root, rules = schema_rules(schema, "args")
    assert root == "args" and "json-text" in rules and "json-int" in rules
    check(
        schema_grammar(schema, "args"),
        valid=[
            {"name": "Ann", "ok": True},
            {"name": "Ann", "ok": False, "age": 3},
            {"name": "A", "ok": True, "age": -7, "score": 2.5},
            {"name": 'quote " and \\ and \u00e9', "ok": True, "score": 1e-3},
        ],
        invalid=[
            {"name": "", "ok": True},  # strings are non-empty unless minLength says 0
            {"ok": True},  # a required property missing
            {"name": "Ann"},
            {"name": 5, "ok": True},  # wrong type
            {"name": "Ann", "ok": "yes"},
            {"name": "Ann", "ok": True, "age": 1.5},  # not an integer
            {"name": "Ann", "ok": True, "extra": 1},  # not declared
            [1],
            Raw('{"name": "Ann", "ok": true'),  # unfinished
        ],
    )


class Units(BaseModel):
    unit: Literal["celsius", "fahrenheit"]
    mode: Literal[1, 2] = 1


def test_enums_from_literals() -> None:
    schema = Units.model_json_schema()
    grammar = schema_grammar(schema, "units")
    assert '"\\"celsius\\""' in grammar
    check(
        grammar,
        valid=[{"unit": "celsius"}, {"unit": "fahrenheit", "mode": 2}],
        invalid=[{"unit": "kelvin"}, {"unit": "Celsius"}, {"unit": "celsius", "mode": 3}],
    )


class Point(BaseModel):
    x: int
    y: int


class Shape(BaseModel):
    name: str
    points: list[Point] = Field(min_length=1, max_length=3)
    center: Point | None = None


def test_nested_models_through_defs_and_refs() -> None:
    schema = Shape.model_json_schema()
    assert "$defs" in schema and "$ref" in json.dumps(schema["properties"])
    grammar = schema_grammar(schema, "shape")
    assert "shape-def-point" in grammar  # each definition is written once, as a rule
    check(
        grammar,
        valid=[
            {"name": "s", "points": [{"x": 1, "y": 2}]},
            {"name": "s", "points": [{"x": 1, "y": 2}, {"x": 0, "y": 0}], "center": None},
            {"name": "s", "points": [{"x": 1, "y": 2}], "center": {"x": 5, "y": -5}},
        ],
        invalid=[
            {"name": "s", "points": []},  # minItems 1
            {"name": "s", "points": [{"x": 1, "y": 2}] * 4},  # maxItems 3
            {"name": "s", "points": [{"x": 1}]},  # y required in the definition
            {"name": "s", "points": [{"x": 1, "y": 2}], "center": "here"},
        ],
    )


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


def test_recursive_definitions_refer_to_themselves() -> None:
    check(
        schema_grammar(Tree.model_json_schema(), "tree"),
        valid=[
            {"label": "a"},
            {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]},
        ],
        invalid=[{"label": "a", "children": [{"children": []}]}],
    )


def test_optional_is_any_of_with_null() -> None:
    schema = {
        "type": "object",
        "properties": {"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["note"],
    }
    grammar = schema_grammar(schema, "opt")
    assert "json-null" in grammar
    check(grammar, valid=[{"note": None}, {"note": "x"}], invalid=[{"note": 1}, {}])


def test_arrays_with_min_and_max_items() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}
    check(schema_grammar(schema), valid=[[1, 2], [1, 2, 3]], invalid=[[], [1], [1, 2, 3, 4]])
    upto = {"type": "array", "items": {"type": "string"}, "maxItems": 2}
    check(schema_grammar(upto), valid=[[], ["a"], ["a", "b"]], invalid=[["a", "b", "c"], [1]])
    empty = {"type": "array", "maxItems": 0}
    check(schema_grammar(empty), valid=[[]], invalid=[[1]])


def test_strings_with_min_and_max_length() -> None:
    schema = {"type": "string", "minLength": 1, "maxLength": 3}
    check(schema_grammar(schema), valid=["a", "abc", "\u00e9\u00e9"], invalid=["", "abcd"])
    assert "json-char{1,200}" in schema_grammar(calculator.parameters)
    check(schema_grammar({"type": "string", "minLength": 0}), valid=["", "a"], invalid=[5])


def test_type_lists_const_and_any_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {"type": ["integer", "string"]},
            "k": {"const": "fixed"},
            "anything": {},
        },
        "required": ["v", "k", "anything"],
    }
    check(
        schema_grammar(schema),
        valid=[
            {"v": 1, "k": "fixed", "anything": {"a": [1, None]}},
            {"v": "s", "k": "fixed", "anything": 2},
        ],
        invalid=[{"v": True, "k": "fixed", "anything": 1}, {"v": 1, "k": "other", "anything": 1}],
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "allOf"),
        ({"$ref": "https://example.com/schema.json"}, "only local references"),
        ({"$ref": "#/$defs/Missing"}, "names no definition"),
        ({"type": "decimal"}, "unsupported type"),
        ({"enum": []}, "non-empty list"),
        ({"anyOf": []}, "non-empty list"),
        ({"type": "object", "properties": {"a": 5}}, "must be an object"),
        ({"type": "object", "properties": ["a"]}, "'properties' must be an object"),
    ],
)
def test_unsupported_schemas_raise_grammar_error(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        schema_rules(schema, "bad")


def test_too_deep_schemas_raise_grammar_error() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    with pytest.raises(GrammarError, match="deeper"):
        schema_rules(schema, "deep")


def test_the_step_schema_grammar() -> None:
    tools = [get_weather.openai_schema(), calculator.openai_schema()]
    call = {"thought": "t", "action": {"tool": "get_weather", "arguments": {"location": "P"}}}
    calc = {"thought": "t", "action": {"tool": "calculator", "arguments": {"expression": "1+1"}}}
    final = {"thought": "t", "action": {"final_answer": "done"}}
    check(
        schema_grammar(step_schema(tools), "step"),
        valid=[call, calc, final],
        invalid=[
            {"thought": "t", "action": {"tool": "get_wether", "arguments": {"location": "P"}}},
            # arguments of the other tool: each tool's arguments are tied to its name
            {"thought": "t", "action": {"tool": "calculator", "arguments": {"location": "P"}}},
            {"thought": "t", "action": {"tool": "get_weather", "arguments": {}}},
            {"action": final["action"]},  # the thought is required
            {"thought": "t", "action": {"final_answer": 42}},
        ],
    )
    check(schema_grammar(step_schema([]), "step"), [final], [call, calc])
    check(schema_grammar(step_schema(tools, allow_final=False), "step"), [call, calc], [final])
    check(
        schema_grammar(step_schema(tools[1:], allow_final=False), "step"),
        [calc],
        [call, final],
    )


def test_the_text_react_grammar() -> None:
    tools = [get_weather.openai_schema(), calculator.openai_schema()]
    call = Raw('Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "P"}')
    final = Raw("Thought: I know it.\nFinal Answer: Sunny.\nIt is warm.")
    check(
        react_grammar(tools),
        valid=[
            call,
            final,
            Raw('Thought: x\nAction: calculator\nAction Input: {"expression": "2"}'),
        ],
        invalid=[
            Raw('Thought: x\nAction: search\nAction Input: {"q": "P"}'),  # not a tool
            Raw('Thought: x\nAction: get_weather\nAction Input: {"city": "P"}'),
            Raw("Final Answer: no thought first"),
            Raw('Thought: x\nAction: get_weather\nAction Input: {"location": "P"}\nObservation: x'),
        ],
    )
    closing = Raw("Thought: I now know the final answer\nFinal Answer: Sunny.\nIt is warm.")
    # Only an answer, after the template's fixed closing thought.
    check(react_grammar([]), [closing], [call, final, Raw("Final Answer: ok")])
    planned = Raw(
        'Thought: I need to get the weather.\nAction: get_weather\nAction Input: {"location": "P"}'
    )
    check(react_grammar(tools, allow_final=False), [planned], [final, call])
    blob = ReactLabels(json_blob=True)
    check(
        react_grammar(tools, blob),
        valid=[
            Raw(
                'Thought: x\nAction:\n```json\n{"action": "get_weather", "action_input": '
                '{"location": "P"}}\n```'
            )
        ],
        invalid=[call],
    )
    zh = ReactLabels(
        thought="思考", action="行动", action_input="行动输入", final_answer="最终答案", colon="："
    )
    check(react_grammar(tools, zh), [Raw("思考：好\n最终答案：晴")], [final])


def test_tool_schemas_of_the_shipped_tools_all_compile() -> None:
    from react_engine.cli.agents import DEMO_TOOLS
    from react_engine.compare.tools import TASK_TOOLS

    every: list[Tool] = [*DEMO_TOOLS, *TASK_TOOLS.values()]
    schema = step_schema([t.openai_schema() for t in every])
    grammar = schema_grammar(schema, "step")
    assert matcher().parses(grammar)
    assert matcher().parses(react_grammar([t.openai_schema() for t in every]))


def test_a_required_action_begins_its_thought_with_the_plan_prefix() -> None:
    tools = [get_weather.openai_schema()]
    plan = Raw(
        'Thought: I need to get the weather in Paris.\nAction: get_weather\nAction Input: {"location": "Paris"}'
    )
    guess = Raw(
        'Thought: It is sunny in Paris.\nAction: get_weather\nAction Input: {"location": "Paris"}'
    )
    # Required (or named): a plan, not a guess at the answer, and no final answer.
    check(
        react_grammar(tools, allow_final=False), [plan], [guess, Raw("Thought: x\nFinal Answer: y")]
    )
    # "auto" leaves the thought free; an empty prefix switches it off.
    check(react_grammar(tools), [plan, guess], [])
    check(react_grammar(tools, ReactLabels(plan_prefix=""), allow_final=False), [guess], [])
    zh = ReactLabels(
        thought="思考",
        action="行动",
        action_input="行动输入",
        final_answer="最终答案",
        colon="：",
        plan_prefix="我需要",
    )
    zh_plan = Raw('思考：我需要 查天气\n行动：get_weather\n行动输入：{"location": "上海"}')
    check(react_grammar(tools, zh, allow_final=False), [zh_plan], [])


def test_the_text_protocol_reads_its_grammar_labels_from_the_template() -> None:
    agent, model = scripted_agent(
        "text", "llama.cpp", [TEXT_CALL, TEXT_FINAL], tool_choice="required"
    )
    agent.run("Weather in Beijing?")
    first, second = (p["extra_body"]["grammar"] for p in model.payloads)
    assert 'thought-text ::= "I need to "' in first and "answer ::=" not in first
    # Once a tool has run, "required" is reset to "auto": the answer is allowed again.
    assert "answer ::=" in second and "I need to" not in second


def test_function_calling_forced_final_rules_out_a_call_written_as_text() -> None:
    agent, model = scripted_agent(
        "function_calling",
        "llama.cpp",
        [
            tool_call_reply(("get_weather", {"location": "Beijing"}, "c1")),
            "Sunny in Beijing.",
        ],
        max_steps=1,
    )
    agent.run("Weather in Beijing?")
    assert "extra_body" not in model.payloads[0]
    grammar = model.payloads[1]["extra_body"]["grammar"]
    assert model.payloads[1]["tool_choice"] == "none"
    check(
        grammar,
        valid=[Raw("Sunny in Beijing, 24 degrees.")],
        invalid=[
            Raw('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'),
            Raw('{"name": "get_weather"}'),
            Raw('[{"name": "get_weather"}]'),
            Raw(""),
        ],
    )
    # Servers that take JSON Schemas only get nothing: a schema cannot say "not a call".
    agent, model = scripted_agent("function_calling", "json_schema", ["Sunny."], tool_choice="none")
    agent.run("q")
    assert "extra_body" not in model.payloads[0] and "response_format" not in model.payloads[0]


# --- schemas past the grammar's limits ----------------------------------------------------------


def _wide_tool(width: int) -> Tool:
    properties = {f"p{i}": {"type": "string"} for i in range(width)}
    return Tool.from_schema(
        "wide",
        {"type": "object", "properties": properties, "required": ["p0"]},
        lambda arguments: f"{len(arguments)} arguments",
        description="A tool with many parameters.",
    )


@pytest.mark.parametrize("protocol", ["text", "structured"])
@pytest.mark.parametrize("style", ["llama.cpp", "vllm"])
def test_a_tool_with_thousands_of_parameters_runs_under_a_grammar(
    protocol: str, style: str
) -> None:
    # The grammar writer recursed once per property: 1,000 parameters raised RecursionError.
    call = (
        'Thought: t\nAction: wide\nAction Input: {"p0": "x"}'
        if protocol == "text"
        else json.dumps({"thought": "t", "action": {"tool": "wide", "arguments": {"p0": "x"}}})
    )
    final = TEXT_FINAL if protocol == "text" else JSON_FINAL
    agent, model = scripted_agent(protocol, style, [call, final], tools=[_wide_tool(3000)])
    result = agent.run("Use wide.")
    assert result.answer == "Sunny in Beijing."
    assert result.steps[0].actions[0].observation == "1 arguments"
    extra = model.payloads[0].get("extra_body", {})
    assert extra.get("grammar") or extra.get("guided_grammar") or extra.get("guided_json")


def test_the_grammar_is_built_without_recursion_for_wide_objects() -> None:
    import sys

    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(4000)}}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the old writer needed one frame per property
    try:
        root, rules = schema_rules(schema, "wide")
    finally:
        sys.setrecursionlimit(limit)
    assert root == "wide" and len(rules) > 4000


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5001)}},
            "more than 5000 properties",
        ),
        ({"enum": list(range(1001))}, "more than 1000 enum values"),
        (
            {"type": "object", "properties": {"a" * 120_001: {"type": "string"}}},
            "exceed 120000 characters",
        ),
    ],
)
def test_schemas_past_openai_limits_get_no_grammar(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        schema_rules(schema, "big")


def test_a_tool_past_the_limits_runs_without_a_constraint() -> None:
    # 1,500 enum values: past the grammar's limit (a tool with more than 5,000 properties is
    # refused where it is built: tests/tools/test_schema_fuzz.py).
    codes = Tool.from_schema(
        "wide",
        {
            "type": "object",
            "properties": {
                "p0": {"type": "string", "enum": ["x", *(f"c{i}" for i in range(1500))]}
            },
            "required": ["p0"],
        },
        lambda arguments: f"{len(arguments)} arguments",
    )
    call = 'Thought: t\nAction: wide\nAction Input: {"p0": "x"}'
    agent, model = scripted_agent("text", "llama.cpp", [call, TEXT_FINAL], tools=[codes])
    result = agent.run("Use wide.")
    assert result.answer == "Sunny in Beijing."
    assert result.steps[0].actions[0].status == "ok"
    assert "grammar" not in model.payloads[0].get("extra_body", {})
