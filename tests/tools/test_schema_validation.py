"""A tool runs only on arguments that meet its whole JSON Schema.

Tools built by ``Tool.from_schema`` (seed 000's style, and every MCP tool) have their
arguments checked against the schema as written, with the ``jsonschema`` package; ``@tool``
functions by pydantic, which must refuse what the schema sent to the model forbids. A call
that fails is an ``invalid_arguments`` observation naming the field and the constraint, and
the function never runs. Every case runs through the whole agent on a scripted model, under
each protocol; the MCP cases call the real test server (tests/support/mcp_server.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field
from support.timing import assert_linear

from react_engine import (
    Agent,
    RunResult,
    ScriptedModel,
    Tool,
    ToolDefinitionError,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.tools.mcp import MCPServerStdio

PROTOCOLS = ["function_calling", "text", "structured"]
SERVER = Path(__file__).parents[1] / "support" / "mcp_server.py"

# Seed 000's weather tool, as its author defines it: a JSON Schema with an enum.
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Beijing", "Shanghai", "Guangzhou"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}

PRODUCT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "product_sku": {"type": "string", "minLength": 10, "maxLength": 16},
        "quantity": {"type": "integer", "minimum": 1, "exclusiveMaximum": 100},
        "step": {"type": "number", "multipleOf": 0.5},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "kind": {"const": "retail"},
        "note": {"type": ["string", "null"]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "maxItems": 3,
            "uniqueItems": True,
        },
        "address": {"$ref": "#/$defs/Address"},
    },
    "required": ["product_sku"],
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["street"],
            "additionalProperties": False,
        }
    },
}


class Recorder:
    """Schema-defined tools that record every call they really receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        def get_weather(arguments: dict[str, Any]) -> str:
            self.calls.append(("get_weather", arguments))
            return f"sunny in {arguments['city']}"

        def search_product(arguments: dict[str, Any]) -> str:
            self.calls.append(("search_product", arguments))
            return "found"

        self.tools = [
            Tool.from_schema("get_weather", WEATHER_SCHEMA, get_weather, description="Weather."),
            Tool.from_schema("search_product", PRODUCT_SCHEMA, search_product),
        ]


def call(protocol: str, name: str, arguments: dict[str, Any]) -> Any:
    """A reply calling ``name`` with ``arguments``, in the protocol's own form."""
    if protocol == "function_calling":
        return tool_call_reply((name, arguments))
    if protocol == "structured":
        return json.dumps({"thought": "t", "action": {"tool": name, "arguments": arguments}})
    return f"Thought: I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def answer(protocol: str, text: str = "done") -> Any:
    if protocol == "function_calling":
        return reply(text)
    if protocol == "structured":
        return json.dumps({"thought": "t", "action": {"final_answer": text}})
    return f"Final Answer: {text}"


def run(protocol: str, tools: list[Tool], *replies: Any) -> tuple[RunResult, ScriptedModel]:
    model = ScriptedModel([*replies, answer(protocol)])
    agent = Agent("m", tools, client=model, protocol=protocol, max_consecutive_errors=5)
    return agent.run("q"), model


def actions(result: RunResult) -> list[Any]:
    return [a for s in result.steps for a in s.actions]


def sent_after_first_step(model: ScriptedModel) -> str:
    return json.dumps(model.payloads[1]["messages"], ensure_ascii=False)


# --- the three first cases, and every keyword, under every protocol --------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("get_weather", {"city": "ShenZhen"}, 'city: Input should be "Beijing", "Shanghai"'),
        ("get_weather", {"city": "Beijing", "unit": "kelvin"}, "unit: Input should be"),
        (
            "search_product",
            {"product_sku": "A"},
            "product_sku: String should have at least 10 characters",
        ),
    ],
)
def test_the_issues_arguments_never_reach_the_function(
    protocol: str, name: str, arguments: dict[str, Any], expected: str
) -> None:
    recorder = Recorder()
    result, model = run(protocol, recorder.tools, call(protocol, name, arguments))
    (action,) = actions(result)
    assert action.status == "invalid_arguments"
    assert expected in str(action.error)
    assert recorder.calls == []
    # The model reads which field broke which constraint.
    assert expected.replace('"', '\\"') in sent_after_first_step(model)
    assert result.answer == "done"


