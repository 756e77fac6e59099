"""The model families' own tool-call formats: the registry, and one small recogniser each.

:func:`register_format` records a format (recogniser, markers, repair-table row, tags that
must close, values written as text). The formats, as the families' templates write them::

    glm45        <tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>
    kimi         <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
                 <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
    internlm     <|action_start|><|plugin|>\\n{"name": "f", "parameters": {...}}<|action_end|>
    qwen25       <tools>\\n{"name": "f", "arguments": {...}}\\n</tools>
    jamba        <tool_calls>[{"name": "f", "arguments": {...}}]</tool_calls>
    granite      <|tool_call|>[{"name": "f", "arguments": {...}}]
    llama4       <|python_start|>[f(k="v"), g()]<|python_end|>
    harmony      <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
    minimax      <minimax:tool_call><invoke name="f"><parameter name="k">v</parameter>
                 </invoke></minimax:tool_call>
    seed_oss     <seed:tool_call><function=f><parameter=k>v</parameter></function></seed:tool_call>
    functionary  >>>f\\n{...}            (v3.2; several follow one another)
                 <|recipient|>f\\n<|content|>{...}   (v2)

Values written as text (GLM, Qwen3-Coder XML, MiniMax, Seed-OSS) are typed by the tool's
schema (:func:`typed_value`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .. import patterns as P
from .. import repairs as R
from ..duplicates import DUPLICATE_KEY, assign
from .readers import (
    Arguments,
    Blocks,
    CallSink,
    Piece,
    Tokens,
    call_from_json,
    call_from_object,
    chained,
    found_call,
    json_objects,
    loads,
    python_call,
    python_list,
    raw_arguments,
    scan,
    sectioned,
    strip_text_value,
    tagged_functions,
    tile,
)

__all__ = [
    "FORMATS",
    "NativeFormat",
    "Recogniser",
    "register_format",
    "typed_value",
]

_NAME: Final = r"[\w.\-/:]{1,200}"

Recogniser: TypeAlias = Callable[[str, frozenset[str], CallSink], None]
"""``read(text, names, out)``: appends to ``out`` each call to one of ``names`` in ``text``."""


@dataclass(frozen=True, slots=True)
class NativeFormat:
    """A tool-call format, as :func:`register_format` records it."""

    read: Recogniser | None
    markers: tuple[str, ...]
    prefer: tuple[str, ...]
    closes: tuple[str, str] | None
    values: tuple[str, tuple[str, ...]] | None
    last: bool


FORMATS: dict[str, NativeFormat] = {}
"""Every registered format, by name, in the order their recognisers are asked."""


def register_format(
    name: str,
    read: Recogniser | None = None,
    *,
    what: str,
    markers: tuple[str, ...] = (),
    prefer: tuple[str, ...] = (),
    closes: tuple[str, str] | None = None,
    values: tuple[str, tuple[str, ...]] | None = None,
    last: bool = False,
) -> None:
    """Register the tool-call format ``name``: every table a format needs, in one call.

    ``read`` finds its calls (``None``: another format's recogniser writes them), asked
    only when one of ``markers`` is in the reply (none: always), first when the capability
    registry's ``call_format`` is ``name`` or one of ``prefer``; ``last`` puts it after
    the others (a catch-all). ``what`` is its row in the repair table (the lossless code
    ``salvaged:NAME``, :mod:`..repairs`). ``closes`` is an opening tag and the closing tag
    a call written in it must have (else it is refused as unclosed, :mod:`..placement`).
    ``values`` is the tag that opens a value written as text and the tags that may end
    it: such values are typed by the tool's schema, and a reply that ends inside one was
    cut there. Registering a name again replaces it.
    """
    FORMATS.pop(name, None)
    FORMATS[name] = NativeFormat(read, markers, (name, *prefer), closes, values, last)
    code = f"salvaged:{name}"
    R.REPAIRS[code] = R.Repair(code, "salvage", True, what)


# --- values written as text -------------------------------------------------------------------

_INTEGER: Final = re.compile(r"[+-]?\d{1,300}")
_JSON_TYPES: Final[dict[str, Any]] = {"number": (int, float), "object": dict, "array": list}


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            if isinstance(option, Mapping):
                out.extend(_types(option))
    return out


def typed_value(raw: str, schema: Mapping[str, Any] | None) -> Any:
    """A value written as text, typed by its parameter's JSON Schema (``None``: unknown, so
    JSON when it parses). Text is typed only where the schema allows that type and no
    string; JSON giving a key two values stays text (which was meant is a guess)."""
    if schema is None:
        ok, value, conflicted = loads(raw)
        return value if ok and not conflicted else raw
    types = _types(schema)
    if "string" in types:
        return raw
    text = raw.strip()
    ok, value, conflicted = loads(text)
    ok = ok and not conflicted
    for kind in types:
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "null" and text in ("null", "None"):
            return None
        json_type = _JSON_TYPES.get(kind)
        if json_type and ok and isinstance(value, json_type) and not isinstance(value, bool):
            return value
    enum = schema.get("enum")
    listed = isinstance(enum, list) and raw not in enum and value in enum
    if not types and ok and (isinstance(value, dict | list) or listed):  # any JSON, or enum
        return value
    return raw


def type_arguments(
    arguments: Mapping[str, Any], schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Every text value of ``arguments`` typed (:func:`typed_value`); unlisted ones stay."""
    properties = schema.get("properties") if schema is not None else None
    typed = dict(arguments)
    for key, value in arguments.items():
        listed = properties.get(key) if isinstance(properties, Mapping) else None
        if isinstance(value, str) and (schema is None or isinstance(listed, Mapping)):
            typed[key] = typed_value(value, listed)
    return typed


