"""Tolerant JSON: the value a model meant, and a report of every repair it took.

:func:`repair_json` first tries :func:`json.loads`; valid JSON comes back untouched with
no repairs (but ``duplicate_key``, below). Anything else goes through a single-pass
tolerant decoder that keeps an explicit stack (no recursion, nesting capped at
:data:`MAX_DEPTH`) and records each tolerance it applies as a short, stable code:

``duplicate_key``
    an object gives one key two different values (``{"path": "/tmp/a", "path":
    "/home"}``): decoding keeps the last, the model may have meant either (a guess,
    :mod:`.duplicates`); reported for valid JSON too.
``code_fence``
    the JSON was wrapped in a Markdown code fence (```json ... ```).
``extracted_from_text``
    the JSON sat inside prose; the first complete JSON object (or array holding
    objects) was taken, else the first complete value (so a citation ``[1]`` before
    the arguments does not win). Fenced blocks in the prose are tried first.
``extracted_fragment``
    with ``extracted_from_text``: something before the value that looks like JSON failed to
    decode, so the value may be a fragment of it and which part the model meant is a
    guess: ``"{{A: {{}}}}`` is not ``{}``.
``bom``
    a byte-order mark before the value.
``doubled_braces``
    ``{{ ... }}`` as left by f-string / ``str.format`` templates (doubled at both ends);
    every ``{{``/``}}`` became ``{``/``}`` (also inside strings).
``comment``
    ``// ...``, ``/* ... */`` or ``# ...`` comments outside strings.
``single_quotes``
    ``'...'`` strings.
``smart_quotes``
    ``“...”`` or ``‘...’`` strings.
``mixed_quotes``
    a string opened by a curly quote and closed by a straight one (``“null"``).
``python_literal``
    ``True``, ``False``, ``None``.
``unquoted_key``
    ``{key: ...}``.
``unquoted_value``
    ``{"city": Paris}``: a bare word as an object value (not in arrays, and never when
    the JSON is extracted from prose), read up to the next ``, } ]`` or line end.
``trailing_comma``
    ``[1, 2,]``, ``{"a": 1,}``.
``extra_comma``
    ``[1,, 2]``, ``{, "a": 1}``.
``missing_comma``
    ``{"a": 1 "b": 2}``, ``[1 2]``.
``missing_colon``
    ``{"a" 1}``, or ``=`` where the colon goes.
``fullwidth_delimiter``
    a full-width ``：`` or ``，`` outside the strings, as Chinese models write them
    (``{"userId"："user_2"，"days"："10"}``): a quote followed by ``，`` closes its string.
``control_char_in_string``
    a raw newline, tab or other control character inside a string.
``invalid_escape``
    a backslash escape JSON does not know (``"C:\\Users"``): kept as written.
``unescaped_quote``
    a quote inside a string that cannot close it (it is not followed by ``, : } ]``
    or a line end): kept as a character.
``missing_quote``
    a string still open at the end of the text.
``missing_closing_bracket``
    brackets still open at the end of the text. Lossless where nothing else is missing:
    right after a complete value, in text not cut by a length limit, the closing brackets
    are the one completion there is (``close_brackets=True``, the closing-bracket rule).
``mismatched_bracket``
    a bracket closed by an enclosing bracket of the other kind (``{"a": [1}``), or a
    closing bracket inside the value with nothing to close (``{"a": 1], "b": 2}``).
``truncated_after_comma``
    the text ends right after a comma inside an object or array (cut off: more was
    coming); what was written before it is kept.
``truncated_number``
    brackets still open at the end of the text right after a number: the number may be
    cut (``{"n": 1`` of ``{"n": 12}``).
``bracket_in_comment``
    brackets still open at the end of the text when a comment ran to the end: the
    closing brackets may be inside the comment (``{"a": "x" // "y"}``).
``extra_closing_bracket``
    closing brackets after the complete value, e.g. the trailing ``}]`` of seed 001.
``extra_data``
    prose after a complete value: the value is returned.
``extra_value``
    a second value (or a quote or bracket on the same line) after a complete value: the
    first value is returned, but where the value the model meant ends is a guess.
``number_format``
    ``+1``, ``.5``, ``5.``; a number with leading zeros (``007``) becomes the *string*
    ``"007"`` so no digit is lost.

Valid JSON of any size is decoded; broken JSON longer than :data:`MAX_REPAIR_CHARS`
is refused rather than repaired.

What it will not do: invent values. ``{"a": }``, ``{"a"`` and ``{"a": 1, "b":`` raise
:class:`~react_engine.errors.JSONRepairError`, as do bare words in arrays, nesting deeper
than :data:`MAX_DEPTH` and text with no JSON value at all. A one-element array around an
object is returned as the array it is: unwrapping it is the caller's business (the ReAct
parser does it for action arguments and reports ``unwrapped_array``). ``strict=True``
turns everything off: valid JSON or :class:`~react_engine.errors.JSONRepairError`.
``allow_truncated=False`` keeps every repair but ``missing_quote`` and the closing of
brackets still open at the end of the text: cut-off text is an error. Tool arguments are
decoded that way, since closing ``{"path": "/tmp/important/sub`` would run a tool on a
value the model never finished writing.

A code fence inside a JSON string (``{"code": "```py ...```"}``) does not close the
fence around the JSON: :func:`fence_close` looks for the closing fence after the
complete value.

The decoder runs in time linear in the length of the text: strings, numbers and
whitespace are consumed by compiled patterns, and the search for JSON inside prose
resumes after each failed attempt instead of retrying inside it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from ..errors import JSONRepairError
from . import patterns as P
from .duplicates import conflicts, has_conflict, marked, object_from_pairs

__all__ = [
    "JSON_REPAIR_CODES",
    "MAX_DEPTH",
    "MAX_REPAIR_CHARS",
    "RepairResult",
    "decode_prefix",
    "fence_body",
    "fence_close",
    "repair_json",
]

MAX_DEPTH: Final = 500
"""Deepest nesting the tolerant decoder accepts (``json.loads`` stops near 1000)."""

MAX_REPAIR_CHARS: Final = 100_000
"""Longest text the tolerant decoder takes on (valid JSON of any size takes the fast
path). A model's broken JSON is never this long; the bound keeps hostile input cheap."""