FAILURES: list[tuple[dict[str, Any], list[str]]] = [
    ({"product_sku": "ABCDEFGHIJKLMNOPQ"}, ["product_sku: String should have at most 16"]),
    (
        {"product_sku": "ABCDEFGHIJ", "quantity": 0},
        ["quantity: Input should be greater than or equal to 1"],
    ),
    ({"product_sku": "ABCDEFGHIJ", "quantity": 100}, ["quantity: Input should be less than 100"]),
    ({"product_sku": "ABCDEFGHIJ", "quantity": 2.5}, ["quantity: Input should be a valid integer"]),
    ({"product_sku": "ABCDEFGHIJ", "step": 0.3}, ["step: Input should be a multiple of 0.5"]),
    (
        {"product_sku": "ABCDEFGHIJ", "code": "abc"},
        ['code: String should match pattern "^[A-Z]{3}$"'],
    ),
    ({"product_sku": "ABCDEFGHIJ", "kind": "wholesale"}, ['kind: Input should be "retail"']),
    ({"product_sku": "ABCDEFGHIJ", "note": 5}, ["note: Input should be a valid string or null"]),
    ({"product_sku": "ABCDEFGHIJ", "tags": []}, ["tags: Array should have at least 1 item"]),
    (
        {"product_sku": "ABCDEFGHIJ", "tags": ["a", "b", "c", "d"]},
        ["tags: Array should have at most 3 items"],
    ),
    ({"product_sku": "ABCDEFGHIJ", "tags": ["a", "a"]}, ["tags: Array items should be unique"]),
    (
        {"product_sku": "ABCDEFGHIJ", "tags": ["a", ""]},
        ["tags.1: String should have at least 1 character"],
    ),
    ({"product_sku": "ABCDEFGHIJ", "address": {}}, ["address.street: Field required"]),
    (
        {"product_sku": "ABCDEFGHIJ", "address": {"street": "x", "city": "y"}},
        ["address.city: unexpected field"],
    ),
    ({"product_sku": "ABCDEFGHIJ", "colour": "red"}, ["colour: unexpected field"]),
    ({}, ["product_sku: Field required"]),
    (
        {"product_sku": 7, "quantity": -1, "tags": "a"},
        [
            "product_sku: Input should be a valid string",
            "quantity: Input should be greater than or equal to 1",
            "tags: Input should be a valid array",
        ],
    ),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("arguments", "expected"), FAILURES)
def test_every_keyword_is_enforced(
    protocol: str, arguments: dict[str, Any], expected: list[str]
) -> None:
    recorder = Recorder()
    result, _ = run(protocol, recorder.tools, call(protocol, "search_product", arguments))
    (action,) = actions(result)
    assert (action.status, recorder.calls) == ("invalid_arguments", [])
    for part in expected:
        assert part in str(action.error)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_valid_arguments_reach_the_function_exactly_as_written(protocol: str) -> None:
    recorder = Recorder()
    arguments = {
        "product_sku": "ABCDEFGHIJ",
        "quantity": 3,
        "step": 1.5,
        "code": "ABC",
        "kind": "retail",
        "note": None,
        "tags": ["a", "b"],
        "address": {"street": "1 Main St"},
    }
    result, _ = run(
        protocol,
        recorder.tools,
        call(protocol, "search_product", arguments),
        call(protocol, "get_weather", {"city": "Beijing", "unit": "celsius"}),
    )
    assert [a.status for a in actions(result)] == ["ok", "ok"]
    assert recorder.calls == [
        ("search_product", arguments),
        ("get_weather", {"city": "Beijing", "unit": "celsius"}),
    ]