# --- helpers ---------------------------------------------------------------------------------


def _json_pieces(text: str, start: int, limit: int) -> tuple[list[Piece], int]:
    """The JSON call objects at the first bracket of ``text[start:limit]``, and its end."""
    pos = P.run_end(P.JSON_WS, text, start, limit)
    if pos >= limit or text[pos] not in "{[":
        return [], limit
    return json_objects(text, pos, limit)


def _json_blocks(fmt: str, opening: str, closing: str) -> Recogniser:
    """The recogniser of JSON calls in ``opening ... closing`` blocks (unclosed at the end:
    they end with their JSON)."""

    def read(text: str, names: frozenset[str], out: CallSink) -> None:
        for pos, body, body_end, end in _regions(text, opening, closing):
            pieces, json_end = _json_pieces(text, body, body_end)
            out.extend(tile(pieces, fmt, pos, json_end if body_end == len(text) else end, names))

    return read


def _regions(text: str, opening: str, closing: str) -> Iterator[tuple[int, int, int, int]]:
    """``(start, body, body end, end)`` of each ``opening ... closing`` region; one left
    open ends at the next opening or the end of the text."""
    tokens = Tokens(re.finditer(f"{re.escape(opening)}|{re.escape(closing)}", text))
    while (token := tokens.take()) is not None:
        if token.group() != opening:
            continue
        body_end = tokens.start(len(text))
        closer = tokens.take_if(lambda t: t.group() == closing)
        yield token.start(), token.end(), body_end, closer.end() if closer else body_end


# --- the recognisers ---------------------------------------------------------------------------

_GLM_HEAD: Final = re.compile(rf"[ \t]*({_NAME})[ \t]*(?:\r?\n|(?=<arg_key>|</tool_call>|\Z))")
_GLM_PAIR: Final = re.compile(r"\s*<arg_key>(.{0,200}?)</arg_key>\s*<arg_value>", re.DOTALL)


def glm45(text: str, names: frozenset[str], out: CallSink) -> None:
    """GLM-4.5 / 4.6: ``<tool_call>NAME`` then ``<arg_key>K</arg_key><arg_value>V</arg_value>``
    pairs (strings as written, other values as JSON), ``</tool_call>``."""
    for pos, body, body_end, end in _regions(text, "<tool_call>", "</tool_call>"):
        head = _GLM_HEAD.match(text, body, body_end)
        if head is None or head.group(1) not in names:
            continue
        arguments: dict[str, Any] = {}
        conflicted = False
        cursor = head.end()
        while (pair := _GLM_PAIR.match(text, cursor, body_end)) is not None:
            value_end = text.find("</arg_value>", pair.end(), body_end)
            value_end = body_end if value_end == -1 else value_end
            cursor = min(value_end + len("</arg_value>"), body_end)
            conflicted |= assign(arguments, pair.group(1).strip(), text[pair.end() : value_end])
        if not text[cursor:body_end].strip():  # else something else in the block: not this format
            repairs = DUPLICATE_KEY if conflicted else ()
            out.append(found_call(head.group(1), arguments, "glm45", (pos, end), repairs))