MAX_CANDIDATES: Final = 64
"""How many places inside prose are tried before giving up on finding JSON there."""

JSON_REPAIR_CODES: Final = frozenset(
    {
        "code_fence",
        "duplicate_key",
        "extracted_from_text",
        "extracted_fragment",
        "bom",
        "doubled_braces",
        "comment",
        "single_quotes",
        "smart_quotes",
        "mixed_quotes",
        "python_literal",
        "unquoted_key",
        "unquoted_value",
        "trailing_comma",
        "extra_comma",
        "missing_comma",
        "missing_colon",
        "fullwidth_delimiter",
        "control_char_in_string",
        "invalid_escape",
        "unescaped_quote",
        "missing_quote",
        "missing_closing_bracket",
        "mismatched_bracket",
        "bracket_in_comment",
        "truncated_after_comma",
        "truncated_number",
        "extra_closing_bracket",
        "extra_data",
        "extra_value",
        "number_format",
    }
)
"""Every code :func:`repair_json` may report."""


@dataclass(slots=True, frozen=True)
class RepairResult:
    """A decoded JSON value and the repairs it took (empty for valid JSON)."""

    value: Any
    repairs: tuple[str, ...] = ()


def repair_json(
    text: str, *, strict: bool = False, allow_truncated: bool = True, close_brackets: bool = False
) -> RepairResult:
    """Decode ``text`` as JSON, repairing what models typically get wrong.

    Raises :class:`~react_engine.errors.JSONRepairError` (with the offset where decoding
    gave up) when no repair yields the value the model meant; never returns a stand-in
    such as ``{}``. With ``allow_truncated=False``, text that ends inside a value (a
    string, object or array still open at the end: ``{"path": "/tmp/imp``) is an error
    instead of being closed (``missing_quote``, ``missing_closing_bracket`` at the end):
    what a cut-off tool call needs, where closing it would invent a value.
    ``close_brackets=True`` relaxes that by one case, the closing-bracket rule: brackets
    still open at the end of the text right after a complete value (a closed string, a
    literal, a closed container; not a number, a comma, a key or an opening bracket) have
    exactly one completion, and are closed (``missing_closing_bracket``). Only for text
    that was not cut by a length limit: the caller (or the policy, which owns length cuts)
    makes sure of that.
    """
    try:
        before = marked()
        value = _DECODER.decode(text)
        if marked() != before and has_conflict(value):
            return RepairResult(value, ("duplicate_key",))
        return RepairResult(value)
    except json.JSONDecodeError as exc:
        if strict:
            raise JSONRepairError(f"invalid JSON: {exc.msg}", text=text, pos=exc.pos) from None
    except (ValueError, RecursionError) as exc:
        if strict:
            raise JSONRepairError(f"invalid JSON: {exc}", text=text, pos=0) from None
    if len(text) > MAX_REPAIR_CHARS:
        raise JSONRepairError(
            f"invalid JSON too long to repair ({len(text)} > {MAX_REPAIR_CHARS} characters)",
            text=text,
            pos=0,
        )
    repairs = _Repairs(allow_truncated, close_brackets)
    value = _repair(text, repairs)
    return RepairResult(value, repairs.codes())