def test_a_quoted_number_or_boolean_at_the_top_level_is_read_as_before() -> None:
    seen: list[dict[str, Any]] = []
    t = Tool.from_schema(
        "page",
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "maximum": 9},
                "x": {"type": "number"},
                "flag": {"type": "boolean"},
                "label": {"type": "string"},
            },
        },
        seen.append,
    )
    asyncio.run(t.ainvoke(t.check({"n": "5", "x": "2.5", "flag": "true", "label": "7"})))
    assert seen == [{"n": 5, "x": 2.5, "flag": True, "label": "7"}]
    # Only a JSON number converts, and the converted value is still checked.
    for bad, expected in [
        ({"n": "5.5"}, "n: Input should be a valid integer"),
        ({"n": "12"}, "n: Input should be less than or equal to 9"),
        ({"x": "inf"}, "x: Input should be a valid number"),
        ({"flag": "yes"}, "flag: Input should be a valid boolean"),
    ]:
        with pytest.raises(Exception, match=expected):
            t.check(bad)


def test_composed_schemas_type_unions_and_recursive_refs() -> None:
    seen: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "allOf": [
            {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/node"}]}}},
        ],
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                "additionalProperties": False,
            }
        },
    }
    t = Tool.from_schema("composed", schema, seen.append)
    tree = {"a": 1, "b": {"child": {"child": {"v": 3}}}}
    asyncio.run(t.ainvoke(t.check(tree)))
    assert seen == [tree]
    # Keys named in an allOf branch are the schema's own, and others still unknown.
    with pytest.raises(Exception, match="Unevaluated properties are not allowed"):
        t.check({"a": 1, "z": 2})
    with pytest.raises(Exception, match=r"b: Input matches none of the allowed schemas"):
        t.check({"a": 1, "b": {"child": {"v": "x"}}})


def test_a_schema_that_allows_other_keys_passes_them_on() -> None:
    seen: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
    t = Tool.from_schema("open", schema, seen.append)
    asyncio.run(t.ainvoke(t.check({"q": "x", "field_0": 3})))
    assert seen == [{"q": "x", "field_0": 3}]
    with pytest.raises(Exception, match="other: Input should be a valid integer"):
        t.check({"q": "x", "other": "y"})


def test_the_check_uses_the_schema_as_written_not_the_strict_copy_sent() -> None:
    # The copy sent to the API closes every nested object ("additionalProperties": false);
    # where the author's schema leaves one open, its keys reach the tool, as the tool says.
    seen: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "properties": {"meta": {"type": "object", "properties": {"id": {"type": "string"}}}},
    }
    t = Tool.from_schema("meta", schema, seen.append)
    assert t.parameters["properties"]["meta"]["additionalProperties"] is False
    asyncio.run(t.ainvoke(t.check({"meta": {"id": "1", "extra": True}})))
    assert seen == [{"meta": {"id": "1", "extra": True}}]


# --- hostile schemas -----------------------------------------------------------------------


def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "properties": {"a": {"type": "strnig"}}}, "properties.a.type"),
        ({"type": "object", "properties": {"a": {"minLength": -1}}}, "minLength"),
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "pattern"),
        ({"type": "object", "properties": []}, "properties"),
        ({"type": "object", "required": "a"}, "required"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
            "does not resolve within the schema",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
            "does not resolve within the schema",
        ),
        ({"type": "object", "properties": {"a": {"type": "string", "x": {1, 2}}}}, "not JSON"),
        # A property may be named like a keyword whose value is data.
        (
            {"type": "object", "properties": {"enum": {"$ref": "#/$defs/gone"}}},
            "does not resolve within the schema",
        ),
    ],
)
def test_an_invalid_schema_is_a_clear_error_where_the_tool_is_built(
    schema: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ToolDefinitionError, match="not a usable JSON Schema") as caught:
        Tool.from_schema("bad", schema, echo)
    assert expected in str(caught.value)


@pytest.mark.parametrize("depth", [101, 1000, 50_000])
def test_a_schema_nested_too_deep_is_refused_not_a_recursion_error(depth: int) -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = {"type": "object", "properties": {"a": node}}
    with pytest.raises(ToolDefinitionError, match="nests deeper than 100 levels"):
        Tool.from_schema("deep", node, echo)