_KIMI_TOKEN: Final = re.compile(
    r"<\|tool_calls_section_(begin|end)\|>"  # a section's begin or end, group 1
    r"|<\|tool_call_(begin|end)\|>"  # a call's, group 2
    r"|<\|tool_call_argument_begin\|>"  # the separator
)
_KIMI_ID: Final = re.compile(r"\s*(?:functions\.)?([\w.\-/]{1,200}?)(?::\d{1,6})?\s*\Z")


def _kimi_call(head: str, body: str) -> tuple[str, Arguments] | None:
    """Kimi K2: ``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}
    <|tool_call_end|>``, inside ``<|tool_calls_section_begin|> ... _end|>``."""
    ident = _KIMI_ID.match(head)
    return (ident.group(1), raw_arguments(body)) if ident is not None else None


def internlm(text: str, names: frozenset[str], out: CallSink) -> None:
    """InternLM2: ``<|action_start|><|plugin|>`` then a JSON call, ``<|action_end|>``."""
    for pos, body, body_end, end in _regions(text, "<|action_start|>", "<|action_end|>"):
        plugin = P.run_end(P.JSON_WS, text, body, body_end)
        if text.startswith("<|plugin|>", plugin):
            pieces, _ = _json_pieces(text, plugin + len("<|plugin|>"), body_end)
            out.extend(tile(pieces, "internlm", pos, end, names))


def llama4(text: str, names: frozenset[str], out: CallSink) -> None:
    """Llama 4: ``<|python_start|>[f(k=...), g()]<|python_end|>`` (or one call)."""
    for pos, body, body_end, end in _regions(text, "<|python_start|>", "<|python_end|>"):
        written = text[body:body_end].strip(" \t\r\n")
        start = P.run_end(P.JSON_WS, text, body, body_end)
        if written.startswith("[") and written.endswith("]"):
            listed = python_list(text, start, start + len(written), names) or []
            out.extend(tile(listed, "llama4", pos, end, names))
        elif (call := python_call(written, names)) is not None:
            out.append(found_call(call[0], call[1], "llama4", (pos, end), call[2]))


_HARMONY_TO: Final = re.compile(rf"to=(?:functions\.)?({_NAME})")
_HARMONY_HEAD: Final = re.compile(r"[^\n]{0,120}?<\|message\|>")
_HARMONY_END: Final = re.compile(r"<\|(call|end|return|start|channel)\|>")


def harmony(text: str, names: frozenset[str], out: CallSink) -> None:
    """gpt-oss (harmony): ``<|channel|>commentary to=functions.NAME <|constrain|>json
    <|message|>{...}<|call|>`` (the recipient may also come before the channel)."""
    resume = 0
    for match in _HARMONY_TO.finditer(text):
        if match.start() < resume:
            continue
        head = _HARMONY_HEAD.match(text, match.end())
        if head is None or "<|message|>" in text[match.end() : head.end() - 11]:
            continue
        name = match.group(1)
        ending = _HARMONY_END.search(text, head.end())
        body_end = end = ending.start() if ending is not None else len(text)
        if ending is not None and ending.group(1) in ("call", "end"):
            end = ending.end()
        resume = end
        if name not in names:
            continue
        start = match.start()
        for opener in ("<|start|>", "<|channel|>"):
            found = text.rfind(opener, max(0, start - 80), start)
            if found != -1 and "<|message|>" not in text[found:start]:
                start = min(start, found)
        out.append(
            found_call(name, raw_arguments(text[head.end() : body_end]), "harmony", (start, end))
        )


