"""BFCL's test cases, read as package data from the ``bfcl-eval`` wheel, and their functions
as tools that never run (docs/bfcl.md, "The data").
"""

from __future__ import annotations

import importlib
import importlib.resources
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict

from ..errors import ConfigurationError
from ..tools import Tool

__all__ = [
    "CATEGORIES",
    "DEFAULT_CATEGORIES",
    "FLOAT_NOTE",
    "INSTALL_HINT",
    "PYTHON_HINT",
    "BfclDataMissing",
    "Case",
    "api_name",
    "arguments_model",
    "case_tools",
    "data_root",
    "load_cases",
    "read_lines",
    "to_json_schema",
]

CATEGORIES: Mapping[str, str] = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
    "live_irrelevance": "live_irrelevance",
}
"""The AST categories we run, by our name, with BFCL's name (and file) for each (of BFCL v4's
"simple", the Python one, whose values are plain JSON)."""

DEFAULT_CATEGORIES: tuple[str, ...] = tuple(c for c in CATEGORIES if not c.startswith("live_"))
"""What runs when no category is named: BFCL's non-live AST categories (1,240 cases)."""

INSTALL_HINT = "pip install --no-deps bfcl-eval (make venv does it)"

_TYPES: Mapping[str, str] = {
    **{t: t for t in ("string", "integer", "boolean", "array", "object", "number")},
    **{"dict": "object", "float": "number", "tuple": "array", "any": "string"},
}
"""BFCL type names to JSON Schema types (``any`` as BFCL sends it: a string)."""

PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
"""What BFCL appends to every Python function's description before sending it."""

FLOAT_NOTE = " This is a float type value."
"""What BFCL appends to a ``float`` property's description for function-calling models."""

_KEPT = ("description", "enum", "default", "format", "maximum", "minimum", "minItems", "maxItems")
"""Keywords passed through unchanged; the rest (``optional``) are BFCL's own."""

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_\-]")
"""Characters chat APIs refuse in a function name (BFCL uses dots: ``math.factorial``)."""


class BfclDataMissing(ConfigurationError):
    """The ``bfcl-eval`` wheel is not installed, or lacks a file we read."""


@dataclass(frozen=True, slots=True)
class Case:
    """One BFCL test case: a question, the functions offered, the calls accepted."""

    id: str
    category: str
    """Our category name (a key of :data:`CATEGORIES`)."""
    question: str
    """The user's (last) message: every case is one turn of the conversation."""
    functions: tuple[Mapping[str, Any], ...]
    """BFCL's function documents, as shipped."""
    answers: tuple[Mapping[str, Mapping[str, list[Any]]], ...]
    """One ``{function: {param: [accepted values]}}`` per expected call (none for
    irrelevance); ``""`` among the values marks a parameter that may be left out."""
    system: str | None = None
    """A system message the case opens with (some live cases have one)."""
    history: tuple[tuple[str, str], ...] = ()
    """``(role, content)`` messages before the question (a few live cases have some)."""


def data_root() -> Traversable:
    """The wheel's ``data`` directory, or :class:`BfclDataMissing`."""
    return importlib.resources.files(wheel("bfcl_eval")) / "data"


