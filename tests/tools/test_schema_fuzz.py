"""Hostile tool schemas: depth, width, odd names, ``$ref`` cycles, wrong types.

Each generated schema goes to tool construction (``Tool.from_schema``, as every MCP tool
does) and, when a tool comes out, to every grammar style: the llama.cpp/vLLM GBNF of the
text protocol, the structured step's schema and its grammar. The only errors allowed are
our own typed ones (``ToolDefinitionError`` where the tool is built, ``GrammarError`` where
a grammar is refused, and the request then goes without one): never ``RecursionError``,
``KeyError``, ``TypeError`` or any other foreign exception. ``make fuzz`` runs it long.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fuzzing import PROFILE

from react_engine import Tool, ToolDefinitionError
from react_engine.tools.schema import strict_schema
from react_engine.transport.grammar import GrammarError, react_grammar, schema_grammar, step_schema

pytestmark = pytest.mark.slow  # generated hostile schemas (hypothesis)

odd_names = st.sampled_from(
    ["a", "", " ", "with space", "dot.name", "$ref", "properties", "ünï", "-", "0", "a" * 300]
) | st.text(max_size=12)

leaf_types = st.sampled_from(
    ["string", "integer", "number", "boolean", "null", "object", "array", "decimal", 5, None]
)


def schemas(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.fixed_dictionaries({"type": leaf_types}),
        st.fixed_dictionaries({"enum": st.lists(st.integers() | st.text(max_size=5), max_size=4)}),
        st.fixed_dictionaries({"const": st.integers() | st.text(max_size=5)}),
        st.fixed_dictionaries(
            {"$ref": st.sampled_from(["#/$defs/a", "#/$defs/b", "#/x", "http://x"])}
        ),
        st.just(True),
        st.just({}),
        st.integers(),
        st.text(max_size=4),
    )

    def nest(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.fixed_dictionaries(
                {
                    "type": st.just("object"),
                    "properties": st.dictionaries(odd_names, children, max_size=4),
                },
                optional={
                    "required": st.lists(odd_names, max_size=3),
                    "additionalProperties": st.booleans() | children,
                },
            ),
            st.fixed_dictionaries(
                {"type": st.just("array"), "items": children},
                optional={"minItems": st.integers(-2, 3), "maxItems": st.integers(-1, 3)},
            ),
            st.fixed_dictionaries({"anyOf": st.lists(children, max_size=3)}),
            st.fixed_dictionaries({"allOf": st.lists(children, max_size=2)}),
            st.fixed_dictionaries({"type": st.lists(leaf_types, max_size=3)}),
        )

    return st.recursive(leaf, nest, max_leaves=max_leaves)


def top_level(body: Any, defs: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"x": body}}
    if defs:
        schema["$defs"] = defs
    return schema


def nested(depth: int, width: int) -> dict[str, Any]:
    """An object ``depth`` levels deep with ``width`` properties at each level."""
    schema: dict[str, Any] = {"type": "string"}
    for level in range(depth):
        schema = {
            "type": "object",
            "properties": {f"p{level}_{i}": schema for i in range(width)},
        }
    return schema


def exercise(schema: Any) -> None:
    try:
        built = Tool.from_schema("fuzzed", schema, lambda arguments: "ok")
    except ToolDefinitionError:
        return
    entry = built.openai_schema()
    json.dumps(entry)  # what goes on the wire serialises
    for grammar in (
        lambda: react_grammar([entry]),
        lambda: react_grammar([entry], allow_final=False),
        lambda: schema_grammar(step_schema([entry]), "step"),
    ):
        with contextlib.suppress(GrammarError):
            grammar()
    json.dumps(step_schema([entry]))


@settings(PROFILE)
@given(body=schemas(), defs=st.dictionaries(st.sampled_from(["a", "b"]), schemas(4), max_size=2))
def test_generated_schemas_raise_only_our_errors(body: Any, defs: dict[str, Any]) -> None:
    exercise(top_level(body, defs))


@settings(PROFILE)
@given(
    raw=st.recursive(
        st.none() | st.integers() | st.text(max_size=3),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    )
)
def test_schemas_that_are_not_schemas_raise_only_our_errors(raw: Any) -> None:
    exercise(raw)


def test_ref_cycles_and_self_references() -> None:
    exercise(
        {
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "next": {"$ref": "#/$defs/node"},
                        "other": {"$ref": "#/$defs/loop"},
                    },
                },
                "loop": {"$ref": "#/$defs/loop"},
            },
        }
    )


def test_boolean_definitions_and_definitions_that_are_not_a_mapping() -> None:
    # JSON Schema allows `true` / `false` as a schema; a $ref to one is kept, not inlined
    # (hypothesis found `{"a": true}` raising TypeError in strict_schema).
    for defs in ({"a": True}, {"a": False}, [1], 5):
        schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "$defs": defs}
        exercise(schema)
    built = strict_schema(
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "$defs": {"a": True}}
    )
    assert built["properties"]["x"] == {"$ref": "#/$defs/a"} and built["$defs"] == {"a": True}


def test_deep_and_wide_schemas() -> None:
    for depth, width in ((1, 6000), (30, 1), (101, 1), (400, 1), (3, 40)):
        exercise(nested(depth, width))


def test_a_schema_past_openais_property_limit_is_refused_where_it_is_built() -> None:
    # 40 x 40 x 40 properties (64,000 in all): checking it took over a minute.
    import pytest

    for schema in (nested(1, 5001), nested(3, 40)):
        with pytest.raises(ToolDefinitionError, match="more than 5000 properties"):
            Tool.from_schema("wide", schema, lambda arguments: "ok")