def decode_prefix(
    text: str, pos: int = 0, *, allow_truncated: bool = True
) -> tuple[Any, int, tuple[str, ...]]:
    """Decode the JSON value that starts at ``pos``; return it, where it ends, and repairs.

    Text after the value is left alone (no ``extra_data``). Used by the ReAct parser to
    find a JSON blob inside a reply. ``allow_truncated`` as for :func:`repair_json`.
    """
    try:
        before = marked()
        value, end = _DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError):
        pass
    else:
        if marked() != before and has_conflict(value):
            return value, end, ("duplicate_key",)
        return value, end, ()
    if len(text) - pos > MAX_REPAIR_CHARS:
        raise JSONRepairError("invalid JSON too long to repair", text=text, pos=pos)
    repairs = _Repairs(allow_truncated)
    value, end = _decode(text, pos, len(text), repairs, allow_bare=True)
    return value, end, repairs.codes()


_DECODER: Final = json.JSONDecoder(object_pairs_hook=object_from_pairs)


class _Repairs:
    """An ordered set of repair codes."""

    __slots__ = ("_seen", "allow_truncated", "close_brackets", "comment_to_end")

    def __init__(self, allow_truncated: bool = True, close_brackets: bool = False) -> None:
        self._seen: dict[str, None] = {}
        self.allow_truncated = allow_truncated
        """Close what is still open at the end of the text (else that is an error)."""
        self.close_brackets = close_brackets
        """With ``allow_truncated`` off: still close brackets open after a complete value."""
        self.comment_to_end = False
        """A comment ran to the end of the text (closing brackets may be inside it)."""

    def child(self) -> _Repairs:
        """A fresh set for one attempt, under the same rules."""
        return _Repairs(self.allow_truncated, self.close_brackets)

    def add(self, code: str) -> None:
        self._seen[code] = None

    def extend(self, codes: _Repairs) -> None:
        self._seen.update(codes._seen)

    def codes(self) -> tuple[str, ...]:
        return tuple(self._seen)


def run_end(pattern: re.Pattern[str], s: str, pos: int, hi: int) -> int:
    """Where a run of ``pattern`` (one that also matches the empty string) starting at
    ``pos`` ends."""
    m = pattern.match(s, pos, hi)
    assert m is not None, "run patterns match the empty string"
    return m.end()


def _error(message: str, text: str, pos: int) -> JSONRepairError:
    return JSONRepairError(message, text=text, pos=min(max(pos, 0), len(text)))


# --- the whole text ----------------------------------------------------------------------


def _repair(text: str, repairs: _Repairs) -> Any:
    s = text
    lo, hi = 0, len(s)
    lo = run_end(P.JSON_WS, s, lo, hi)
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
    pos = _skip(s, lo, hi, repairs)
    if pos >= hi:
        raise _error("no JSON value", text, pos)
    first = s[pos]
    if first in "{[":
        attempt = repairs.child()
        try:
            value, end = _decode(s, pos, hi, attempt, allow_bare=True)
        except JSONRepairError as exc:
            if exc.pos - pos > 1 or first == "{":
                raise _error(_reason(exc), text, exc.pos) from None
            # "[Note] ..." is prose that happens to start with a bracket
            return _extract(text, s, pos + 1, hi, repairs, exc)
        repairs.extend(attempt)
        _trailing(s, end, hi, repairs)
        return value
    # a scalar on its own ("True", "'hello'"), JSON somewhere in prose, or a scalar
    # followed by prose ('"Paris" is the answer') when the prose holds no JSON
    attempt = repairs.child()
    try:
        value, end = _decode(s, pos, hi, attempt, allow_bare=False)
    except JSONRepairError:
        return _extract(text, s, pos, hi, repairs, None)
    if _skip(s, end, hi, attempt) >= hi:
        repairs.extend(attempt)
        return value
    try:  # JSON after a scalar ('"{"A": {}}'): maybe a fragment of what was meant
        after = _error("a value before the JSON", text, end)
        return _extract(text, s, end, hi, repairs, after)
    except JSONRepairError:
        repairs.extend(attempt)
        repairs.add("extra_data")
        return value