def test_huge_schemas_are_built_and_checked_in_good_time() -> None:
    # 5,000 properties in all: OpenAI's limit, and ours (one more is refused: test_schema_fuzz).
    properties = {f"p{i}": {"type": "integer", "minimum": i} for i in range(4999)}
    properties["city"] = {"type": "string", "enum": [f"city{i}" for i in range(100_000)]}
    t = Tool.from_schema("huge", {"type": "object", "properties": properties}, echo)
    assert asyncio.run(t.ainvoke(t.check({"p10": 10, "city": "city99999"}))) == {
        "p10": 10,
        "city": "city99999",
    }
    with pytest.raises(Exception, match=r"city: Input should be \"city0\".*\(99990 more\)"):
        t.check({"city": "nowhere"})


def test_a_backtracking_pattern_cannot_stall_the_run() -> None:
    t = Tool.from_schema(
        "redos", {"type": "object", "properties": {"s": {"pattern": "^(a|aa)+$"}}}, echo
    )
    with pytest.raises(Exception, match="s: String took too long to match the pattern"):
        t.check({"s": "a" * 1000 + "!"})  # with the re module: longer than a lifetime


def test_a_reference_loop_is_an_observation_not_a_crash() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/loop"}},
        "$defs": {"loop": {"$ref": "#/$defs/loop"}},
    }
    recorder: list[Any] = []
    t = Tool.from_schema("loop", schema, recorder.append)
    result, _ = run("function_calling", [t], call("function_calling", "loop", {"a": 1}))
    (action,) = actions(result)
    assert action.status == "invalid_arguments"
    assert "the tool's schema refers to itself without end" in str(action.error)
    assert recorder == []


# --- @tool functions: pydantic refuses what the schema sent forbids --------------------------


class Guest(BaseModel):
    name: str


def guest_tool(seen: list[Any]) -> Tool:
    @tool
    def book(
        city: Literal["Beijing", "Shanghai"],
        sku: Annotated[str, Field(min_length=10, pattern="^[A-Z0-9]+$")],
        nights: Annotated[int, Field(ge=1, le=14)] = 1,
        guests: Annotated[list[Guest], Field(max_length=2)] = [],  # noqa: B006
        lead: Guest | None = None,
    ) -> str:
        """Book a room."""
        seen.append((city, sku, nights, guests, lead))
        return "booked"

    return book


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"city": "ShenZhen", "sku": "ABCDEFGHIJ"},
            "city: Input should be 'Beijing' or 'Shanghai'",
        ),
        ({"city": "Beijing", "sku": "A"}, "sku: String should have at least 10 characters"),
        ({"city": "Beijing", "sku": "abcdefghij"}, "sku: String should match pattern"),
        (
            {"city": "Beijing", "sku": "ABCDEFGHIJ", "nights": 15},
            "nights: Input should be less than or equal to 14",
        ),
        (
            {"city": "Beijing", "sku": "ABCDEFGHIJ", "guests": [{"name": "a"}] * 3},
            "guests: List should have at most 2 items",
        ),
        # Unknown keys in nested objects: the schema sent forbids them, and pydantic would
        # drop them without a word.
        (
            {"city": "Beijing", "sku": "ABCDEFGHIJ", "guests": [{"name": "a", "age": 3}]},
            "guests.0.age: unexpected field",
        ),
        (
            {"city": "Beijing", "sku": "ABCDEFGHIJ", "lead": {"name": "a", "vip": True}},
            "lead.vip: unexpected field",
        ),
    ],
)
def test_tool_functions_refuse_what_their_schema_forbids(
    protocol: str, arguments: dict[str, Any], expected: str
) -> None:
    seen: list[Any] = []
    book = guest_tool(seen)
    props = book.parameters["properties"]
    assert props["guests"]["items"]["additionalProperties"] is False
    assert props["city"]["enum"] == ["Beijing", "Shanghai"]
    result, _ = run(protocol, [book], call(protocol, "book", arguments))
    (action,) = actions(result)
    assert action.status == "invalid_arguments"
    assert expected in str(action.error)
    assert seen == []


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def test_a_tool_function_whose_model_allows_other_keys_keeps_them() -> None:
    seen: list[Loose] = []

    @tool
    def keep(item: Loose) -> str:
        """Keep an item."""
        seen.append(item)
        return "kept"

    assert keep.parameters["properties"]["item"]["additionalProperties"] is True
    asyncio.run(keep.ainvoke(keep.check({"item": {"name": "a", "size": 2}})))
    assert seen[0].model_dump() == {"name": "a", "size": 2}


