"""A tool's JSON Schema made self-contained, and the test of OpenAI's strict mode."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["meets_strict_mode", "schema_nodes", "strict_schema"]


def schema_nodes(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every object (mapping) in ``schema``, nested ones included, without recursion."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$defs``, drop titles and forbid extra properties on every object: a
    self-contained schema (a recursive model keeps its ``$ref``/``$defs``)."""
    schema = copy.deepcopy(schema)
    given_defs = schema.pop("$defs", {})
    defs: dict[str, Any] = given_defs if isinstance(given_defs, dict) else {}

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref[len("#/$defs/") :]
                if key in stack or not isinstance(defs.get(key), dict):
                    return node  # a cycle, a missing definition, or `true`/`false` kept as a $ref
                merged = {**defs[key], **{k: v for k, v in node.items() if k != "$ref"}}
                return resolve(merged, (*stack, key))
            out = {k: resolve(v, stack) for k, v in node.items() if k != "title"}
            if out.get("type") == "object" and "properties" in out:
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [resolve(v, stack) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema, ())
    if "$ref" in json.dumps(resolved):
        resolved["$defs"] = {k: resolve(v, (k,)) for k, v in defs.items()} if defs else given_defs
    resolved.setdefault("type", "object")
    resolved.setdefault("properties", {})
    resolved["additionalProperties"] = False
    return resolved


def meets_strict_mode(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema``: every object schema in it requires all
    of its properties and forbids others."""
    if isinstance(schema, list):
        return all(meets_strict_mode(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    props = schema.get("properties")
    is_object = schema.get("type") == "object" or isinstance(props, dict)
    props = props if isinstance(props, dict) else {}
    if is_object and (
        schema.get("additionalProperties") is not False
        or set(schema.get("required", [])) != set(props)
    ):
        return False
    defs = schema.get("$defs")
    children = [*props.values(), *(defs.values() if isinstance(defs, dict) else ())]
    keys = ("items", "prefixItems", "anyOf", "oneOf", "allOf")
    return all(meets_strict_mode(c) for c in [*children, *(schema[k] for k in keys if k in schema)])