_MINIMAX_TOKEN: Final = re.compile(
    r'<invoke name="([^"<>\n]{1,200})">|</invoke>'
    r'|<parameter name="([^"<>\n]{1,200})">|</parameter>'
    r"|<minimax:tool_call>|</minimax:tool_call>"
)


def minimax(text: str, names: frozenset[str], out: CallSink) -> None:
    """MiniMax-M2: ``<minimax:tool_call>`` holding ``<invoke name="NAME">`` elements with
    ``<parameter name="K">V</parameter>`` children, values as text."""
    blocks = Blocks("minimax", names, out)
    tokens = Tokens(_MINIMAX_TOKEN.finditer(text))
    while (token := tokens.take()) is not None:
        if token.group() == "<minimax:tool_call>":
            blocks.open(token.start())
        elif token.group() == "</minimax:tool_call>":
            blocks.close(token.end())
        elif token.group(1) is not None:
            params: dict[str, Any] = {}
            conflicted = False
            while (inner := tokens.peek()) is not None and inner.group(2) is not None:
                tokens.take()
                value = strip_text_value(text[inner.end() : tokens.start(len(text))])
                conflicted |= assign(params, inner.group(2).strip(), value)
                tokens.take_if(lambda t: t.group() == "</parameter>")
            closer = tokens.take_if(lambda t: t.group() == "</invoke>")
            following = tokens.peek()
            if closer is None and following is not None and following.group(1) is not None:
                continue  # an invoke left open for the next one: not a call anyone finished
            end = closer.end() if closer is not None else tokens.start(len(text))
            name = token.group(1).strip()
            repairs = DUPLICATE_KEY if conflicted else ()
            blocks.add((name, params, token.start(), end, repairs))
    blocks.close(None)


def seed_oss(text: str, names: frozenset[str], out: CallSink) -> None:
    """Seed-OSS: Qwen3-Coder-style ``<function=NAME><parameter=K>V</parameter></function>``
    inside ``<seed:tool_call> ... </seed:tool_call>``."""
    for pos, body, body_end, end in _regions(text, "<seed:tool_call>", "</seed:tool_call>"):
        tokens = list(P.CALL_MARKUP.finditer(text, body, body_end))
        functions = tagged_functions(text, tokens, body_end)
        out.extend(tile([piece for piece, _ in functions], "seed_oss", pos, end, names))


_FUNCTIONARY: Final = re.compile(
    rf">>>[ \t]*({_NAME})[ \t]*\r?\n?"
    rf"|<\|recipient\|>[ \t]*({_NAME})\s*<\|content\|>",
    re.MULTILINE,
)


def functionary(text: str, names: frozenset[str], out: CallSink) -> None:
    """Functionary: v3.2 ``>>>NAME\\n{...}`` (several in a row; ``>>>all`` is text) and
    v2 ``<|recipient|>NAME\\n<|content|>{...}``."""
    heads = Tokens(_FUNCTIONARY.finditer(text))
    while (head := heads.take()) is not None:
        name = head.group(1) or head.group(2)
        limit = heads.start(len(text))
        if name not in names:
            continue
        body = P.run_end(P.JSON_WS, text, head.end(), limit)
        if body >= limit:
            out.append(found_call(name, {}, "functionary", (head.start(), limit)))
            continue
        if text[body] != "{":
            continue
        closed, _ = scan(text, body, limit, P.JSON_STRUCTURE, '"')
        end = closed if closed is not None else limit
        arguments = raw_arguments(text[body:end])
        if closed is not None:
            tail = text.find("<|", end, limit)
            if tail != -1 and not text[end:tail].strip():
                close = text.find("|>", tail, limit)
                end = close + 2 if close != -1 else end
        out.append(found_call(name, arguments, "functionary", (head.start(), end)))


_CALL_OBJECT: Final = re.compile(r'(?:\[\s*)?\{(?=\s*"(?:name|function|tool)"\s*:)')