def _reason(exc: JSONRepairError) -> str:
    message = str(exc.args[0]) if exc.args else "invalid JSON"
    return message.rsplit(" (at offset", 1)[0]


def fence_body(s: str, fence: re.Match[str], hi: int) -> tuple[int, int, int]:
    """For a fence opened by ``fence``: where its content starts and ends, and where the
    closing fence ends (``hi`` when it is never closed)."""
    start = fence.end()
    eol = s.find("\n", start, hi)
    if eol >= 0 and not s[start:eol].strip():
        start = eol + 1
    marker = fence.group("fence")
    close = fence_close(s, start, hi, marker)
    if close < 0:
        return start, hi, hi
    return start, close, close + len(marker)


def fence_close(s: str, start: int, hi: int, marker: str) -> int:
    """Where the fence ``marker`` closing a block whose content starts at ``start`` is,
    or -1 when the block is never closed.

    A fence inside a JSON string (``{"code": "```py ...```"}``) does not close the block:
    when the content is a JSON object or array, the first fence after the complete value
    (and only whitespace) closes it. Otherwise the first fence does.
    """
    first = s.find(marker, start, hi)
    if first < 0:
        return -1
    lo = run_end(P.JSON_WS, s, start, hi)
    if lo >= first or s[lo] not in "{[":
        return first
    if hi - lo > MAX_REPAIR_CHARS and _brackets_end(s, lo, first) is not None:
        # a long value (only decoded, never repaired) whose brackets close before the
        # first fence: decoded, it ends there too, or it is not JSON; either way the first
        # fence closes the block (a reply of thousands of calls is not decoded whole here)
        return first
    end = _complete_value_end(s, lo, hi)
    if end is not None and end > first:
        after = run_end(P.JSON_WS, s, end, hi)
        if s.startswith(marker, after, hi):
            return after
    return first


def _brackets_end(s: str, lo: int, hi: int) -> int | None:
    """Where the bracket at ``s[lo]`` is closed before ``hi``, skipping JSON strings: where
    the JSON value starting there ends if it is JSON (``None``: not closed before ``hi``)."""
    depth = 0
    pos = lo
    while True:
        match = P.JSON_STRUCTURE.search(s, pos, hi)
        if match is None:
            return None
        pos = match.end()
        char = match.group()
        if char == '"':
            while True:  # to the closing quote, past escapes
                match = P.QUOTE_OR_ESCAPE.search(s, pos, hi)
                if match is None:
                    return None
                pos = match.end() + (match.group() == "\\")
                if match.group() == '"':
                    break
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return pos


def _complete_value_end(s: str, lo: int, hi: int) -> int | None:
    """Where the complete JSON value (repaired, not cut off) starting at ``lo`` ends."""
    try:
        return _DECODER.raw_decode(s if hi == len(s) else s[:hi], lo)[1]
    except (ValueError, RecursionError):
        pass
    if hi - lo > MAX_REPAIR_CHARS:
        return None
    try:
        return _decode(s, lo, hi, _Repairs(allow_truncated=False), allow_bare=False)[1]
    except JSONRepairError:
        return None


def _trailing(s: str, pos: int, hi: int, repairs: _Repairs) -> None:
    pos = _skip(s, pos, hi, repairs)
    if pos >= hi:
        return
    rest = s[pos:hi]
    if rest.strip(" \t\r\n}]") == "":
        repairs.add("extra_closing_bracket")
    elif _another_value(s, pos, hi):
        repairs.add("extra_value")
    else:
        repairs.add("extra_data")


