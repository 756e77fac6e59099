"""The calls that :mod:`..salvage` and :mod:`.formats` both build, and the readers they share
(this module imports neither of them)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Protocol, TypeAlias

from ...types import PendingCall
from .. import patterns as P
from ..common import call_objects
from ..duplicates import DUPLICATE_KEY, assign, decode

Arguments: TypeAlias = dict[str, Any] | str
Repairs: TypeAlias = tuple[str, ...]


def found_call(
    name: str,
    arguments: Arguments,
    fmt: str,
    span: tuple[int, int],
    repairs: Repairs = (),
) -> PendingCall:
    """One tool call recovered from reply text, with its ``format`` and ``span``.

    ``arguments`` are a JSON-compatible dict, or text (the raw text when not valid JSON; a
    single positional Python argument). ``repairs`` such as ``loose_arguments`` or
    ``duplicate_key`` are guesses that never run. ``raw_arguments`` are set when a
    protocol reads the call (:func:`~react_engine.protocols.shared.salvaged_calls`)."""
    return PendingCall(None, name, arguments, "", repairs=list(repairs), format=fmt, span=span)


_LOOSE: Final = ("loose_arguments",)
_JSON_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*+"', re.DOTALL)


class CallSink(Protocol):
    """Where a recogniser writes the calls it finds, as into a list (each kept or dropped
    as it comes)."""

    def append(self, call: PendingCall, /) -> None: ...

    def extend(self, calls: Iterable[PendingCall], /) -> None: ...


MAX_CALL_CHARS: Final = 20_000  # longest Python call considered

Piece: TypeAlias = tuple[str, Arguments, int, int, Repairs]
"""A call found in text: name, arguments, start, end, repairs."""


def tile(
    pieces: Sequence[Piece], fmt: str, start: int, end: int, names: frozenset[str]
) -> list[PendingCall]:
    """The known-name calls among ``pieces``, which share one wrapper ``[start, end)``,
    with spans that tile it."""
    calls = []
    for index, (name, arguments, _, piece_end, repairs) in enumerate(pieces):
        stop = end if index == len(pieces) - 1 else piece_end
        if name in names:
            calls.append(found_call(name, arguments, fmt, (start, stop), repairs))
        start = piece_end
    return calls


class Blocks:
    """Calls of one format read around begin/end tokens: those inside a block tile it,
    those outside keep their own spans (written at once)."""

    __slots__ = ("fmt", "names", "out", "pieces", "start")

    def __init__(self, fmt: str, names: frozenset[str], out: CallSink) -> None:
        self.fmt, self.names, self.out = fmt, names, out
        self.start: int | None = None
        self.pieces: list[Piece] = []

    def open(self, start: int) -> None:
        self.close(None)
        self.start = start

    def close(self, end: int | None) -> None:
        """End the block at ``end`` (``None``: where its last call ends)."""
        if self.start is not None and self.pieces:
            end = end if end is not None else self.pieces[-1][3]
            self.out.extend(tile(self.pieces, self.fmt, self.start, end, self.names))
        self.pieces.clear()
        self.start = None

    def add(self, piece: Piece) -> None:
        if self.start is not None:
            self.pieces.append(piece)
        elif piece[0] in self.names:
            name, arguments, start, end, repairs = piece
            self.out.append(found_call(name, arguments, self.fmt, (start, end), repairs))


class Tokens:
    """A recogniser's regex matches read as they come, with a look at the next one (never
    all at once: a megabyte of markup is tens of thousands of match objects)."""

    __slots__ = ("_matches", "_next")

    def __init__(self, matches: Iterator[re.Match[str]]) -> None:
        self._matches = matches
        self._next = next(matches, None)

    def peek(self) -> re.Match[str] | None:
        return self._next

    def take(self) -> re.Match[str] | None:
        token = self._next
        if token is not None:
            self._next = next(self._matches, None)
        return token

    def take_if(self, wanted: Callable[[re.Match[str]], bool]) -> re.Match[str] | None:
        """The next match, taken, when it is ``wanted``; else ``None`` (nothing taken)."""
        return self.take() if self._next is not None and wanted(self._next) else None

    def start(self, default: int) -> int:
        """Where the next match starts (``default`` when there is none)."""
        return self._next.start() if self._next is not None else default


def sectioned(
    fmt: str,
    tokens: re.Pattern[str],
    call: Callable[[str, str], tuple[str, Arguments] | None],
) -> Callable[[str, frozenset[str], CallSink], None]:
    """The recogniser of calls written with special tokens: a section's begin or end
    (``tokens``' group 1), a call's begin or end (group 2), a separator (no group) between
    the call's head and body, which ``call`` reads; the calls in a section tile it."""

    def read(text: str, names: frozenset[str], out: CallSink) -> None:
        blocks = Blocks(fmt, names, out)
        matches = Tokens(tokens.finditer(text))
        while (token := matches.take()) is not None:
            if token.group(1) == "begin":
                blocks.open(token.start())
            elif token.group(1) == "end":
                blocks.close(token.end())
            elif token.group(2) == "begin":
                separator = matches.take_if(lambda t: t.group(1) is None and t.group(2) is None)
                body_end = matches.start(len(text))
                closer = matches.take_if(lambda t: t.group(2) == "end")
                end = closer.end() if closer is not None else body_end
                if separator is not None:
                    head = text[token.end() : separator.start()]
                    found = call(head, text[separator.end() : body_end])
                    if found is not None:
                        blocks.add((*found, token.start(), end, ()))
        blocks.close(None)

    return read


# --- arguments --------------------------------------------------------------------------------


def loads(src: str) -> tuple[bool, Any, bool]:
    """``(ok, value, a key given two values)``; raw newlines and tabs inside strings are
    accepted (models write code arguments that way), nothing else is forgiven."""
    try:
        value, _, conflicted = decode(src, strict=False)
    except (ValueError, RecursionError):
        return False, None, False
    return True, value, conflicted


def _arguments(value: Any) -> Arguments:
    """A dict stays, JSON text of an object is decoded (double-encoding), other text
    stays, ``None`` becomes ``{}``."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if isinstance(value, str):
        ok, decoded, conflicted = loads(value)
        return decoded if ok and not conflicted and isinstance(decoded, dict) else value
    return json.dumps(value, ensure_ascii=False)


def raw_arguments(src: str) -> Arguments:
    """Arguments given as JSON text: decoded when valid (no key given two values), else
    the stripped text."""
    src = src.strip()
    if not src:
        return {}
    ok, value, conflicted = loads(src)
    return _arguments(value) if ok and not conflicted else src


def call_from_object(obj: Any) -> list[tuple[str, Arguments]] | None:
    """Names and arguments of the calls in one decoded JSON value, in every spelling the
    text parser reads (:func:`~.common.call_objects`)."""
    calls = call_objects(obj, name_alone=True)
    if calls is None:
        return None
    return [(c.tool, _arguments(c.arguments)) for c in calls]


def _loose_call(src: str) -> tuple[str, Arguments, Repairs] | None:
    """Name and raw arguments from a call object that is not valid JSON: exact when one
    complete JSON value followed only by closing braces, else ``loose_arguments``."""
    name = P.LOOSE_NAME.search(src)
    if name is None:
        return None
    args = P.LOOSE_ARGS.search(src)
    if args is None:
        return name.group(1), {}, _LOOSE
    rest = src[args.end() :]
    if rest.startswith(("{", "[")):
        end, _ = scan(rest, 0, len(rest), P.JSON_STRUCTURE, '"')
        value = raw_arguments(rest[:end] if end is not None else rest)
        exact = end is not None and not rest[end:].strip(" \t\r\n}")
        return name.group(1), value, () if exact else _LOOSE
    if rest.startswith('"'):
        string = _JSON_STRING.match(rest)
        literal = string.group() if string is not None else rest
        ok, value, _ = loads(literal)  # a string: no object in it
        if ok and not rest[len(literal) :].strip(" \t\r\n}"):
            return name.group(1), _arguments(value), ()
        return name.group(1), _arguments(value) if ok else rest.strip(), _LOOSE
    return name.group(1), raw_arguments(rest.rstrip().removesuffix("}")), _LOOSE


def call_from_json(src: str) -> list[tuple[str, Arguments, Repairs]] | None:
    """The calls in the text of one JSON object, with their repairs; broken JSON loosely."""
    ok, value, conflicted = loads(src)
    if not ok:
        loose = _loose_call(src)
        return None if loose is None else [loose]
    calls = call_from_object(value)
    # a key given two values anywhere in the object makes every call in it a guess
    repairs = DUPLICATE_KEY if conflicted else ()
    return None if calls is None else [(name, args, repairs) for name, args in calls]


# --- bracket scanning -------------------------------------------------------------------------


def scan(
    text: str, start: int, limit: int, structure: re.Pattern[str], quotes: str
) -> tuple[int | None, int]:
    """``(index after the bracket closing text[start], where scanning stopped)``, skipping
    string literals; ``None`` first when not closed before ``limit`` or a string runs past
    its line."""
    depth = 0
    quote = ""
    pos = start
    while True:
        match = structure.search(text, pos, limit)
        if match is None:
            return None, limit
        char = match.group()
        pos = match.end()
        if quote:
            if char == "\\":
                pos += 1
            elif char == quote:
                quote = ""
            elif char == "\n":
                return None, pos
        elif char in quotes:
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth <= 0:
                return pos, pos


def chained(text: str, pos: int, limit: int) -> Iterator[tuple[int, int]]:
    """The spans of the JSON objects chained from ``text[pos]`` (``,``, ``;`` or space
    between them); one not closed before ``limit`` runs to it and ends the chain."""
    while True:
        while pos < limit and text[pos] in " \t\r\n,;":
            pos += 1
        if pos >= limit or text[pos] != "{":
            return
        closed, _ = scan(text, pos, limit, P.JSON_STRUCTURE, '"')
        yield pos, closed if closed is not None else limit
        if closed is None:
            return
        pos = closed


_LIST_TAIL: Final = re.compile(r"[ \t\r\n,;]*(\])?")


def json_objects(text: str, pos: int, limit: int) -> tuple[list[Piece], int]:
    """Calls in JSON at ``text[pos]`` (an object, a list, or objects chained with ``;``),
    and where the JSON ended (``limit`` if never closed)."""
    pieces: list[Piece] = []
    in_list = text[pos] == "["
    cursor = end = pos + 1 if in_list else pos
    for start, end in chained(text, cursor, limit):
        for name, arguments, repairs in call_from_json(text[start:end]) or ():
            pieces.append((name, arguments, start, end, repairs))
    tail = _LIST_TAIL.match(text, end, limit) if in_list else None
    if tail is not None and (tail.group(1) or tail.end() == limit):
        return pieces, tail.end()  # after the "]", or never closed
    return pieces, end


# --- function markup and values written as text -----------------------------------------------


_TRAILING_INDENT: Final = re.compile(r"\n[ \t]*\Z")


def strip_text_value(raw: str) -> str:
    """A parameter value as an XML-ish template wrote it, without the template's layout:
    the newlines next to the tags, and up to the closing tag's indentation of common
    indentation (the rest is the value's own)."""
    if not raw.startswith(("\n", "\r\n")):
        return raw.removesuffix("\n").removesuffix("\r")
    body = raw.removeprefix("\r").removeprefix("\n")
    closing = _TRAILING_INDENT.search(body)
    if closing is None:
        return body
    layout = len(closing.group()) - 1
    body = body[: closing.start()].removesuffix("\r")
    if not layout:
        return body
    lines = body.split("\n")
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    cut = min([layout, *indents])
    return "\n".join(line[cut:] if line.strip() else line.lstrip(" \t") for line in lines)


def tagged_functions(
    text: str, tokens: Sequence[re.Match[str]], region_end: int
) -> list[tuple[Piece, str]]:
    """The call and its format for each ``<function=NAME>`` in ``tokens``: parameter
    pairs (Qwen3-Coder) or one JSON object (Llama 3.1), up to ``</function>``, the next
    function or ``region_end``."""
    out: list[tuple[Piece, str]] = []
    matches = Tokens(iter(tokens))
    while (opening := matches.take()) is not None:
        if opening.group(1) is None:
            continue
        params: dict[str, Any] = {}
        conflicted = False
        end = body_end = region_end
        while (token := matches.peek()) is not None:
            if token.group(1) is not None:  # the next function: this one was not closed
                body_end = end = token.start()
                break
            matches.take()
            if token.group() == P.FUNCTION_CLOSE:
                body_end, end = token.start(), token.end()
                break
            if token.group(2) is not None:
                value = strip_text_value(text[token.end() : matches.start(region_end)])
                conflicted |= assign(params, token.group(2).strip(), value)
                matches.take_if(lambda t: t.group() == "</parameter>")
        name = opening.group(1).strip()
        body = text[opening.end() : body_end].strip()
        repairs = DUPLICATE_KEY if conflicted else ()
        if params or not body:
            out.append(((name, params, opening.start(), end, repairs), "qwen_xml"))
        elif body.startswith("{"):
            out.append(((name, raw_arguments(body), opening.start(), end, ()), "llama_function"))
    return out


# --- Python calls -----------------------------------------------------------------------------


def python_list(text: str, start: int, end: int, names: frozenset[str]) -> list[Piece] | None:
    """``[f(...), g(...)]`` in ``text[start:end]`` as calls; ``None`` unless every element
    is a call to a known tool (all checked before any is given)."""
    pieces: list[Piece] = []
    pos = start + 1
    while True:
        head = P.IDENT_CALL.match(text, pos, end)
        if head is None:
            return None
        close, _ = scan(text, head.end() - 1, end, P.PYTHON_STRUCTURE, "'\"")
        call = python_call(text[head.start(1) : close], names) if close is not None else None
        if close is None or call is None:
            return None
        pos = P.run_end(P.JSON_WS, text, close, end)
        pieces.append((call[0], call[1], head.start(1), close, call[2]))
        if pos < end and text[pos] == ",":
            pos += 1
            continue
        return pieces if pos == end - 1 else None


def python_call(src: str, names: frozenset[str]) -> tuple[str, Arguments, Repairs] | None:
    """``src`` as exactly one call to a known tool with literal arguments, else ``None``.

    ``f(a=1)`` gives ``{"a": 1}``; one positional value gives it as text (JSON if not a
    string); several go under ``"__args__"``. A non-literal means code, not a call.
    """
    src = src.strip()
    if len(src) > MAX_CALL_CHARS:
        return None
    try:
        tree = ast.parse(src, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    node = tree.body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    name = node.func.id
    if name not in names:
        return None
    try:
        positional = [ast.literal_eval(arg) for arg in node.args]
        keywords: dict[str, Any] = {}
        conflicted = False
        for kw in node.keywords:
            if kw.arg is None:
                return None
            conflicted |= assign(keywords, kw.arg, ast.literal_eval(kw.value))
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if len(positional) == 1 and not keywords and isinstance(positional[0], str):
        return name, positional[0], ()
    # through JSON: tuples become lists; sets, bytes, complex: not salvaged
    try:
        if len(positional) == 1 and not keywords:
            return name, json.dumps(positional[0], ensure_ascii=False), ()
        arguments = {"__args__": positional, **keywords} if positional else keywords
        decoded = json.loads(json.dumps(arguments, ensure_ascii=False))
        return name, decoded, DUPLICATE_KEY if conflicted else ()
    except (TypeError, ValueError):
        return None
