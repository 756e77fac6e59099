"""Tools: schemas from signatures, validation, definition-time errors."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from react_engine import Tool, ToolDefinitionError, tool
from react_engine.tools import ToolArgumentsError, as_tools
from react_engine.tools.schema import meets_strict_mode


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


class Address(BaseModel):
    city: str
    zip_code: str | None = None


def test_schema_from_signature_and_docstring() -> None:
    @tool
    def get_weather(location: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict:  # type: ignore[type-arg]
        """Current weather for a city.

        Args:
            location: City name, e.g. "Beijing".
            unit: Temperature unit.
        """
        return {}

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a city."
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": 'City name, e.g. "Beijing".'},
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "default": "celsius",
                "description": "Temperature unit.",
            },
        },
        "required": ["location"],
        "additionalProperties": False,
    }
    assert get_weather.openai_schema()["type"] == "function"
    assert "strict" not in get_weather.openai_schema()["function"]


def test_enum_annotated_constraints_and_nested_models() -> None:
    @tool
    def ship(
        to: Address,
        unit: Unit,
        count: Annotated[int, Field(ge=1, le=10, description="How many parcels.")],
    ) -> str:
        """Ship parcels."""
        return "ok"

    props = ship.parameters["properties"]
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert props["count"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "description": "How many parcels.",
    }
    # Nested models are inlined, without titles, and forbid extra properties too.
    assert props["to"]["additionalProperties"] is False
    assert props["to"]["required"] == ["city"]
    assert "$defs" not in ship.parameters
    assert "title" not in str(ship.parameters)
    # Address.zip_code is optional: OpenAI's strict mode would reject the nested object
    # (it must list every property as required), so the tool is not sent as strict.
    assert ship.strict is False
    assert "strict" not in ship.openai_schema()["function"]


class _FullAddress(BaseModel):
    city: str
    zip_code: str | None  # nullable, but required: strict mode allows it


class _Node(BaseModel):
    name: str
    children: list[_Node]


def _tool_of(annotation: Any) -> Tool:
    def fn(x: Any) -> str:
        """Doc."""
        return ""

    fn.__annotations__ = {"x": annotation, "return": str}
    return tool(fn)


@pytest.mark.parametrize(
    ("annotation", "strict"),
    [
        (int, True),
        (_FullAddress, True),
        (list[_FullAddress], True),
        (_FullAddress | None, True),
        (_Node, True),  # recursive: kept as $defs, every def meets the rules
        (Address, False),  # a nested optional property
        (list[Address], False),
        (Address | int, False),
        (dict[str, int], False),  # free-form keys
    ],
)
def test_strict_is_sent_only_when_strict_mode_accepts_the_schema(
    annotation: Any, strict: bool
) -> None:
    t = _tool_of(annotation)
    assert t.strict is strict
    assert t.openai_schema()["function"].get("strict", False) is strict
    assert meets_strict_mode(t.parameters) is strict


def test_a_top_level_optional_parameter_is_never_strict() -> None:
    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search."""
        return ""

    assert search.strict is False
    assert "strict" not in search.openai_schema()["function"]


def test_validation_uses_the_same_model() -> None:
    @tool
    def count(n: Annotated[int, Field(ge=0)]) -> int:
        """Count."""
        return n

    assert count.check({"n": 3}).n == 3  # type: ignore[attr-defined]
    with pytest.raises(ToolArgumentsError, match=r"n: Input should be greater than or equal to 0"):
        count.check({"n": -1})
    with pytest.raises(ToolArgumentsError, match="unexpected field"):
        count.check({"n": 1, "extra": 2})
    with pytest.raises(ToolArgumentsError, match="n: Field required"):
        count.check({})


def test_plain_string_input_maps_to_a_single_argument() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    assert search.check("cats").query == "cats"  # type: ignore[attr-defined]

    @tool
    def two(a: str, b: str) -> str:
        """Two."""
        return a + b

    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        two.check("cats")


def test_sync_and_async_tools_run() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    async def mul(a: int, b: int) -> int:
        """Multiply."""
        await asyncio.sleep(0)
        return a * b

    assert not add.is_async and mul.is_async
    assert asyncio.run(add.ainvoke(add.check({"a": 2, "b": 3}))) == 5
    assert asyncio.run(mul.ainvoke(mul.check({"a": 2, "b": 3}))) == 6
    assert add(2, 3) == 5  # still callable as a function


def test_tool_from_pydantic_model_plus_function() -> None:
    class Query(BaseModel):
        """Look something up."""

        term: str
        limit: int = 5

    def lookup(q: Query) -> str:
        return f"{q.term}:{q.limit}"

    t = Tool.from_model(Query, lookup)
    assert t.pass_model
    assert t.description == "Look something up."
    assert asyncio.run(t.ainvoke(t.check({"term": "x"}))) == "x:5"

    def lookup_kwargs(term: str, limit: int = 5) -> str:
        return f"{term}/{limit}"

    t2 = Tool.from_model(Query, lookup_kwargs, name="lookup")
    assert asyncio.run(t2.ainvoke(t2.check({"term": "y", "limit": 2}))) == "y/2"


