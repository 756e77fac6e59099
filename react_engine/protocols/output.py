"""Typed final answers: ``Agent(output_type=Person)``.

With an ``output_type`` (anything pydantic's ``TypeAdapter`` takes) the answer must be JSON
valid for it; ``result.output`` is the validated value, ``result.answer`` its JSON.
:class:`OutputSpec` (built once per type) is shown by each protocol its own way and
applied by :mod:`react_engine.protocols.policy`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import ConfigurationError, JSONRepairError, ModelBehaviorError
from ..tools.schema import meets_strict_mode, strict_schema

__all__ = ["FINAL_RESULT", "OutputError", "OutputSpec", "output_spec"]

FINAL_RESULT = "final_result"
"""The name of the tool a function-calling model calls to give a typed final answer."""

WRAPPED = "response"
"""The property a non-object value is wrapped in: tool parameters must be an object."""

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
    """The ``final_result`` tool's parameters: ``schema``, or it wrapped as :data:`WRAPPED`."""
    wrapped: bool
    strict: bool
    """Whether ``parameters`` meet OpenAI's strict mode (sent with ``"strict": true``)."""

    @property
    def name(self) -> str:
        return getattr(self.type, "__name__", None) or repr(self.type)

    def tool_schema(self, description: str) -> dict[str, Any]:
        """The ``final_result`` entry of a request's ``tools`` array."""
        function = {"name": FINAL_RESULT, "description": description, "parameters": self.parameters}
        return {
            "type": "function",
            "function": function | ({"strict": True} if self.strict else {}),
        }

    def unwrap(self, arguments: Any) -> Any:
        """The value in a ``final_result`` call's arguments (with or without :data:`WRAPPED`)."""
        if self.wrapped and isinstance(arguments, dict) and set(arguments) == {WRAPPED}:
            return arguments[WRAPPED]
        return arguments

    def read(self, text: str) -> tuple[Any, list[str]]:
        """The validated value of an answer's text, and the JSON repairs it took (never
        completing a cut value); text that is no JSON is tried as a plain string.

        Raises:
            OutputError: the answer is not valid for the type; the message names the fields.
        """
        from ..parsing.json_repair import repair_json  # loaded with the first answer

        try:
            fixed = repair_json(text, allow_truncated=False)
        except JSONRepairError as exc:
            problem = f"the final answer is not a JSON value ({exc}); it must be JSON valid"
            problem += f" for the {self.name} schema"
        else:
            try:
                value = self.adapter.validate_python(fixed.value)
                return value, [f"json:{r}" for r in fixed.repairs]
            except ValidationError as exc:
                problem = (
                    f"the final answer is not valid for the {self.name} schema: {_errors(exc)}"
                )
                if not fixed.repairs:  # else JSON found in prose ("Paris [1]"): maybe the text
                    raise OutputError(problem) from None
        try:
            return self.adapter.validate_python(text.strip()), ["answer_as_string"]
        except ValidationError:
            raise OutputError(problem) from None

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