def _another_value(s: str, pos: int, hi: int) -> bool:
    """Whether the text after a complete value (at ``pos``) may be part of what the model
    meant as the value: right after it on the same line, or holding a quote or bracket
    there, or another value after closers and commas (``{...}, {...}``)."""
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
    text: str, s: str, pos: int, hi: int, repairs: _Repairs, first_error: JSONRepairError | None
) -> Any:
    """The first complete JSON value inside prose: fenced blocks first, then brackets."""
    error = first_error
    fence_at = s.find("```", pos, hi)
    if fence_at >= 0:
        fence = P.FENCE_OPEN.match(s, fence_at, hi)
        assert fence is not None, "FENCE_OPEN matches wherever ``` is"
        body, body_end, _tail = fence_body(s, fence, hi)
        inner = s[body:body_end]
        if inner.strip()[:1] in ("{", "["):
            try:
                result = repair_json(inner, allow_truncated=repairs.allow_truncated)
            except JSONRepairError as exc:
                error = error or exc
            else:
                repairs.add("code_fence")
                repairs.add("extracted_from_text")
                for code in result.repairs:
                    repairs.add(code)
                return result.value
    resume = pos
    tried = 0
    fallback: list[tuple[Any, _Repairs, int]] = []  # the first value that holds no object
    for m in P.JSON_OPEN.finditer(s, pos, hi):
        start = m.start()
        if start < resume:
            continue
        tried += 1
        if tried > MAX_CANDIDATES:
            break
        attempt = repairs.child()
        try:
            value, end = _decode(s, start, hi, attempt, allow_bare=False)
        except _TooDeep as exc:
            raise _error(_reason(exc), text, exc.pos) from None
        except JSONRepairError as exc:
            error = error or exc
            resume = max(exc.pos, start + 1)
            continue
        if isinstance(value, dict) or (
            isinstance(value, list) and any(isinstance(v, dict) for v in value)
        ):
            repairs.add("extracted_from_text")
            if error is not None or _quote_before(s, pos, start):  # a fragment?
                repairs.add("extracted_fragment")
            repairs.extend(attempt)
            return value
        if not fallback:
            fallback.append((value, attempt, start))  # "[1]" in prose: look for an object
        resume = end
    if fallback:
        value, attempt, _ = fallback[0]
        repairs.add("extracted_from_text")
        if error is not None or _quote_before(s, pos, fallback[0][2]):
            repairs.add("extracted_fragment")
        repairs.extend(attempt)
        return value
    if error is not None:
        raise _error(_reason(error), text, error.pos) from None
    raise _error("no JSON value in the text", text, pos)


def _quote_before(s: str, pos: int, start: int) -> bool:
    """Whether a quote that may open a string (not an apostrophe inside a word) comes
    before ``start``: the value found there may then be inside that string."""
    for m in _QUOTE.finditer(s, pos, start):
        at = m.start()
        if s[at] != "'" or at == 0 or not s[at - 1].isalpha():
            return True
    return False


_QUOTE: Final = re.compile("[\"'“”‘’{}]")


class _TooDeep(JSONRepairError):
    """Nesting beyond MAX_DEPTH: fatal, no other candidate is tried."""


# --- the decoder ------------------------------------------------------------------------------

_VALUE: Final = 0  # expecting a value
_KEY: Final = 1  # inside an object, expecting a key or "}"
_AFTER: Final = 2  # after a value inside a container, expecting "," or a closer
_FIRST: Final = 3  # just after "[", expecting a value or "]"


def _skip(s: str, pos: int, hi: int, repairs: _Repairs) -> int:
    """Skip whitespace and comments."""
    while True:
        pos = run_end(P.JSON_WS, s, pos, hi)
        if pos >= hi:
            return pos
        c = s[pos]
        if c == "/" and pos + 1 < hi and s[pos + 1] in "/*":
            repairs.add("comment")
            if s[pos + 1] == "/":
                eol = s.find("\n", pos, hi)
                pos = hi if eol < 0 else eol
            else:
                close = s.find("*/", pos + 2, hi)
                pos = hi if close < 0 else close + 2
            repairs.comment_to_end = pos >= hi
        elif c == "#":
            repairs.add("comment")
            eol = s.find("\n", pos, hi)
            pos = hi if eol < 0 else eol
            repairs.comment_to_end = pos >= hi
        else:
            return pos


