"""Checking a tool call's arguments against the tool's whole JSON Schema (``jsonschema``).

An argument the schema does not name is refused unless the schema allows other keys at its
top level; ``format`` stays an annotation. Failures are short lines for the model, in
pydantic's words.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final

import regex

from ..errors import ToolDefinitionError
from ..nesting import exceeds_depth
from .schema import schema_nodes

__all__ = ["MAX_SCHEMA_DEPTH", "MAX_SCHEMA_PROPERTIES", "SchemaCheck", "schema_check"]

MAX_SCHEMA_DEPTH: Final = 100
"""Deepest nesting accepted in a tool's schema (a deeper one would be a ``RecursionError``)."""

PATTERN_SECONDS: Final = 0.1
"""Time one ``pattern`` may take on one string; past it the value is refused."""

MAX_REPORTED: Final = 8  # failures listed in one observation; the rest are counted

_NUMBER = regex.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

# Keywords whose values are data (a ``$ref`` in them is no reference), and keywords whose
# values map names to schemas (a property may be named ``enum``).
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _location(path: Iterator[Any] | Any) -> str:
    return ".".join(str(part) for part in path)


def _either(words: list[str]) -> str:
    if len(words) > 10:
        words = [*words[:10], f"… ({len(words) - 10} more)"]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


MAX_SCHEMA_PROPERTIES: Final = 5000
"""Object properties in one tool's schema, all levels together (OpenAI's Structured Outputs
limit); past it checking the schema alone would take seconds."""


def schema_check(tool_name: str, schema: Mapping[str, Any]) -> SchemaCheck:
    """The check for ``schema``; a :class:`ToolDefinitionError` when it cannot be one."""
    if exceeds_depth(schema, MAX_SCHEMA_DEPTH):
        raise _bad(tool_name, f"it nests deeper than {MAX_SCHEMA_DEPTH} levels")
    counts = (len(p) for n in schema_nodes(schema) if isinstance(p := n.get("properties"), Mapping))
    if any(total > MAX_SCHEMA_PROPERTIES for total in itertools.accumulate(counts)):
        raise _bad(tool_name, f"it declares more than {MAX_SCHEMA_PROPERTIES} properties")
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise _bad(tool_name, f"it holds a value that is not JSON ({exc})") from None
    return _compiled(tool_name, text)


# Checks kept by schema: MCP tools are built again on every run, and a metaschema check
# takes milliseconds.
@functools.lru_cache(maxsize=256)
def _compiled(tool_name: str, schema: str) -> SchemaCheck:
    return SchemaCheck(tool_name, json.loads(schema))


def _bad(tool_name: str, why: str) -> ToolDefinitionError:
    return ToolDefinitionError(
        f"tool {tool_name!r}: its arguments' schema is not a usable JSON Schema: {why}",
        tool_name=tool_name,
    )


