"""Typed final answers: ``Agent(output_type=Person)``.

A run's final answer is text by default. With an ``output_type`` (a pydantic model, a
dataclass, a ``TypedDict``, ``list[int]``... anything pydantic's ``TypeAdapter`` takes) the
answer must be a JSON value valid for that type, and the run's ``result.output`` is the
validated value (``result.answer`` stays the text: the value's JSON).

:class:`OutputSpec` is the type, its JSON Schema and its reader, built once per type. Each
protocol shows the schema its own way; :mod:`react_engine.protocols.policy` validates every
protocol's answer, and a failure goes back to the model as a format error naming the fields.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import ConfigurationError, JSONRepairError, ModelBehaviorError
from ..tools.schema import meets_strict_mode, strict_schema

__all__ = ["FINAL_RESULT", "OutputError", "OutputSpec", "output_spec"]

FINAL_RESULT = "final_result"
"""The name of the tool a function-calling model calls to give a typed final answer."""

WRAPPED = "response"
"""The one property a tool's parameters wrap a value in when the value is not an object
(``list[int]``, ``int``, a ``dict`` of free keys): tool parameters must be an object."""

_MAX_ERRORS = 5
_MAX_INPUT = 80


class OutputError(ModelBehaviorError, ValueError):
    """A final answer that does not validate; the message names the failing fields."""


@dataclass(frozen=True, slots=True, eq=False)
class OutputSpec:
    """A run's ``output_type``: its JSON Schema, and how an answer is read into it."""

    type: Any
    adapter: TypeAdapter[Any]
    schema: dict[str, Any]
    """The value's JSON Schema, self-contained (no titles, extra keys forbidden)."""
    parameters: dict[str, Any]
    """The ``final_result`` tool's parameters: ``schema`` when it is an object with
    properties, else an object holding the value as :data:`WRAPPED`."""
    wrapped: bool
    strict: bool
    """Whether ``parameters`` meet OpenAI's strict mode (sent with ``"strict": true``)."""

    @property
    def name(self) -> str:
        return getattr(self.type, "__name__", None) or repr(self.type)

    def schema_text(self) -> str:
        return json.dumps(self.schema, ensure_ascii=False)

    def tool_schema(self, description: str) -> dict[str, Any]:
        """The ``final_result`` entry of a request's ``tools`` array."""
        function = {"name": FINAL_RESULT, "description": description, "parameters": self.parameters}
        return {
            "type": "function",
            "function": function | ({"strict": True} if self.strict else {}),
        }

    def unwrap(self, arguments: Any) -> Any:
        """The value in a ``final_result`` call's arguments (a model that left out the
        :data:`WRAPPED` object is taken at its word)."""
        if self.wrapped and isinstance(arguments, dict) and set(arguments) == {WRAPPED}:
            return arguments[WRAPPED]
        return arguments

    def read(self, text: str) -> tuple[Any, list[str]]:
        """The validated value of an answer's text, and the JSON repairs it took.

        The text is read with :func:`~react_engine.parsing.repair_json` (never completing a
        value that was cut off); text that is no JSON at all is tried as a plain string,
        for types a bare word can satisfy (``Literal["yes", "no"]``).

        Raises:
            OutputError: the answer is not valid for the type; the message names the fields.
        """
        try:
            from ..parsing.json_repair import repair_json  # loaded with the first answer

            fixed = repair_json(text, allow_truncated=False)
        except JSONRepairError as exc:
            try:
                return self.adapter.validate_python(text.strip()), ["answer_as_string"]
            except ValidationError:
                raise OutputError(
                    f"the final answer is not a JSON value ({exc}); it must be JSON valid "
                    f"for the {self.name} schema"
                ) from None
        try:
            return self.adapter.validate_python(fixed.value), [f"json:{r}" for r in fixed.repairs]
        except ValidationError as exc:
            if fixed.repairs:  # JSON found in prose ("Paris [1]"): maybe the text is the value
                try:
                    return self.adapter.validate_python(text.strip()), ["answer_as_string"]
                except ValidationError:
                    pass
            raise OutputError(
                f"the final answer is not valid for the {self.name} schema: {_errors(exc)}"
            ) from None

    def dump(self, value: Any) -> str:
        """The value's JSON text: a validated answer as it stays in ``result.answer``."""
        return self.adapter.dump_json(value).decode()


def _errors(exc: ValidationError) -> str:
    found = exc.errors(include_url=False)
    parts = []
    for error in found[:_MAX_ERRORS]:
        where = ".".join(str(p) for p in error["loc"])
        given = repr(error.get("input"))
        if len(given) > _MAX_INPUT:
            given = given[: _MAX_INPUT - 3] + "..."
        text = f"{where}: {error['msg']}" if where else error["msg"]
        parts.append(f"{text} (got {given})" if error["type"] != "missing" else text)
    if len(found) > _MAX_ERRORS:
        parts.append(f"and {len(found) - _MAX_ERRORS} more")
    return "; ".join(parts)


def output_spec(output_type: Any) -> OutputSpec | None:
    """The spec of ``output_type``; ``None`` for ``str`` (the plain-text answer).

    Raises:
        ConfigurationError: pydantic cannot validate the type or give its JSON Schema.
    """
    if output_type is str or output_type is None:
        return None
    try:
        return _cached(output_type)
    except TypeError:  # an unhashable type expression
        return _build(output_type)


def _build(output_type: Any) -> OutputSpec:
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        raw = adapter.json_schema()
    except Exception as exc:
        raise ConfigurationError(
            f"output_type {output_type!r} has no JSON Schema pydantic can validate: {exc}"
        ) from None
    wrapped = not (raw.get("type") == "object" and "properties" in raw)
    if not wrapped:
        schema = parameters = strict_schema(raw)
    else:
        defs = raw.pop("$defs", None)
        holder = {"type": "object", "properties": {WRAPPED: raw}, "required": [WRAPPED]}
        parameters = strict_schema(holder | ({"$defs": defs} if defs else {}))
        schema = dict(parameters["properties"][WRAPPED])
        if "$defs" in parameters:
            schema["$defs"] = parameters["$defs"]
    strict = meets_strict_mode(parameters)
    return OutputSpec(output_type, adapter, schema, parameters, wrapped, strict)


_cached = functools.lru_cache(maxsize=64)(_build)
