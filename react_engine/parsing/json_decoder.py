"""The tolerant decoder of one JSON value, and the repairs it records.

:func:`decode_value` uses an explicit stack (nesting capped at :data:`MAX_DEPTH`) and
compiled patterns, so it runs in time linear in the length of the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import JSONRepairError
from . import patterns as P
from .duplicates import assign
from .patterns import run_end

__all__ = [
    "MAX_DEPTH",
    "MAX_REPAIR_CHARS",
    "Repairs",
    "TooDeep",
    "decode_value",
    "json_error",
    "skip_blank",
]

MAX_DEPTH: Final = 500
"""Deepest nesting the tolerant decoder accepts (``json.loads`` stops near 1000)."""

MAX_REPAIR_CHARS: Final = 100_000
"""Longest broken JSON the tolerant decoder takes on (valid JSON of any size is fine)."""


@dataclass(slots=True)
class Repairs:
    """An ordered set of repair codes, and the rules of one decoding."""

    allow_truncated: bool = True
    """Close what is still open at the end of the text (else that is an error)."""
    close_brackets: bool = False
    """With ``allow_truncated`` off: still close brackets open after a complete value."""
    comment_to_end: bool = False
    """A comment ran to the end of the text (closing brackets may be inside it)."""
    seen: dict[str, None] = field(default_factory=dict)

    def child(self) -> Repairs:
        return Repairs(self.allow_truncated, self.close_brackets)

    def add(self, code: str) -> None:
        self.seen[code] = None

    def extend(self, codes: Repairs) -> None:
        self.seen.update(codes.seen)

    def codes(self) -> tuple[str, ...]:
        return tuple(self.seen)


def json_error(message: str, text: str, pos: int) -> JSONRepairError:
    """The error of a text that does not decode, at ``pos`` (kept inside the text)."""
    return JSONRepairError(message, text=text, pos=min(max(pos, 0), len(text)))


class TooDeep(JSONRepairError):
    """Nesting beyond MAX_DEPTH: fatal, no other candidate is tried."""


_VALUE: Final = 0  # expecting a value
_KEY: Final = 1  # inside an object, expecting a key or "}"
_AFTER: Final = 2  # after a value inside a container, expecting "," or a closer
_FIRST: Final = 3  # just after "[", expecting a value or "]"


def skip_blank(s: str, pos: int, hi: int, repairs: Repairs) -> int:
    """Skip whitespace and comments."""
    while True:
        pos = run_end(P.JSON_WS, s, pos, hi)
        if pos >= hi:
            return pos
        if s.startswith("/*", pos, hi):
            close = s.find("*/", pos + 2, hi)
            pos = hi if close < 0 else close + 2
        elif s[pos] == "#" or s.startswith("//", pos, hi):
            eol = s.find("\n", pos, hi)
            pos = hi if eol < 0 else eol
        else:
            return pos
        repairs.add("comment")
        repairs.comment_to_end = pos >= hi


def decode_value(
    s: str, pos: int, hi: int, repairs: Repairs, *, allow_bare: bool
) -> tuple[Any, int]:
    """Decode one value starting at ``pos``; return it and the offset after it. Containers
    join their parent when they open, so closing those open at the end is returning the root."""
    if hi - pos > MAX_REPAIR_CHARS:
        raise json_error("invalid JSON too long to repair", s, pos)
    stack: list[Any] = []  # open containers, outermost first
    keys: list[str] = []  # the pending key of each open object ("" for arrays)
    state = _VALUE
    dangling = False  # the text ends right after a comma
    value: Any
    while True:
        if pos < hi and s[pos] in _SKIPPABLE:
            pos = skip_blank(s, pos, hi, repairs)
        if state == _VALUE:
            if pos >= hi:  # only where a value must follow: after a key, or at the start
                if stack:
                    raise json_error(f"missing value for key {keys[-1]!r}", s, pos)
                raise json_error("no JSON value", s, pos)
            c = s[pos]
            if c == "{" or c == "[":
                if len(stack) >= MAX_DEPTH:
                    raise TooDeep(f"nesting deeper than {MAX_DEPTH}", text=s, pos=pos)
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
            in_object = bool(stack) and type(stack[-1]) is dict
            value, pos = _scalar(
                s, pos, hi, repairs, allow_bare=allow_bare and in_object, top=not stack
            )
            if not stack:
                return value, pos
            top = stack[-1]
            if type(top) is dict:
                if assign(top, keys[-1], value):
                    repairs.add("duplicate_key")
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
                    pos = skip_blank(s, pos, hi, repairs)
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
                    raise json_error(f"expected ':' after key {key!r}", s, pos)
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
                pos = skip_blank(s, pos, hi, repairs)
            while pos < hi and s[pos] in ",，":
                repairs.add("extra_comma")
                pos = skip_blank(s, pos + 1, hi, repairs)
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
                if not any(("}" if type(f) is dict else "]") == c for f in stack):
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
        if type(top) is dict and (c in "\"'“”‘’$_" or c.isalnum()):  # a key
            repairs.add("missing_comma")
            state = _KEY
            continue
        if type(top) is list and _starts_value(c):
            repairs.add("missing_comma")
            state = _VALUE
            continue
        raise json_error(f"unexpected {c!r}", s, pos)


_SKIPPABLE: Final = frozenset(" \t\n\r/#")
_NUMBER_END: Final = frozenset("0123456789.eE+-")
_E_LITERALS: Final = ("true", "True", "false", "False")


def _close_all(stack: list[Any], repairs: Repairs, s: str, pos: int, after_value: bool) -> Any:
    """Close what is still open at the end of the text (``after_value``: right after a
    complete value, where :attr:`Repairs.close_brackets` may close it)."""
    if len(stack) == 1 and not stack[0]:
        raise json_error("truncated: nothing after the opening bracket", s, pos)
    # 1 or 12? the text may end inside a number (the e of true or false is no number's)
    number = s[pos - 1 : pos] in _NUMBER_END and not s.endswith(_E_LITERALS, 0, pos)
    if not repairs.allow_truncated:
        closes = repairs.close_brackets and after_value and not number
        if not closes or repairs.comment_to_end:
            raise json_error(f"truncated: {len(stack)} bracket(s) never closed", s, pos)
    repairs.add("missing_closing_bracket")
    if repairs.comment_to_end:
        repairs.add("bracket_in_comment")
    elif number:
        repairs.add("truncated_number")
    return stack[0]


def _starts_value(c: str) -> bool:
    return c in "{[\"'“”‘’-+.0123456789" or c.isalpha()


def _key(s: str, pos: int, hi: int, repairs: Repairs) -> tuple[str, int]:
    c = s[pos]
    if c in "\"'“”‘’„":
        return _string(s, pos, hi, repairs, is_key=True)
    m = P.BARE_KEY.match(s, pos, hi)
    if m is None:
        raise json_error(f"expected a key, found {c!r}", s, pos)
    repairs.add("unquoted_key")
    return m.group(), m.end()


def _scalar(
    s: str, pos: int, hi: int, repairs: Repairs, *, allow_bare: bool, top: bool = False
) -> tuple[Any, int]:
    c = s[pos]
    if c in "\"'“”‘’„":
        # a string on its own ends at its first closing quote; text after it is not in it
        return _string(s, pos, hi, repairs, is_key=top)
    lit = P.JSON_LITERAL.match(s, pos, hi)
    if lit is not None:
        if lit["lit"] in ("True", "False", "None"):
            repairs.add("python_literal")
        return _LITERALS[lit["lit"]], lit.end()
    if c in "-+.0123456789":
        m = P.JSON_NUMBER.match(s, pos, hi)
        loose = P.LOOSE_NUMBER.match(s, pos, hi)
        if loose is None:
            raise json_error(f"unexpected {c!r}", s, pos)
        end = loose.end()
        if end < hi and (s[end].isalnum() or s[end] == "_"):
            if allow_bare:
                return _bare(s, pos, hi, repairs)
            raise json_error("malformed number", s, end)
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
            raise json_error("number out of range", s, pos) from None
    if allow_bare:
        return _bare(s, pos, hi, repairs)
    raise json_error(f"unexpected {c!r}", s, pos)


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


def _bare(s: str, pos: int, hi: int, repairs: Repairs) -> tuple[str, int]:
    m = P.BARE_VALUE.match(s, pos, hi)
    if m is None:
        raise json_error(f"unexpected {s[pos]!r}", s, pos)
    word = m.group().rstrip(" \t")
    repairs.add("unquoted_value")
    return word, pos + len(word)


_ESCAPES: Final = dict(zip('"\\/bfnrt', '"\\/\b\f\n\r\t', strict=True))


def _string(
    s: str, pos: int, hi: int, repairs: Repairs, *, is_key: bool, raw: bool = False
) -> tuple[str, int]:
    """A string opened at ``pos`` by any kind of quote, and the offset after it. An escape
    JSON does not know (``"C:\\Users"``) means backslashes written as they are: the string is
    read again with every backslash literal."""
    quote = s[pos]
    chunk = P.STRING_CHUNK["‘" if quote in "‘’" else "“" if quote in "“”„" else quote]
    if quote != '"':
        repairs.add("single_quotes" if quote == "'" else "smart_quotes")
    parts: list[str] = []
    i = pos + 1
    while True:
        end = run_end(chunk, s, i, hi)
        parts.append(s[i:end])
        i = end
        if i >= hi:
            _open_string(s, i, repairs)
            return "".join(parts), i
        c = s[i]
        if c == "\\":
            if raw:
                escaped = s.startswith(quote, i + 1, hi)
                parts.append(quote if escaped else c)
                i += 2 if escaped else 1
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


def _open_string(s: str, pos: int, repairs: Repairs) -> None:
    if not repairs.allow_truncated:
        raise json_error("truncated: a string is never closed", s, pos)
    repairs.add("missing_quote")


def _closes(s: str, after: int, hi: int, is_key: bool) -> bool:
    """Whether a quote followed by ``s[after:]`` closes its string: a key's always does, a
    value's when a delimiter, line end, comment or the end follows."""
    if is_key or after >= hi:
        return True
    nxt = s[after]
    if nxt in ",}]\n\r#，":
        return True
    return nxt == "/" and after + 1 < hi and s[after + 1] in "/*"


def _escape(s: str, i: int, hi: int, parts: list[str], repairs: Repairs, quote: str) -> int:
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
    m = P.UNICODE_ESCAPE.match(s, i, hi)
    if m is None:
        return -1
    parts.append(json.loads(f'"{m.group()}"'))  # a surrogate pair joined, a lone one kept
    return m.end()
