"""Our checker for BFCL's AST categories: is a list of calls one of the accepted answers?

The rules of BFCL's official ``ast_checker``, in code of our own (docs/bfcl.md, "The AST
checker's rules"); ``tests/eval/test_bfcl_official.py`` wants the same verdict as BFCL's.
Where BFCL's checker would raise on a malformed answer we return a failed verdict instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["Call", "Verdict", "check_calls", "check_one", "normalize_string"]

_PY_TYPES: Mapping[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""BFCL type names to the Python type a JSON-decoded value must have (``any``: a string,
as BFCL's checker reads it)."""

_NESTED = ("array", "tuple")
"""Types whose items are type-checked."""

_IGNORED = re.compile(r"[ ,./\-_*^]")
"""Characters a string comparison ignores."""


class _Malformed(Exception):
    """The answer or schema is one BFCL's checker would raise on: the call fails."""


@dataclass(frozen=True, slots=True)
class Call:
    """A call the model made: BFCL's function name and the decoded arguments."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str = ""
    """Why it failed, for the report; empty when ``ok``."""


_OK = Verdict(True)


def normalize_string(text: str) -> str:
    return _IGNORED.sub("", text).lower().replace("'", '"')


def _norm(value: Any) -> Any:
    return normalize_string(value) if type(value) is str else value


def check_calls(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    answers: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
) -> Verdict:
    """Whether ``calls`` is an accepted answer for a case of ``category`` (ours or BFCL's
    name: ``simple``, ``live_multiple``...)."""
    if "irrelevance" in category:
        if calls:
            return Verdict(False, f"called {', '.join(c.name for c in calls)}; expected no call")
        return _OK
    if len(calls) != len(answers):
        return Verdict(False, f"{len(calls)} call(s); expected {len(answers)}")
    docs = {f["name"]: f for f in functions}
    if "parallel" in category:
        return _match_greedily(docs, list(calls), list(answers))
    if "multiple" in category:
        return check_one(docs, calls[0], answers[0])
    # simple: BFCL checks the one call against the case's first (and only) function.
    ((_, accepted),) = answers[0].items()
    first = functions[0] if functions else {"name": ""}
    return check_one(docs, calls[0], {first["name"]: accepted})


def _match_greedily(
    docs: Mapping[str, Mapping[str, Any]],
    calls: list[Call],
    answers: list[Mapping[str, Mapping[str, Sequence[Any]]]],
) -> Verdict:
    """Each expected call, in order, takes the first call not yet taken that fits it."""
    taken: set[int] = set()
    for i, answer in enumerate(answers):
        reasons = []
        for j, call in enumerate(calls):
            if j in taken:
                continue
            verdict = check_one(docs, call, answer)
            if verdict.ok:
                taken.add(j)
                break
            reasons.append(verdict.reason)
        else:
            return Verdict(
                False, f"no call left matches expected call #{i + 1} ({'; '.join(reasons)})"
            )
    return _OK


def check_one(
    docs: Mapping[str, Mapping[str, Any]],
    call: Call,
    answer: Mapping[str, Mapping[str, Sequence[Any]]],
) -> Verdict:
    """One call against one expected call ``{function: {param: [accepted values]}}``."""
    ((expected_name, accepted),) = answer.items()
    if call.name != expected_name:
        return Verdict(False, f"called {call.name}; expected {expected_name}")
    doc = docs.get(expected_name, {})
    params = doc.get("parameters", {})
    properties: Mapping[str, Any] = params.get("properties", {})
    for name in params.get("required", ()):
        if name not in call.arguments:
            return Verdict(False, f"{call.name}: missing required parameter {name!r}")
    for name, value in call.arguments.items():
        if name not in properties or name not in accepted:
            return Verdict(False, f"{call.name}: unexpected parameter {name!r}")
        try:
            verdict = _check_value(f"{call.name}.{name}", value, properties[name], accepted[name])
        except _Malformed as exc:
            verdict = Verdict(False, f"{call.name}.{name}: {exc}")
        if not verdict.ok:
            return verdict
    for name, values in accepted.items():
        if name not in call.arguments and "" not in values:
            return Verdict(False, f"{call.name}: parameter {name!r} must be given")
    return _OK


def _py_type(schema: Any) -> type:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if not isinstance(kind, str) or kind not in _PY_TYPES:
        raise _Malformed(f"no Python type for the BFCL type {kind!r}")
    return _PY_TYPES[kind]


def _type_ok(value: Any, accepted: Sequence[Any], expected: type, item: type | None) -> bool | None:
    """BFCL's type check: ``None`` if the value fails it; else whether the value stands
    for a variable (the accepted values are of another type than documented), which is
    then compared as it is."""
    # The type of the first accepted value that is not ``""`` (None: there is none).
    answer_type = next((type(option) for option in accepted if option != ""), None)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        fits = item is None or any(
            type(option) is not list
            or all(_type_ok(v, option, item, None) is not None for v in cast("list[Any]", value))
            for option in accepted
        )
        return variable if fits else None
    return True if answer_type is not None and type(value) is answer_type else None


def _check_value(
    where: str, value: Any, schema: Mapping[str, Any], accepted: Sequence[Any]
) -> Verdict:
    bfcl_type = schema.get("type")
    expected = _py_type(schema)
    item = _py_type(schema.get("items")) if bfcl_type in _NESTED else None
    if bfcl_type == "float" and type(value) is int:
        value = float(value)
    variable = _type_ok(value, accepted, expected, item)
    if variable is None:
        shown = f"{bfcl_type}" + (f" of {schema['items'].get('type')}" if item else "")
        return Verdict(False, f"{where}: expected {shown}, got {type(value).__name__} {value!r}")
    if variable:
        fits = value in accepted
    elif expected is dict:
        fits = any(_object_fits(value, option) for option in accepted if option != "")
    elif expected is list and item is dict:
        fits = _list_of_objects(value, accepted)
    elif expected is str:
        fits = _norm(value) in [_norm(a) for a in accepted if type(a) is str]
    elif expected is list:
        # BFCL reads every accepted value as a sequence: "" is an empty list.
        options = [[_norm(v) for v in o] for o in accepted if type(o) is list or type(o) is str]
        fits = [_norm(v) for v in value] in options
    else:
        fits = value in accepted
    if fits:
        return _OK
    return Verdict(False, f"{where}: {value!r} is not one of {list(accepted)!r}")


def _object_fits(value: Mapping[str, Any], option: Any) -> bool:
    if not isinstance(option, Mapping):
        return False
    for key, item in value.items():
        if key not in option:
            return False
        values = option[key]
        if type(values) is not list:
            raise _Malformed(f"the accepted values of {key!r} are no list")
        if _norm(item) not in [_norm(a) for a in values]:
            return False
    return all(key in value or "" in values for key, values in option.items())


def _list_of_objects(value: list[Any], accepted: Sequence[Any]) -> bool:
    for option in accepted:
        if not isinstance(option, (list, str)) or len(option) != len(value):
            continue
        if any(not isinstance(v, Mapping) for v in value):
            raise _Malformed("items are no objects")
        if all(_object_fits(v, o) for v, o in zip(value, option, strict=True)):
            return True
    return False