def json_lines(text: str, names: frozenset[str], out: CallSink) -> None:
    """JSON call objects in the reply's text, alone or chained (``;``, ``,``, space, a list).

    Each object of a chain must be valid JSON with an explicit arguments key and a known
    tool, and not a value inside other JSON: a chain is checked whole before any call in
    it is written.
    """
    resume = 0
    for match in _CALL_OBJECT.finditer(text):
        start = match.start()
        if start < resume:
            continue
        first = match.end() - 1  # the first object's "{"
        objects = list(chained(text, first, len(text)))
        end = last = objects[-1][1] if objects else first
        resume = max(end, start + 1)
        good = [_good_calls(text[a:b], names) for a, b in objects]
        if first > start:  # a list: it must close right after its last object
            closing = _LIST_END.match(text, end)
            last = closing.end() if closing else -1
        in_json = text[max(0, start - 80) : start].rstrip().endswith('":')
        if last < 0 or None in good or not any(good) or in_json:
            continue
        for index, (a, b) in enumerate(objects):
            span = (start if index == 0 else a, last if index == len(objects) - 1 else b)
            for name, arguments, repairs in call_from_json(text[a:b]) or ():
                out.append(found_call(name, arguments, "json", span, repairs))


_LIST_END: Final = re.compile(r"\s*\]")


def _good_calls(source: str, names: frozenset[str]) -> list[tuple[str, Arguments]] | None:
    """The calls of one chained JSON object, or ``None`` when one is not good."""
    ok, value, _ = loads(source)  # the calls are read again, with their repairs
    if not ok:
        return None if call_from_json(source) else []
    calls = call_from_object(value) or []
    if calls and not isinstance(value, dict):
        return None
    for name, _ in calls:
        if name not in names or not any(k in value for k in _ARGUMENT_KEYS):
            return None
    return calls


_ARGUMENT_KEYS: Final = ("arguments", "parameters", "args", "function")


# --- the registrations, in the order the recognisers are asked -------------------------------

register_format(
    "glm45",
    glm45,
    what="GLM-4.5's <tool_call> with <arg_key>/<arg_value>",
    markers=("<tool_call>",),
    closes=("<tool_call>", "</tool_call>"),
    values=("<arg_value>", ("</arg_value>", "</tool_call>")),
)
register_format(
    "kimi",
    sectioned("kimi", _KIMI_TOKEN, _kimi_call),
    what="Kimi K2's tool-call tokens",
    markers=("<|tool_call_begin|>",),
)
register_format(
    "internlm", internlm, what="InternLM's <|action_start|> call", markers=("<|action_start|>",)
)
register_format(
    "qwen25",
    _json_blocks("qwen25", "<tools>", "</tools>"),
    what="Qwen2.5-Coder's <tools> block",
    markers=("<tools>",),
    closes=("<tools>", "</tools>"),
)
register_format(  # Jamba and MiniMax-M1: a JSON list, or JSON lines
    "jamba",
    _json_blocks("jamba", "<tool_calls>", "</tool_calls>"),
    what="Jamba's <tool_calls> list",
    markers=("<tool_calls>",),
    closes=("<tool_calls>", "</tool_calls>"),
)
register_format(
    "granite",
    _json_blocks("granite", "<|tool_call|>", "<|end_of_text|>"),
    what="Granite's <|tool_call|> list",
    markers=("<|tool_call|>",),
)
register_format("llama4", llama4, what="Llama 4's [f(k=v)] calls", markers=("<|python_start|>",))
register_format(
    "harmony", harmony, what="gpt-oss's Harmony call", markers=("<|message|>",), prefer=("gpt-oss",)
)
register_format(
    "minimax",
    minimax,
    what="MiniMax's <invoke> call",
    markers=("<invoke name=",),
    closes=("<minimax:tool_call>", "</minimax:tool_call>"),
    values=("<parameter name=", ("</parameter>", "</invoke>", "</minimax:tool_call>")),
)
register_format(
    "seed_oss",
    seed_oss,
    what="Seed-OSS's <seed:tool_call>",
    markers=("<seed:tool_call>",),
    closes=("<seed:tool_call>", "</seed:tool_call>"),
    values=("<parameter=", ("</parameter>", "</function>", "</seed:tool_call>")),
)
register_format(
    "functionary", functionary, what="Functionary's >>>f call", markers=(">>>", "<|recipient|>")
)