def _decode(s: str, pos: int, hi: int, repairs: _Repairs, *, allow_bare: bool) -> tuple[Any, int]:
    """Decode one value starting at ``pos``; return it and the offset after it.

    Containers are attached to their parent when they open, so closing the ones still
    open at the end of the text is just returning the root. Plain strings and numbers
    take a short path; everything odd goes through :func:`_scalar`.
    """
    stack: list[Any] = []  # open containers, outermost first
    keys: list[str] = []  # the pending key of each open object ("" for arrays)
    state = _VALUE
    dangling = False  # the text ends right after a comma
    value: Any
    while True:
        if pos < hi and s[pos] in _SKIPPABLE:
            pos = _skip(s, pos, hi, repairs)
        if state == _VALUE:
            if pos >= hi:  # only where a value must follow: after a key, or at the start
                if stack:
                    raise _error(f"missing value for key {keys[-1]!r}", s, pos)
                raise _error("no JSON value", s, pos)
            c = s[pos]
            if c == "{" or c == "[":
                if len(stack) >= MAX_DEPTH:
                    raise _TooDeep(f"nesting deeper than {MAX_DEPTH}", text=s, pos=pos)
                container: Any = {} if c == "{" else []
                if stack:
                    top = stack[-1]
                    if type(top) is dict:
                        if keys[-1] in top:  # its old value against one not read yet
                            repairs.add("duplicate_key")
                        top[keys[-1]] = container
                    else:
                        top.append(container)
                stack.append(container)
                keys.append("")
                pos += 1
                state = _KEY if c == "{" else _FIRST
                continue
            value, end = _fast_scalar(s, pos, hi)
            if value is _SLOW:
                in_object = bool(stack) and type(stack[-1]) is dict
                value, end = _scalar(
                    s, pos, hi, repairs, allow_bare=allow_bare and in_object, top=not stack
                )
            pos = end
            if not stack:
                return value, pos
            top = stack[-1]
            if type(top) is dict:
                if conflicts(top, keys[-1], value):
                    repairs.add("duplicate_key")
                top[keys[-1]] = value
            else:
                top.append(value)
            state = _AFTER
            continue
        if pos >= hi:
            return _close_all(stack, repairs, s, pos, state == _AFTER and not dangling), pos
        c = s[pos]
        top = stack[-1]
        if c == "，":
            repairs.add("fullwidth_delimiter")
            c = ","
        if state == _KEY:
            if c == "}":
                state = _AFTER  # falls through to the closing code below
            elif c == ",":
                repairs.add("extra_comma")
                pos += 1
                continue
            else:
                key, pos = _key(s, pos, hi, repairs)
                if pos < hi and s[pos] in _SKIPPABLE:
                    pos = _skip(s, pos, hi, repairs)
                if pos < hi and s[pos] == ":":
                    pos += 1
                elif pos < hi and s[pos] == "：":
                    repairs.add("fullwidth_delimiter")
                    pos += 1
                elif pos < hi and s[pos] == "=":
                    repairs.add("missing_colon")  # "=" in its place
                    pos += 1
                elif pos < hi and _starts_value(s[pos]):
                    repairs.add("missing_colon")
                else:
                    raise _error(f"expected ':' after key {key!r}", s, pos)
                keys[-1] = key
                state = _VALUE
                continue
        elif state == _FIRST:
            if c == ",":
                repairs.add("extra_comma")
                pos += 1
                continue
            if c != "]" and c != "}":
                state = _VALUE
                continue
        # state == _AFTER: after a value, expecting "," or a closing bracket
        if c == ",":
            pos += 1
            if pos < hi and s[pos] in _SKIPPABLE:
                pos = _skip(s, pos, hi, repairs)
            while pos < hi and s[pos] in ",，":
                repairs.add("extra_comma")
                pos = _skip(s, pos + 1, hi, repairs)
            if pos >= hi:
                repairs.add("truncated_after_comma")  # more may have followed: cut off
                dangling = True
                continue
            if s[pos] == ("}" if type(top) is dict else "]"):
                repairs.add("trailing_comma")
                continue
            state = _KEY if type(top) is dict else _VALUE
            continue
        if c == "}" or c == "]":
            if c != ("}" if type(top) is dict else "]"):
                if not any(_closer(f) == c for f in stack):
                    repairs.add("mismatched_bracket")  # a stray closer inside the value
                    pos += 1
                    continue
                repairs.add("mismatched_bracket")  # closed by an enclosing bracket
            else:
                pos += 1
            stack.pop()
            keys.pop()
            if not stack:
                return top, pos
            state = _AFTER  # the closed container is a value of its parent
            continue
        if type(top) is dict and _starts_key(c):
            repairs.add("missing_comma")
            state = _KEY
            continue
        if type(top) is list and _starts_value(c):
            repairs.add("missing_comma")
            state = _VALUE
            continue
        raise _error(f"unexpected {c!r}", s, pos)


_SKIPPABLE: Final = frozenset(" \t\n\r/#")
_NUMBER_TAIL: Final = frozenset(".eE+-_0123456789") | frozenset(
    "abcdfghijklmnopqrstuvwxyzABCDFGHIJKLMNOPQRSTUVWXYZ$"
)
_PLAIN_STRING: Final = P.STRING_CHUNK['"']