def read_lines(path: Traversable) -> list[dict[str, Any]]:
    """The JSON objects of a BFCL data file, one a line."""
    if not path.is_file():
        raise BfclDataMissing(f"the BFCL data has no {path.name}: {INSTALL_HINT}")
    out: list[dict[str, Any]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise BfclDataMissing(f"{path.name} line {n} is not JSON: {exc}") from None
    return out


def load_cases(
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    *,
    limit: int | None = None,
    only: Sequence[str] = (),
) -> list[Case]:
    """The cases of ``categories``: the first ``limit`` of each, or those named in ``only``."""
    read = read_categories(categories, CATEGORIES, limit, only)
    return [_case(e, category, answers) for category, _, es, answers in read for e in es]


def read_categories(
    categories: Sequence[str],
    files: Mapping[str, str],
    limit: int | None,
    only: Sequence[str],
) -> Iterator[tuple[str, Traversable, list[dict[str, Any]], dict[str, Any]]]:
    """Each category's data directory, entries (the first ``limit``, or those whose ids are in
    ``only``) and accepted answers by case id; ``files`` names each category's data file."""
    unknown = [c for c in categories if c not in files]
    if unknown:
        raise ConfigurationError(f"unknown BFCL categories {unknown}: use {', '.join(files)}")
    base = data_root()
    for category in categories:
        stem = f"BFCL_v4_{files[category]}.json"
        entries = read_lines(base / stem)
        picked = [e for e in entries if e["id"] in set(only)] if only else entries
        answers = [] if "irrelevance" in category else read_lines(base / "possible_answer" / stem)
        yield category, base, picked[:limit], {a["id"]: a["ground_truth"] for a in answers}


def _case(entry: Mapping[str, Any], category: str, answers: Mapping[str, Any]) -> Case:
    case_id = entry["id"]
    turns = entry["question"]
    messages = list(turns[0]) if len(turns) == 1 else []
    system = None
    if messages and messages[0].get("role") == "system":
        system = str(messages.pop(0)["content"])
    roles = [m.get("role") for m in messages]
    if not roles or roles[-1] != "user" or not set(roles) <= {"user", "assistant"}:
        raise BfclDataMissing(
            f"BFCL case {case_id} is not one turn ending with the user's message; this eval "
            "reads only those"
        )
    if "irrelevance" not in category and case_id not in answers:
        raise BfclDataMissing(f"BFCL case {case_id} has no possible answer")
    return Case(
        id=case_id,
        category=category,
        question=str(messages[-1]["content"]),
        functions=tuple(entry["function"]),
        answers=tuple(answers.get(case_id, ())),
        system=system,
        history=tuple((str(m["role"]), str(m["content"])) for m in messages[:-1]),
    )


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """One BFCL parameter schema as JSON Schema (recursively: properties and items)."""
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, str):
        if kind not in _TYPES:
            raise ConfigurationError(f"unknown BFCL type {kind!r}")
        out["type"] = _TYPES[kind]
    out |= {key: node[key] for key in _KEPT if key in node}
    if kind == "float" and "enum" in out:
        out["enum"] = [float(v) if isinstance(v, int) else v for v in out["enum"]]
    items = node.get("items")
    if isinstance(items, Mapping):
        out["items"] = to_json_schema(items)
    props = node.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {name: _property_schema(p) for name, p in props.items()}
        required = [r for r in node.get("required", ()) if r in props]
        if required:
            out["required"] = required
    return out


def _property_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A property as BFCL converts it: a ``float`` one says so in its format and words."""
    out = to_json_schema(node)
    if node.get("type") == "float":
        out["format"] = "float"
        out["description"] = str(node.get("description") or "") + FLOAT_NOTE
    return out


def api_name(name: str) -> str:
    """A BFCL function name as chat APIs accept it (as BFCL does it), at most 64 characters."""
    safe = _UNSAFE_NAME.sub("_", name)
    if not safe or safe[0].isdigit() or safe[0] == "-":
        safe = "_" + safe
    return safe[:64]


class _AnyArguments(BaseModel):
    """Accepts every argument object: the checker, not pydantic, judges the values."""

    model_config = ConfigDict(extra="allow")


async def _not_run(**_: Any) -> str:
    return "(not run: the BFCL eval scores the call, not its result)"


def arguments_model(schema: Mapping[str, Any]) -> type[BaseModel]:
    """A model that takes any argument object; a one-parameter tool also gets that field, so
    a plain-text input (``Action Input: 5``) maps onto it."""
    props = list(schema.get("properties", {}))
    usable = len(props) == 1 and props[0].isidentifier() and not props[0].startswith("_")
    if usable and not hasattr(BaseModel, props[0]):
        field: dict[str, Any] = {props[0]: (Any, None)}
        return pydantic.create_model("OneArgument", __base__=_AnyArguments, **field)
    return _AnyArguments


def case_tools(
    functions: Sequence[Mapping[str, Any]], run: Callable[[str], Callable[..., Any]] | None = None
) -> tuple[list[Tool], dict[str, str]]:
    """BFCL's functions as tools, and a map from each tool's name back to BFCL's: tools that
    never run (an AST case scores the call), or that give their arguments to ``run(name)``."""
    tools: list[Tool] = []
    names: dict[str, str] = {}
    for function in functions:
        name = api_name(function["name"])
        if name in names:
            raise ConfigurationError(
                f"BFCL functions {function['name']!r} and {names[name]!r} are both sent as {name!r}"
            )
        names[name] = function["name"]
        schema = to_json_schema(function.get("parameters") or {"type": "dict"})
        schema["type"] = "object"
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        tools.append(
            Tool(
                name=name,
                description=str(function.get("description") or "") + PYTHON_HINT,
                args_model=arguments_model(schema),
                function=_not_run if run is None else run(function["name"]),
                parameters=schema,
                is_async=run is None,
                pass_arguments=run is not None,
            )
        )
    return tools, names


def wheel(module: str) -> Any:
    """A module of the ``bfcl-eval`` wheel, or :class:`BfclDataMissing`."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise BfclDataMissing(f"BFCL's {module} cannot load ({exc}): {INSTALL_HINT}") from None