class SchemaCheck:
    """The compiled check of one tool's argument schema (build it with :func:`schema_check`)."""

    def __init__(self, tool_name: str, schema: dict[str, Any]) -> None:
        try:
            import jsonschema
            from jsonschema import validators
        except ImportError as exc:  # the schema extra (mcp brings it too)
            raise ToolDefinitionError(
                f"tool {tool_name!r}: checking a JSON Schema needs the jsonschema package, "
                "which is not installed: pip install 'react-engine[schema]' (or jsonschema>=4.18)",
                tool_name=tool_name,
            ) from exc
        self.tool_name = tool_name
        try:
            base = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            # Checked with a format checker of our own: a pattern is a ``regex`` pattern.
            formats = jsonschema.FormatChecker(formats=())
            formats.checks("regex", raises=(regex.error, TypeError))(regex.compile)
            meta = base(base.META_SCHEMA, format_checker=formats)
            problem = jsonschema.exceptions.best_match(meta.iter_errors(schema))
        except RecursionError:
            raise _bad(self.tool_name, "it nests too deeply") from None
        except Exception as exc:
            raise _bad(self.tool_name, f"{type(exc).__name__}: {exc}") from None
        if problem is not None:
            where = _location(problem.absolute_path)
            raise _bad(self.tool_name, f"{where + ': ' if where else ''}{problem.message[:300]}")
        if "additionalProperties" not in schema and "unevaluatedProperties" not in schema:
            if not any(k in schema for k in ("allOf", "anyOf", "oneOf", "$ref", "if")):
                schema["additionalProperties"] = False
            elif "unevaluatedProperties" in base.VALIDATORS:
                schema["unevaluatedProperties"] = False
        self.schema = schema
        mine = {"pattern": _pattern, "uniqueItems": _unique_items, "enum": _enum}
        self._validator = validators.extend(base, mine)(schema)
        self._check_references(schema, base)

    def _check_references(self, schema: dict[str, Any], base: Any) -> None:
        """Every ``$ref`` resolves within the schema: nothing is fetched, ever."""
        from referencing import Registry
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import specification_with

        spec = specification_with(base.META_SCHEMA.get("$schema", ""))
        resolver = Registry().resolver_with_root(spec.create_resource(schema))
        # (node, resolver, whether node maps names to schemas, as ``properties`` does)
        stack: list[tuple[Any, Any, bool]] = [(schema, resolver, False)]
        while stack:
            node, here, named = stack.pop()
            if isinstance(node, list):
                stack.extend((item, here, False) for item in node)
                continue
            if not isinstance(node, dict):
                continue
            if named:
                stack.extend((v, here, False) for v in node.values())
                continue
            if node is not schema and isinstance(node.get("$id"), str):
                here = here.in_subresource(spec.create_resource(node))
            ref = node.get("$ref")
            if isinstance(ref, str):
                try:
                    here.lookup(ref)
                except Unresolvable:
                    raise _bad(
                        self.tool_name,
                        f"$ref {ref[:100]!r} does not resolve within the schema (references "
                        "to other documents are not fetched)",
                    ) from None
                except Exception as exc:
                    raise _bad(
                        self.tool_name, f"$ref {ref[:100]!r}: {type(exc).__name__}"
                    ) from None
            stack.extend(
                (v, here, k in _SCHEMA_MAPS) for k, v in node.items() if k not in _DATA_KEYWORDS
            )

    def coerce(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments with the one lossless conversion the engine makes, at the top level:
        a quoted JSON number or ``"true"``/``"false"`` for a property that takes a number or
        a boolean but no string."""
        out = dict(arguments)
        props = self.schema.get("properties")
        if not isinstance(props, dict):
            return out
        for key, value in out.items():
            node = props.get(key)
            if not isinstance(value, str) or not isinstance(node, dict):
                continue
            kind = node.get("type")
            kinds = {kind} if isinstance(kind, str) else set(kind or ())
            if "string" in kinds or not kinds:
                continue
            if _NUMBER.fullmatch(value) and kinds & {"integer", "number"}:
                number = json.loads(value)
                if math.isfinite(number) and ("number" in kinds or isinstance(number, int)):
                    out[key] = number
            elif value in ("true", "false") and "boolean" in kinds:
                out[key] = value == "true"
        return out

    def errors(self, arguments: Any) -> list[str]:
        """What is wrong with ``arguments`` (``field: message`` lines); empty when valid."""
        try:
            failures = list(itertools.islice(self._validator.iter_errors(arguments), 50))
        except RecursionError:
            return ["(arguments): the tool's schema refers to itself without end"]
        except Exception as exc:  # a schema that checked out but cannot be applied
            return [f"(arguments): the tool's schema cannot be applied ({type(exc).__name__})"]
        lines = list(dict.fromkeys(line for failure in failures for line in _describe(failure)))
        if len(lines) > MAX_REPORTED:
            lines = [*lines[:MAX_REPORTED], f"and {len(lines) - MAX_REPORTED} more"]
        return lines


def _canonical(value: Any) -> str:
    """A text equal for two JSON values exactly when JSON Schema calls them equal: keys in
    any order, ``1`` equal to ``1.0``, ``true`` apart from ``1``."""

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False, default=repr)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``uniqueItems`` in linear time (``jsonschema`` compares objects pairwise: 5,000 of
    them took 45 s, on the event loop)."""
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


# The canonical texts of each ``enum`` list seen, by id (the list kept: its id stays its own).
_ENUMS: dict[int, tuple[Any, frozenset[str]]] = {}


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``enum`` by set lookup (``jsonschema`` compares the value with each allowed one: a
    10,000-value enum over a 1,000-item array took 1.6 s)."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(enums, list):
        return
    entry = _ENUMS.get(id(enums))
    if entry is None or entry[0] is not enums:
        if len(_ENUMS) >= 4096:
            _ENUMS.clear()
        entry = _ENUMS[id(enums)] = (enums, frozenset(_canonical(v) for v in enums))
    if _canonical(instance) not in entry[1]:
        yield ValidationError(f"{_short(instance)} is not one of the allowed values")


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``pattern`` on the ``regex`` package, with a time limit (``re`` has none)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        found = regex.search(pattern, instance, timeout=PATTERN_SECONDS)
    except TimeoutError:
        yield ValidationError(f"took too long to match the pattern {_short(pattern)}")
        return
    if found is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _describe(failure: Any) -> list[str]:
    """One failure as ``location: message`` lines (``required`` gives one per missing key)."""
    from jsonschema.exceptions import best_match

    path = list(failure.absolute_path)
    where = _location(path) or "(arguments)"
    keyword, value, instance = failure.validator, failure.validator_value, failure.instance
    if keyword == "required" and isinstance(instance, dict) and isinstance(value, list):
        missing = [k for k in value if isinstance(k, str) and k not in instance]
        return [f"{_location([*path, k])}: Field required" for k in missing] or [
            f"{where}: Field required"
        ]
    if keyword == "additionalProperties" and value is False and isinstance(instance, dict):
        props = failure.schema.get("properties") or {}
        patterns = failure.schema.get("patternProperties") or {}
        extra = [
            k for k in instance if k not in props and not any(_matches(p, k) for p in patterns)
        ]
        return [f"{_location([*path, k])}: unexpected field" for k in extra] or [
            f"{where}: unexpected field"
        ]
    if keyword in ("anyOf", "oneOf"):
        if keyword == "oneOf" and not failure.context:
            return [f"{where}: Input matches more than one of the allowed schemas"]
        closest = best_match(failure.context) if failure.context else None
        hint = f" (for example, {_describe(closest)[0]})" if closest is not None else ""
        return [f"{where}: Input matches none of the allowed schemas{hint}"]
    return [f"{where}: {_message(keyword, value, failure)}"]


def _matches(pattern: Any, key: str) -> bool:
    try:
        return regex.search(pattern, key, timeout=PATTERN_SECONDS) is not None
    except (regex.error, TimeoutError, TypeError):
        return False


def _message(keyword: str, value: Any, failure: Any) -> str:
    """pydantic-like wording for one keyword's failure."""
    if keyword == "type":
        kinds = [value] if isinstance(value, str) else list(value)
        words = ["null" if k == "null" else f"a valid {k}" for k in kinds]
        return f"Input should be {_either(words)}"
    if keyword == "enum" and isinstance(value, list):
        return f"Input should be {_either([_short(v, 40) for v in value])}"
    if keyword == "const":
        return f"Input should be {_short(value)}"
    if keyword[:3] in ("min", "max") and keyword[3:] in _SIZED:
        what, one, many = _SIZED[keyword[3:]]
        bound = "at least" if keyword[:3] == "min" else "at most"
        return f"{what} should have {bound} {value} {one if value == 1 else many}"
    if keyword == "pattern" and failure.message.startswith("took too long"):
        return f"String {failure.message}"
    if keyword == "pattern":
        return f"String should match pattern {_short(value)}"
    if keyword == "uniqueItems":
        return "Array items should be unique"
    if keyword == "multipleOf":
        return f"Input should be a multiple of {_short(value)}"
    bounds = {
        "minimum": "greater than or equal to",
        "maximum": "less than or equal to",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
    }
    flag = "exclusive" + keyword[:1].upper() + keyword[1:]
    if keyword in ("minimum", "maximum") and failure.schema.get(flag) is True:
        keyword = flag  # draft 4: "exclusiveMinimum" is a flag beside the bound
    if keyword in bounds and isinstance(value, int | float) and not isinstance(value, bool):
        return f"Input should be {bounds[keyword]} {_short(value)}"
    if keyword == "not":
        return "Input should not match the excluded schema"
    if keyword == "false" or failure.message.startswith("False schema"):
        return "no value is allowed here"
    text: str = failure.message
    return text if len(text) <= 200 else text[:199] + "…"


_SIZED: Final = {
    "Length": ("String", "character", "characters"),
    "Items": ("Array", "item", "items"),
    "Properties": ("Object", "property", "properties"),
}