def _fast_scalar(s: str, pos: int, hi: int) -> tuple[Any, int]:
    """A well-formed string or number at ``pos``, or ``(_SLOW, pos)`` to take the long way.

    Accepts exactly what :func:`_scalar` would read the same way without any repair.
    """
    c = s[pos]
    if c == '"':
        end = run_end(_PLAIN_STRING, s, pos + 1, hi)
        if end < hi and s[end] == '"':
            after = run_end(P.AFTER_QUOTE, s, end + 1, hi)
            if after >= hi or s[after] in ",}]\n\r":
                return s[pos + 1 : end], end + 1
        return _SLOW, pos
    if c in "-0123456789":
        m = P.JSON_NUMBER.match(s, pos, hi)
        if m is not None:
            end = m.end()
            if end >= hi or s[end] not in _NUMBER_TAIL:
                token = m.group()
                if "." in token or "e" in token or "E" in token:
                    return float(token), end
                if len(token) < 19:
                    return int(token), end
    return _SLOW, pos


_SLOW: Final = object()
_NUMBER_END: Final = frozenset("0123456789.eE+-")
_E_LITERALS: Final = ("true", "True", "false", "False")


def _closer(container: Any) -> str:
    return "}" if isinstance(container, dict) else "]"


def _close_all(stack: list[Any], repairs: _Repairs, s: str, pos: int, after_value: bool) -> Any:
    """Close what is still open at the end of the text; an empty root is not a value.

    ``after_value``: the text ends right after a complete value (not after a comma, a key
    or an opening bracket), where :attr:`_Repairs.close_brackets` may close it."""
    if len(stack) == 1 and not stack[0]:
        raise _error("truncated: nothing after the opening bracket", s, pos)
    # 1 or 12? the text may end inside a number (the e of true or false is no number's)
    number = s[pos - 1 : pos] in _NUMBER_END and not s.endswith(_E_LITERALS, 0, pos)
    if not repairs.allow_truncated:
        closes = repairs.close_brackets and after_value and not number
        if not closes or repairs.comment_to_end:
            raise _error(f"truncated: {len(stack)} bracket(s) never closed", s, pos)
    repairs.add("missing_closing_bracket")
    if repairs.comment_to_end:
        repairs.add("bracket_in_comment")
    elif number:
        repairs.add("truncated_number")
    return stack[0]


def _starts_value(c: str) -> bool:
    return c in "{[\"'“”‘’-+.0123456789" or c.isalpha()


def _starts_key(c: str) -> bool:
    return c in "\"'“”‘’$_" or c.isalnum()


def _key(s: str, pos: int, hi: int, repairs: _Repairs) -> tuple[str, int]:
    c = s[pos]
    if c in "\"'“”‘’„":
        return _string(s, pos, hi, repairs, is_key=True)
    m = P.BARE_KEY.match(s, pos, hi)
    if m is None:
        raise _error(f"expected a key, found {c!r}", s, pos)
    repairs.add("unquoted_key")
    return m.group(), m.end()


def _scalar(
    s: str, pos: int, hi: int, repairs: _Repairs, *, allow_bare: bool, top: bool = False
) -> tuple[Any, int]:
    c = s[pos]
    if c in "\"'“”‘’„":
        # a string on its own ends at its first closing quote; text after it is not in it
        return _string(s, pos, hi, repairs, is_key=top)
    if c in "-+.0123456789":
        m = P.JSON_NUMBER.match(s, pos, hi)
        loose = P.LOOSE_NUMBER.match(s, pos, hi)
        lit = P.JSON_LITERAL.match(s, pos, hi) if c == "-" else None
        if lit is not None:
            return _literal(lit.group("lit"), repairs), lit.end()
        if loose is None:
            raise _error(f"unexpected {c!r}", s, pos)
        end = loose.end()
        if end < hi and (s[end].isalnum() or s[end] == "_"):
            if allow_bare:
                return _bare(s, pos, hi, repairs)
            raise _error("malformed number", s, end)
        token = loose.group()
        if m is None or m.end() != end:
            repairs.add("number_format")
            digits = token.lstrip("+-")
            if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
                return token.lstrip("+"), end  # leading zeros: keep every digit
        try:
            if any(ch in token for ch in ".eE"):
                return float(token), end
            return int(token), end
        except ValueError:
            raise _error("number out of range", s, pos) from None
    lit = P.JSON_LITERAL.match(s, pos, hi)
    if lit is not None:
        return _literal(lit.group("lit"), repairs), lit.end()
    if allow_bare:
        return _bare(s, pos, hi, repairs)
    raise _error(f"unexpected {c!r}", s, pos)


