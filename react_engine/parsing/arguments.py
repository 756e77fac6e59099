"""Plain-text arguments read onto a tool's parameters, when the reading is not a guess.

* a bare value (``Action Input: Beijing``), for a tool with exactly one required parameter
  (or one parameter in all): ``bare_input_to_parameter``;
* ``key: value`` pairs (``search_product(name: iPhone, category: phone)``), each key a
  parameter, each value quoted or plain text with no quote, separator or other ``key:``:
  ``key_value_arguments``.

Both keep every value as written. Text that names a parameter as a key but cannot be
read that way is refused (``Beijing, unit: kelvin``: one city, or a city and a unit?).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..wording import Notice, NoticeCode
from . import patterns as P
from .common import unfence
from .duplicates import decode

__all__ = ["AMBIGUOUS", "TextArguments", "read_text_arguments"]

AMBIGUOUS = Notice(NoticeCode.AMBIGUOUS_PAIRS)
"""Why text that only partly reads as ``key: value`` pairs never runs."""

_SEPARATORS = ",，\n"
_QUOTES = "\"'“”‘’"


@dataclass(frozen=True, slots=True)
class TextArguments:
    """What :func:`read_text_arguments` made of a text input."""

    arguments: dict[str, Any] | None = None
    """The arguments object, when the text reads as one without a guess."""
    repair: str | None = None
    """``bare_input_to_parameter`` or ``key_value_arguments``, with ``arguments``."""
    error: Notice | None = None
    """Why the text must not run (it is ambiguous), or ``None``."""


def read_text_arguments(
    text: str, parameters: Mapping[str, Any], raw: str | None = None
) -> TextArguments:
    """Read a call's text input onto the parameters of a tool whose arguments' JSON Schema
    is ``parameters``; ``TextArguments()`` when it cannot.

    ``raw``, the input as written: a JSON value that is neither object nor string is never
    turned into text (``12`` is not ``"12"``): it is the one parameter's when its schema takes
    it as it is, and refused otherwise (``null`` always)."""
    props = parameters.get("properties")
    if not isinstance(props, Mapping) or not text.strip():
        return TextArguments()
    names = [str(n) for n in props]
    required = parameters.get("required")
    needed = [n for n in required if n in props] if isinstance(required, list) else []
    target = needed[0] if len(needed) == 1 else names[0] if not needed and len(names) == 1 else None
    found, value = _json_literal(raw if raw is not None else text)
    if found:
        schema = props.get(target) if target is not None else None
        if value is not None and isinstance(schema, Mapping) and _admits(schema, value):
            assert target is not None
            return TextArguments({target: value}, "bare_input_to_parameter")
        return TextArguments(
            error=Notice(NoticeCode.NOT_AN_OBJECT, kind=_KINDS.get(type(value), "a list"))
        )
    pairs = _key_values(text, names)
    if pairs is not None:
        return TextArguments(dict(pairs), "key_value_arguments")
    if _names_a_parameter(text, names):
        return TextArguments(error=AMBIGUOUS)
    if target is not None:
        return TextArguments({target: text.strip()}, "bare_input_to_parameter")
    return TextArguments()


def _json_literal(raw: str) -> tuple[bool, Any]:
    """``(True, value)`` where ``raw`` (in a fence or backticks or not) is JSON whose value
    is neither an object nor a string; ``(False, None)`` otherwise."""
    text = raw.strip()
    fenced = unfence(text) if text.startswith(("```", "~~~")) else None
    if fenced is not None and not fenced[1].strip():
        text = fenced[0].strip()
    elif len(text) > 1 and text[0] == "`" and text[-1] == "`":
        text = text[1:-1].strip()
    if not text or text[0] in '{"':
        return False, None
    try:
        value = decode(text)[0]
    except (ValueError, RecursionError):
        return False, None
    return not isinstance(value, dict | str), value


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _admits(schema: Mapping[str, Any], value: Any) -> bool:
    """Whether a parameter whose JSON Schema is ``schema`` takes ``value`` as it is (only its
    declared ``type``: a schema that says nothing takes nothing)."""
    declared = schema.get("type")
    kinds = declared if isinstance(declared, list) else [declared]
    return any(
        isinstance(kind, str)
        and isinstance(value, _JSON_TYPES.get(kind, ()))
        and (kind == "boolean" or not isinstance(value, bool))
        for kind in kinds
    )


_KINDS: dict[type, str] = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _key_values(text: str, names: Collection[str]) -> list[tuple[str, Any]] | None:
    """``k: v, k2: "v 2"`` as pairs, when every key is one of ``names`` (once) and every
    value is unambiguous; ``None`` otherwise."""
    out: list[tuple[str, Any]] = []
    pos, end = 0, len(text)
    while True:
        key = P.ARGUMENT_KEY.match(text, pos)
        if key is None or key["key"] not in names or any(k == key["key"] for k, _ in out):
            return None
        pos = key.end()
        value: Any
        if pos < end and text[pos] == '"':
            try:
                value, pos, _ = decode(text, pos)
            except ValueError:
                return None
        elif pos < end and text[pos] == "'":
            close = text.find("'", pos + 1)
            if close < 0 or "\n" in text[pos:close]:
                return None
            value, pos = text[pos + 1 : close], close + 1
        else:
            found = (text.find(sep, pos) for sep in _SEPARATORS)
            stop = min((i for i in found if i >= 0), default=end)
            value = text[pos:stop].strip()
            if (
                not value
                or any(q in value for q in _QUOTES)
                or value in ("null", "None")
                or _names_a_parameter(value, names)
            ):
                return None
            pos = stop
        out.append((key["key"], value))
        while pos < end and text[pos] in " \t":
            pos += 1
        if pos >= end:
            return out
        if text[pos] not in _SEPARATORS:
            return None
        pos += 1
        if not text[pos:].strip():
            return out


def _names_a_parameter(text: str, names: Collection[str]) -> bool:
    """Whether a parameter's name stands as a key somewhere in ``text``."""
    return any(m["key"] in names for m in P.ARGUMENT_KEY_ANYWHERE.finditer(text))