# --- MCP tools, on the real test server ----------------------------------------------------


def mcp_server(tmp_path: Path, **env: str) -> tuple[MCPServerStdio, Path]:
    log = tmp_path / "calls.jsonl"
    return MCPServerStdio(
        sys.executable, [str(SERVER)], env={"MCP_TEST_CALLLOG": str(log), **env}
    ), log


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_mcp_tools_schema_is_enforced_before_the_server_is_called(
    protocol: str, tmp_path: Path
) -> None:
    server, log = mcp_server(tmp_path)
    bad = {
        "city": "ShenZhen",
        "product_sku": "A",
        "nights": 30,
        "guests": [{"name": "Li", "room": 2}],
    }
    good = {"city": "Beijing", "product_sku": "SKU-000001", "nights": 2}
    model = ScriptedModel(
        [call(protocol, "book_room", bad), call(protocol, "book_room", good), answer(protocol)]
    )
    agent = Agent("m", mcp_servers=[server], client=model, protocol=protocol)
    result = agent.run("Book a room")
    first, second = actions(result)
    assert first.status == "invalid_arguments"
    for part in [
        'city: Input should be "Beijing", "Shanghai" or "Guangzhou"',
        "product_sku: String should have at least 10 characters",
        "nights: Input should be less than or equal to 14",
        "guests.0.room: unexpected field",
    ]:
        assert part in str(first.error)
    assert (second.status, second.observation) == (
        "ok",
        "booked SKU-000001 in Beijing for 2 nights",
    )
    # The server got the valid call only.
    assert logged(log) == [{**good, "guests": None}]


def test_an_mcp_tool_with_an_invalid_schema_is_left_out_and_the_others_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = mcp_server(tmp_path, MCP_TEST_BROKEN_TOOL="1")
    model = ScriptedModel([tool_call_reply(("add", {"a": 1, "b": 2})), reply("3")])
    agent = Agent("m", mcp_servers=[server], client=model)
    with caplog.at_level(logging.WARNING, logger="react_engine"):
        result = agent.run("1 + 2?")
    assert result.answer == "3"
    assert [(a.tool, a.status, a.observation) for a in actions(result)] == [("add", "ok", "3")]
    sent = [t["function"]["name"] for t in model.payloads[0]["tools"]]
    assert "broken" not in sent and {"add", "book_room"} <= set(sent)
    assert any("'broken'" in r.getMessage() and "strnig" in r.getMessage() for r in caplog.records)


def test_a_plain_input_for_a_one_argument_tool_is_recorded_under_its_json_name() -> None:
    seen: list[dict[str, Any]] = []
    t = Tool.from_schema(
        "lookup",
        {"type": "object", "properties": {"search-term": {"type": "string", "minLength": 2}}},
        seen.append,
    )
    result, _ = run(
        "text",
        [t],
        "Thought: look it up.\nAction: lookup\nAction Input: cats",
        "Thought: again.\nAction: lookup\nAction Input: c",
    )
    first, second = actions(result)
    assert (first.status, first.arguments) == ("ok", {"search-term": "cats"})
    assert seen == [{"search-term": "cats"}]
    assert second.status == "invalid_arguments"
    assert "search-term: String should have at least 2 characters" in str(second.error)


@pytest.mark.parametrize(
    ("dialect", "bound", "expected"),
    [
        (
            "http://json-schema.org/draft-04/schema#",
            {"minimum": 0, "exclusiveMinimum": True},
            "greater than 0",
        ),
        ("http://json-schema.org/draft-07/schema#", {"exclusiveMinimum": 0}, "greater than 0"),
        ("https://json-schema.org/draft/2020-12/schema", {"exclusiveMinimum": 0}, "greater than 0"),
    ],
)
def test_the_schemas_own_dialect_is_used(
    dialect: str, bound: dict[str, Any], expected: str
) -> None:
    schema = {
        "$schema": dialect,
        "type": "object",
        "properties": {"n": {"type": "number", **bound}},
    }
    t = Tool.from_schema("dialect", schema, echo)
    assert asyncio.run(t.ainvoke(t.check({"n": 1}))) == {"n": 1}
    with pytest.raises(Exception, match=f"n: Input should be {expected}"):
        t.check({"n": 0})
    with pytest.raises(Exception, match="extra: unexpected field"):
        t.check({"n": 1, "extra": 1})