def test_definition_errors_are_raised_where_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="no type annotation"):

        @tool
        def untyped(x) -> str:  # type: ignore[no-untyped-def]
            """X."""
            return ""

    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool
        def star(*args: int) -> str:
            """X."""
            return ""

    with pytest.raises(ToolDefinitionError, match="documents ghost"):

        @tool
        def documented(a: int) -> str:
            """X.

            Args:
                a: fine.
                ghost: not a parameter.
            """
            return ""

    class M(BaseModel):
        a: int
        b: int

    def takes_a(a: int) -> int:
        """Give a back."""
        return a

    with pytest.raises(ToolDefinitionError, match="fields the function does not take: b"):
        Tool.from_model(M, takes_a)

    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_function(lambda: None, name="bad name!")

    with pytest.raises(ToolDefinitionError, match="two tools are named"):
        as_tools([takes_a, takes_a])


def test_sphinx_docstrings() -> None:
    @tool
    def f(a: int, b: str = "x") -> str:
        """Do f.

        :param a: the first.
        :param b: the second.
        """
        return ""

    assert f.parameters["properties"]["a"]["description"] == "the first."
    assert f.parameters["properties"]["b"]["description"] == "the second."
    assert f.description == "Do f."


def test_tool_options() -> None:
    @tool(name="danger", requires_approval=True, timeout=2.0, summarize=lambda r: "short")
    def delete_everything(path: str) -> str:
        """Delete a path."""
        return path

    assert delete_everything.name == "danger"
    assert delete_everything.requires_approval
    assert delete_everything.timeout == 2.0
    assert delete_everything.summarize is not None


# --- tools from a JSON Schema (MCP servers' tools) ---------------------------------------


SEARCH_SCHEMA: dict[str, Any] = {
    "title": "searchArguments",
    "type": "object",
    "properties": {
        "query": {"title": "Query", "type": "string", "description": "What to look for."},
        "limit": {"type": "integer", "default": 10},
        "json": {"type": "boolean"},
        "max-age": {"type": ["number", "null"]},
        "filter": {"$ref": "#/$defs/Filter"},
    },
    "required": ["query"],
    "$defs": {"Filter": {"type": "object", "properties": {"tag": {"type": "string"}}}},
}


def test_tool_from_a_json_schema() -> None:
    calls: list[dict[str, Any]] = []

    async def search(arguments: dict[str, Any]) -> str:
        calls.append(arguments)
        return "found"

    t = Tool.from_schema("search", SEARCH_SCHEMA, search, description="Search the docs.")
    # The schema as sent: self-contained and without titles, closed to other keys.
    assert t.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 10},
            "json": {"type": "boolean"},
            "max-age": {"type": ["number", "null"]},
            "filter": {
                "type": "object",
                "properties": {"tag": {"type": "string"}},
                "additionalProperties": False,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert not t.strict  # optional arguments
    assert t.openai_schema()["function"]["description"] == "Search the docs."
    assert t.argument_names == ["query", "limit", "json", "max-age", "filter"]

    # Only the arguments given reach the function, under their JSON names.
    validated = t.check({"query": "mcp", "json": True, "max-age": 2, "filter": {"tag": "x"}})
    assert asyncio.run(t.ainvoke(validated)) == "found"
    assert calls == [{"query": "mcp", "json": True, "max-age": 2.0, "filter": {"tag": "x"}}]
    asyncio.run(t.ainvoke(t.check({"query": "q", "max-age": None})))
    assert calls[-1] == {"query": "q", "max-age": None}

    with pytest.raises(ToolArgumentsError, match="query: Field required"):
        t.check({"limit": 3})
    with pytest.raises(ToolArgumentsError, match="limit: Input should be a valid integer"):
        t.check({"query": "q", "limit": "many"})
    with pytest.raises(ToolArgumentsError, match="colour: unexpected field"):
        t.check({"query": "q", "colour": "red"})


def test_tool_from_a_json_schema_one_argument_and_open_schemas() -> None:
    def echo(arguments: dict[str, Any]) -> dict[str, Any]:
        return arguments

    one = Tool.from_schema(
        "lookup", {"type": "object", "properties": {"word": {"type": "string"}}}, echo
    )
    # The text protocol's plain-string input, for a one-argument tool.
    assert asyncio.run(one.ainvoke(one.check("cat"))) == {"word": "cat"}
    assert one.strict is False  # "word" is not required

    open_schema = {"type": "object", "properties": {}, "additionalProperties": True}
    anything = Tool.from_schema("anything", open_schema, echo)
    assert anything.parameters["additionalProperties"] is True
    assert asyncio.run(anything.ainvoke(anything.check({"x": 1, "y": [2]}))) == {
        "x": 1,
        "y": [2],
    }

    with pytest.raises(ToolDefinitionError, match="JSON Schema of an object"):
        Tool.from_schema("bad", {"type": "string"}, echo)
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_schema("files.read", {"type": "object"}, echo)


def test_the_constructors_share_one_options_type_and_refuse_a_misspelt_option() -> None:
    """The options of @tool, from_function, from_model and from_schema are one type
    (ToolOptions); a misspelt one is an error where the tool is defined, not ignored."""
    from react_engine.tools import ToolOptions

    class Args(BaseModel):
        x: int

    def f(x: int) -> int:
        """Echo x."""
        return x

    options: ToolOptions = {"requires_approval": True, "timeout": 2.0}
    built = [
        tool(**options)(f),
        Tool.from_function(f, **options),
        Tool.from_model(Args, f, **options),
        Tool.from_schema("f", {"type": "object"}, lambda a: a, **options),
    ]
    assert [(t.requires_approval, t.timeout) for t in built] == [(True, 2.0)] * 4
    with pytest.raises(TypeError, match="requires_aproval"):
        tool(requires_aproval=True)(f)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="timout"):
        Tool.from_schema("f", {"type": "object"}, lambda a: a, timout=3)  # type: ignore[call-arg]