def _literal(word: str, repairs: _Repairs) -> Any:
    if word in ("True", "False", "None"):
        repairs.add("python_literal")
    return _LITERALS[word]


_LITERALS: Final[dict[str, Any]] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


def _bare(s: str, pos: int, hi: int, repairs: _Repairs) -> tuple[str, int]:
    m = P.BARE_VALUE.match(s, pos, hi)
    if m is None:
        raise _error(f"unexpected {s[pos]!r}", s, pos)
    word = m.group().rstrip(" \t")
    repairs.add("unquoted_value")
    return word, pos + len(word)


_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


def _string(
    s: str, pos: int, hi: int, repairs: _Repairs, *, is_key: bool, raw: bool = False
) -> tuple[str, int]:
    """A string opened at ``pos`` by any kind of quote; returns it and the offset after it.

    A backslash escape JSON does not know (``"C:\\Users"``) means the model wrote
    backslashes as they are: the string is read again with every backslash literal
    (except before its own quote), so ``\\notes`` stays a backslash and an ``n``.
    """
    quote = s[pos]
    if quote == '"':
        chunk = P.STRING_CHUNK['"']
    elif quote == "'":
        repairs.add("single_quotes")
        chunk = P.STRING_CHUNK["'"]
    else:
        repairs.add("smart_quotes")
        chunk = P.STRING_CHUNK["‘" if quote in "‘’" else "“"]
    parts: list[str] = []
    i = pos + 1
    while True:
        end = run_end(chunk, s, i, hi)
        if end > i:
            parts.append(s[i:end])
            i = end
        if i >= hi:
            _open_string(s, i, repairs)
            return "".join(parts), i
        c = s[i]
        if c == "\\":
            if raw:
                if i + 1 < hi and s[i + 1] == quote:
                    parts.append(quote)
                    i += 2
                else:
                    parts.append(c)
                    i += 1
                continue
            i = _escape(s, i, hi, parts, repairs, quote)
            if i < 0:
                repairs.add("invalid_escape")
                return _string(s, pos, hi, repairs, is_key=is_key, raw=True)
        elif c < " ":
            repairs.add("control_char_in_string")
            parts.append(c)
            i += 1
        else:  # one of the closing quotes the chunk stops at
            after = run_end(P.AFTER_QUOTE, s, i + 1, hi)
            if _closes(s, after, hi, is_key):
                if quote in "“”‘’" and c in "\"'":
                    repairs.add("mixed_quotes")
                return "".join(parts), i + 1
            repairs.add("unescaped_quote")
            parts.append(c)
            i += 1


def _open_string(s: str, pos: int, repairs: _Repairs) -> None:
    """A string still open at the end of the text: closed, or an error for cut-off text."""
    if not repairs.allow_truncated:
        raise _error("truncated: a string is never closed", s, pos)
    repairs.add("missing_quote")


def _closes(s: str, after: int, hi: int, is_key: bool) -> bool:
    """Whether a quote followed by ``s[after:]`` closes its string.

    A key's quote always does. A value's quote does when a delimiter, a line end, a
    comment or the end of the text follows; otherwise it is an unescaped inner quote.
    """
    if is_key or after >= hi:
        return True
    nxt = s[after]
    if nxt in ",}]\n\r#，":
        return True
    return nxt == "/" and after + 1 < hi and s[after + 1] in "/*"


def _escape(s: str, i: int, hi: int, parts: list[str], repairs: _Repairs, quote: str) -> int:
    """Decode the escape at ``i``; return the offset after it, or -1 for an unknown one."""
    if i + 1 >= hi:
        _open_string(s, hi, repairs)
        return hi
    e = s[i + 1]
    if e in _ESCAPES:
        parts.append(_ESCAPES[e])
        return i + 2
    if e == "'":  # JavaScript's escaped apostrophe, valid or not in this quote
        if quote != "'":
            repairs.add("invalid_escape")
        parts.append("'")
        return i + 2
    if e == "u":
        code = s[i + 2 : i + 6]
        if len(code) == 4 and all(ch in _HEX for ch in code):
            cp = int(code, 16)
            if 0xD800 <= cp < 0xDC00 and s.startswith("\\u", i + 6):
                low = s[i + 8 : i + 12]
                if len(low) == 4 and all(ch in _HEX for ch in low):
                    lo = int(low, 16)
                    if 0xDC00 <= lo < 0xE000:
                        parts.append(chr(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)))
                        return i + 12
            parts.append(chr(cp))
            return i + 6
    return -1


_HEX: Final = frozenset("0123456789abcdefABCDEF")