def test_a_tool_functions_schema_and_its_validation_agree() -> None:
    """What the schema sent to the model admits is what pydantic lets through, and the
    reverse, for JSON values of the declared types (pydantic's lax conversions, such as
    ``"5"`` for an ``int``, are outside this check: docs/reliability.md)."""
    import jsonschema

    seen: list[Any] = []
    book = guest_tool(seen)
    sent = jsonschema.Draft202012Validator(book.parameters)
    base = {"city": "Beijing", "sku": "ABCDEFGHIJ"}
    cases = [
        base,
        {**base, "city": "Shanghai"},
        {**base, "city": "ShenZhen"},
        {**base, "sku": "ABCDEFGHI"},
        {**base, "sku": "ABCDEFGHIJ" * 5},
        {**base, "sku": "ABCDEFGHI-"},
        {**base, "nights": 1},
        {**base, "nights": 14},
        {**base, "nights": 0},
        {**base, "nights": 15},
        {**base, "guests": []},
        {**base, "guests": [{"name": "a"}, {"name": "b"}]},
        {**base, "guests": [{"name": "a"}] * 3},
        {**base, "guests": [{"name": "a", "age": 3}]},
        {**base, "guests": [{}]},
        {**base, "lead": None},
        {**base, "lead": {"name": "a"}},
        {**base, "lead": {"name": "a", "vip": True}},
        {**base, "other": 1},
        {"city": "Beijing"},
    ]
    for arguments in cases:
        try:
            book.check(arguments)
            accepted = True
        except Exception:
            accepted = False
        assert accepted == sent.is_valid(arguments), arguments


def test_unique_items_and_enums_on_long_arrays_are_checked_in_linear_time() -> None:
    schema = {
        "type": "object",
        "properties": {
            "xs": {"type": "array", "uniqueItems": True},
            "codes": {"type": "array", "items": {"enum": [f"v{i}" for i in range(10_000)]}},
        },
    }
    t = Tool.from_schema("long", schema, echo)

    def unique(n: int) -> Callable[[], object]:
        items = [{"k": i} for i in range(n)]
        return lambda: t.check({"xs": items})

    def enum(n: int) -> Callable[[], object]:  # n codes allowed, n // 10 checked
        codes = [f"v{n - 1 - i % 10}" for i in range(n // 10)]
        one = {"codes": {"type": "array", "items": {"enum": [f"v{i}" for i in range(n)]}}}
        tool = Tool.from_schema("codes", {"type": "object", "properties": one}, echo)
        return lambda: tool.check({"codes": codes})

    # Pairwise checks are quadratic: 5000 items took 45 s with jsonschema's own check, and
    # 1000 codes against 10,000 values 1.6 s.
    assert_linear(unique, 5000)
    assert_linear(enum, 10_000)
    # JSON Schema's equality: 1 equals 1.0, key order does not count, true is not 1.
    for duplicated in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}]):
        with pytest.raises(Exception, match="xs: Array items should be unique"):
            t.check({"xs": duplicated})
    distinct = [1, True, "1", [1], {"a": 1}, None, 0, False]
    assert asyncio.run(t.ainvoke(t.check({"xs": distinct}))) == {"xs": distinct}
    with pytest.raises(Exception, match=r"codes.1: Input should be \"v0\""):
        t.check({"codes": ["v1", "v10000"]})


def test_without_jsonschema_a_schema_tool_is_refused_where_it_is_built() -> None:
    # jsonschema is the `schema` extra (and comes with `mcp`): never a silent no-check.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['jsonschema'] = None\n"
        "from react_engine import Tool, ToolDefinitionError\n"
        "schema = {'type': 'object', 'properties': {'city': {'enum': ['Beijing']}}}\n"
        "try:\n"
        "    Tool.from_schema('weather', schema, lambda arguments: 'sunny')\n"
        "except ToolDefinitionError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "needs the jsonschema package" in out
    assert "pip install 'react-engine[schema]'" in out
