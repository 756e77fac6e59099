"""Our checker for BFCL's AST categories: is a list of calls one of the accepted answers?

BFCL scores a call by comparing it with a list of accepted values per parameter, under a
few normalisation rules. These are the rules we apply: BFCL's, as its checker applies them
to the five categories we run, in code of our own (where we depart, it says so):

* **Function**: the name must be the expected one (we map our API-safe tool names back to
  BFCL's dotted names before checking).
* **Parameters**: every parameter the function requires is there; every parameter given
  is one the function documents *and* the answer lists; a parameter the answer lists
  without ``""`` among its values must be given (``""`` marks "may be left out").
* **Types**: the value has the documented type (a boolean is not an integer); an integer
  is accepted for a ``float`` and compared as a float; array elements have the item type
  (two departures from BFCL, which fails both: integers are accepted for float items too,
  and items of another type pass when the list is one of the accepted lists, as in
  ``parallel_multiple_94``, whose answer has strings for integer items). A
  value of the same type as the accepted values, where that differs from the documented
  type (an answer that names a variable), is compared as it is. ``any`` accepts every
  type (BFCL: strings only).
* **Strings** compare after normalising both sides: lower case, without spaces or any of
  ``, . / - _ * ^``, single quotes as double quotes ("April 1, 2024" = "april 1 2024").
* **Lists** compare element by element, string elements normalised the same way.
* **Objects** (``dict``) match one accepted object: every key given is an accepted key
  whose value is among its accepted values (strings normalised), and every accepted key
  without ``""`` is given. A list of objects matches position by position.
* **Other values** (numbers, booleans) must equal an accepted value.
* **Parallel** categories: as many calls as expected, matched in any order (each expected
  call to a different call of the model).
* **Irrelevance**: the right answer is no call at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Call", "Verdict", "check_calls", "check_one", "normalize_string"]

_PY_TYPES: Mapping[str, type | None] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": None,
}
"""BFCL type names to the Python type of a JSON-decoded value; ``None``: any type."""

_IGNORED = re.compile(r"[ ,./\-_*^]")
"""Characters a string comparison ignores."""


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
    return normalize_string(value) if isinstance(value, str) else value


def _same_type(value: Any, expected: type) -> bool:
    return type(value) is expected


def _answer_type(accepted: Sequence[Any]) -> type | None:
    for option in accepted:
        if option != "":
            return type(option)
    return None


def check_calls(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    answers: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
) -> Verdict:
    """Whether ``calls`` is an accepted answer for a case of ``category``."""
    if category == "irrelevance":
        if calls:
            return Verdict(False, f"called {', '.join(c.name for c in calls)}; expected no call")
        return _OK
    if len(calls) != len(answers):
        return Verdict(False, f"{len(calls)} call(s); expected {len(answers)}")
    docs = {f["name"]: f for f in functions}
    if not category.startswith("parallel"):
        return check_one(docs, calls[0], answers[0])
    return _match_any_order(docs, list(calls), list(answers))


def _match_any_order(
    docs: Mapping[str, Mapping[str, Any]],
    calls: list[Call],
    answers: list[Mapping[str, Mapping[str, Sequence[Any]]]],
) -> Verdict:
    """Pair every expected call with a distinct call of the model (a small bipartite
    matching by backtracking: a few calls per case)."""
    fits = [[check_one(docs, call, answer).ok for call in calls] for answer in answers]
    taken = [False] * len(calls)

    def assign(i: int) -> bool:
        if i == len(answers):
            return True
        for j, fit in enumerate(fits[i]):
            if fit and not taken[j]:
                taken[j] = True
                if assign(i + 1):
                    return True
                taken[j] = False
        return False

    if assign(0):
        return _OK
    for i, row in enumerate(fits):
        if not any(row):
            reasons = "; ".join(check_one(docs, c, answers[i]).reason for c in calls)
            return Verdict(False, f"no call matches expected call #{i + 1} ({reasons})")
    return Verdict(False, "the calls match the expected ones only if one call counts twice")


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
        verdict = _check_value(f"{call.name}.{name}", value, properties[name], accepted[name])
        if not verdict.ok:
            return verdict
    for name, values in accepted.items():
        if name not in call.arguments and "" not in values:
            return Verdict(False, f"{call.name}: parameter {name!r} must be given")
    return _OK


def _check_value(
    where: str, value: Any, schema: Mapping[str, Any], accepted: Sequence[Any]
) -> Verdict:
    bfcl_type = schema.get("type", "any")
    expected = _PY_TYPES.get(bfcl_type)
    if bfcl_type == "float" and type(value) is int:
        value = float(value)
    if expected is not None and not _same_type(value, expected):
        answer_type = _answer_type(accepted)
        if answer_type is not None and answer_type is not expected and type(value) is answer_type:
            # The answer names a variable (a string where a list is documented): compare as is.
            return _plain(where, value, accepted)
        return Verdict(
            False, f"{where}: expected {bfcl_type}, got {type(value).__name__} {value!r}"
        )
    if expected is list:
        item_type = _PY_TYPES.get((schema.get("items") or {}).get("type", "any"))
        if item_type is not None:
            for item in value:
                if item_type is float and type(item) is int:
                    continue
                if not _same_type(item, item_type):
                    if _list(where, value, accepted).ok:
                        continue  # the answer itself has items of this type
                    return Verdict(
                        False,
                        f"{where}: expected {item_type.__name__} items, got {type(item).__name__}"
                        f" {item!r}",
                    )
        if item_type is dict:
            return _list_of_objects(where, value, accepted)
        return _list(where, value, accepted)
    if expected is dict:
        return _object(where, value, accepted)
    if expected is str:
        if _norm(value) in [_norm(a) for a in accepted if isinstance(a, str)]:
            return _OK
        return Verdict(False, f"{where}: {value!r} is not one of {list(accepted)!r}")
    return _plain(where, value, accepted)


def _plain(where: str, value: Any, accepted: Sequence[Any]) -> Verdict:
    # type() guards equality across types: True == 1 and 1 == 1.0 in Python.
    for option in accepted:
        if (
            option != ""
            and value == option
            and (type(value) is type(option) or _numbers(value, option))
        ):
            return _OK
    return Verdict(False, f"{where}: {value!r} is not one of {list(accepted)!r}")


def _numbers(a: Any, b: Any) -> bool:
    return type(a) in (int, float) and type(b) in (int, float)


def _list(where: str, value: list[Any], accepted: Sequence[Any]) -> Verdict:
    mine = [_norm(v) for v in value]
    for option in accepted:
        if isinstance(option, list) and mine == [_norm(v) for v in option]:
            return _OK
    return Verdict(False, f"{where}: {value!r} is not one of {list(accepted)!r}")


def _object_fits(value: Mapping[str, Any], option: Mapping[str, Sequence[Any]]) -> bool:
    for key, item in value.items():
        if key not in option:
            return False
        if _norm(item) not in [_norm(a) for a in option[key]]:
            return False
    return all(key in value or "" in values for key, values in option.items())


def _object(where: str, value: Mapping[str, Any], accepted: Sequence[Any]) -> Verdict:
    if any(isinstance(o, Mapping) and _object_fits(value, o) for o in accepted):
        return _OK
    return Verdict(False, f"{where}: {value!r} matches none of {list(accepted)!r}")


def _list_of_objects(where: str, value: list[Any], accepted: Sequence[Any]) -> Verdict:
    for option in accepted:
        if (
            isinstance(option, list)
            and len(option) == len(value)
            and all(
                isinstance(v, Mapping) and isinstance(o, Mapping) and _object_fits(v, o)
                for v, o in zip(value, option, strict=True)
            )
        ):
            return _OK
    return Verdict(False, f"{where}: {value!r} matches none of {list(accepted)!r}")
