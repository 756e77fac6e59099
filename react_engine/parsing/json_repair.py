"""Tolerant JSON: the value a model meant, and a report of every repair it took.

Valid JSON comes back untouched (repair ``duplicate_key`` aside); anything else goes through
the linear tolerant decoder (:mod:`.json_decoder`). JSON inside prose: fenced blocks first,
then the first complete object (or array holding objects), else the first complete value
(so a citation ``[1]`` does not win). It never invents values: ``{"a": }``, ``{"a"`` and
``{"a": 1, "b":`` raise :class:`~react_engine.errors.JSONRepairError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from ..errors import JSONRepairError
from . import patterns as P
from .common import fence_body, unfence
from .duplicates import DUPLICATE_KEY, decode
from .json_decoder import MAX_REPAIR_CHARS, Repairs, TooDeep, decode_value, json_error, skip_blank
from .patterns import run_end

__all__ = ["RepairResult", "decode_prefix", "repair_json"]

MAX_CANDIDATES: Final = 64
"""How many places inside prose are tried before giving up on finding JSON there."""


@dataclass(slots=True, frozen=True)
class RepairResult:
    """A decoded JSON value and the repairs it took (empty for valid JSON)."""

    value: Any
    repairs: tuple[str, ...] = ()


def repair_json(
    text: str, *, allow_truncated: bool = True, close_brackets: bool = False
) -> RepairResult:
    """Decode ``text`` as JSON, repairing what models typically get wrong.

    Raises :class:`~react_engine.errors.JSONRepairError` (with the offset where decoding
    gave up) when no repair yields the value the model meant; never returns a stand-in such
    as ``{}``. ``allow_truncated=False``: text that ends inside a value is an error instead
    of being closed (closing it would invent a value); ``close_brackets=True`` still closes
    brackets open right after a complete value, for text known not to be cut off.
    """
    try:
        value, _, conflicted = decode(text)
        return RepairResult(value, DUPLICATE_KEY if conflicted else ())
    except (ValueError, RecursionError):  # json.JSONDecodeError: a ValueError
        pass
    if len(text) > MAX_REPAIR_CHARS:
        raise JSONRepairError(
            f"invalid JSON too long to repair ({len(text)} > {MAX_REPAIR_CHARS} characters)",
            text=text,
            pos=0,
        )
    repairs = Repairs(allow_truncated, close_brackets)
    value = _repair(text, repairs)
    return RepairResult(value, repairs.codes())


def decode_prefix(
    text: str, pos: int = 0, *, allow_truncated: bool = True
) -> tuple[Any, int, tuple[str, ...]]:
    """Decode the JSON value that starts at ``pos``; return it, where it ends, and repairs
    (text after it is left alone)."""
    try:
        value, end, conflicted = decode(text, pos)
        return value, end, DUPLICATE_KEY if conflicted else ()
    except (ValueError, RecursionError):
        pass
    repairs = Repairs(allow_truncated)
    value, end = decode_value(text, pos, len(text), repairs, allow_bare=True)
    return value, end, repairs.codes()


def _repair(text: str, repairs: Repairs) -> Any:
    s, hi = text, len(text)
    lo = run_end(P.JSON_WS, s, 0, hi)
    if s.startswith("\ufeff", lo):
        repairs.add("bom")
        lo = run_end(P.JSON_WS, s, lo + 1, hi)
    fence = P.FENCE_OPEN.match(s, lo, hi)
    if fence is not None and fence.start("fence") == lo:
        repairs.add("code_fence")
        lo, close, tail = fence_body(s, fence, hi)
        if s[tail:hi].strip():
            repairs.add("extracted_from_text")
        hi = close
    lo = run_end(P.JSON_WS, s, lo, hi)
    if s.startswith("{{", lo) and s[lo:hi].rstrip().endswith("}}"):  # a template's escaping
        repairs.add("doubled_braces")
        s = s[lo:hi].replace("{{", "{").replace("}}", "}")
        lo, hi = 0, len(s)
        if s.startswith("{{") and s.rstrip().endswith("}}"):  # escaped twice, at both ends
            s = s.replace("{{", "{").replace("}}", "}")
            hi = len(s)
    pos = skip_blank(s, lo, hi, repairs)
    if pos >= hi:
        raise json_error("no JSON value", text, pos)
    first = s[pos]
    if first in "{[":
        attempt = repairs.child()
        try:
            value, end = decode_value(s, pos, hi, attempt, allow_bare=True)
        except JSONRepairError as exc:
            if exc.pos - pos > 1 or first == "{":
                raise json_error(_reason(exc), text, exc.pos) from None
            # "[Note] ..." is prose that happens to start with a bracket
            return _extract(text, s, pos + 1, hi, repairs, exc)
        repairs.extend(attempt)
        _trailing(s, end, hi, repairs)
        return value
    # a scalar on its own ("True", "'hello'"), JSON somewhere in prose, or a scalar
    # followed by prose ('"Paris" is the answer') when the prose holds no JSON
    attempt = repairs.child()
    try:
        value, end = decode_value(s, pos, hi, attempt, allow_bare=False)
    except JSONRepairError:
        return _extract(text, s, pos, hi, repairs, None)
    if skip_blank(s, end, hi, attempt) >= hi:
        repairs.extend(attempt)
        return value
    try:  # JSON after a scalar ('"{"A": {}}'): maybe a fragment of what was meant
        after = json_error("a value before the JSON", text, end)
        return _extract(text, s, end, hi, repairs, after)
    except JSONRepairError:
        repairs.extend(attempt)
        repairs.add("extra_data")
        return value


def _reason(exc: JSONRepairError) -> str:
    message = str(exc.args[0]) if exc.args else "invalid JSON"
    return message.rsplit(" (at offset", 1)[0]


def _trailing(s: str, pos: int, hi: int, repairs: Repairs) -> None:
    pos = skip_blank(s, pos, hi, repairs)
    if pos >= hi:
        return
    if s[pos:hi].strip(" \t\r\n}]") == "":
        repairs.add("extra_closing_bracket")
    elif _another_value(s, pos, hi):
        repairs.add("extra_value")
    else:
        repairs.add("extra_data")


def _another_value(s: str, pos: int, hi: int) -> bool:
    """Whether the text after a complete value may be part of it: on the same line right
    after it, a quote or bracket on that line, or another value after closers and commas."""
    if pos > 0 and s[pos - 1] not in " \t\r\n":
        return True
    eol = s.find("\n", pos, hi)
    line = s[pos : hi if eol < 0 else eol]
    if any(c in _VALUE_MARKS for c in line):
        return True
    after = s[pos:hi].lstrip(" \t\r\n}],，")
    return after[:1] in _VALUE_MARKS


_VALUE_MARKS: Final = frozenset("{}[]\"'“”‘’")


def _extract(
    text: str, s: str, pos: int, hi: int, repairs: Repairs, first_error: JSONRepairError | None
) -> Any:
    """The first complete JSON value inside prose: fenced blocks first, then brackets."""
    error = first_error
    fence_at = s.find("```", pos, hi)
    if fence_at >= 0:
        inner = (unfence(s[fence_at:hi]) or ("", ""))[0]
        if inner.strip()[:1] in ("{", "["):
            try:
                result = repair_json(inner, allow_truncated=repairs.allow_truncated)
            except JSONRepairError as exc:
                error = error or exc
            else:
                for code in ("code_fence", "extracted_from_text", *result.repairs):
                    repairs.add(code)
                return result.value
    resume = pos
    tried = 0
    chosen: tuple[Any, Repairs, int] | None = None  # an object, else the first value ("[1]")
    for m in P.JSON_OPEN.finditer(s, pos, hi):
        start = m.start()
        if start < resume:
            continue
        tried += 1
        if tried > MAX_CANDIDATES:
            break
        attempt = repairs.child()
        try:
            value, end = decode_value(s, start, hi, attempt, allow_bare=False)
        except TooDeep as exc:
            raise json_error(_reason(exc), text, exc.pos) from None
        except JSONRepairError as exc:
            error = error or exc
            resume = max(exc.pos, start + 1)
            continue
        holds_object = isinstance(value, dict) or (
            isinstance(value, list) and any(isinstance(v, dict) for v in value)
        )
        if holds_object or chosen is None:
            chosen = (value, attempt, start)
        if holds_object:
            break
        resume = end
    if chosen is not None:
        value, attempt, start = chosen
        repairs.add("extracted_from_text")
        if error is not None or _quote_before(s, pos, start):  # a fragment?
            repairs.add("extracted_fragment")
        repairs.extend(attempt)
        return value
    if error is not None:
        raise json_error(_reason(error), text, error.pos) from None
    raise json_error("no JSON value in the text", text, pos)


def _quote_before(s: str, pos: int, start: int) -> bool:
    """Whether a quote that may open a string (not an apostrophe inside a word) comes
    before ``start``: the value found there may then be inside that string."""
    return any(
        s[at] != "'" or at == 0 or not s[at - 1].isalpha()
        for at in (m.start() for m in _QUOTE.finditer(s, pos, start))
    )


_QUOTE: Final = re.compile("[\"'“”‘’{}]")
