"""Tool calls that a model wrote into its reply text instead of ``tool_calls``.

A server without the right tool parser (vLLM without ``--tool-call-parser``, llama.cpp
without ``--jinja``) hands the model's raw call syntax back as content, in the model
family's own format::

    hermes          <tool_call>{"name": "f", "arguments": {...}}</tool_call>       Qwen2.5, Hermes
    qwen_xml        <tool_call><function=f><parameter=k>v</parameter></function>  Qwen3-Coder
    llama_function  <function=f>{"k": "v"}</function>                              Llama 3.1
    deepseek        <｜tool▁call▁begin｜>function<｜tool▁sep｜>f ```json {...}```   DeepSeek V3 / R1
                    <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>       DeepSeek V3.1
    mistral         [TOOL_CALLS][{"name": "f", "arguments": {...}}]               Mistral
                    [TOOL_CALLS]f[ARGS]{...}                                      Mistral (v11+)
    llama           <|python_tag|>{"name": "f", "parameters": {...}}               Llama 3.x
    json            {"name": "f", "parameters": {...}}   anywhere in the text     Llama 3.x
    python          f(k="v") on a line of its own, or [f(k=1), g()] anywhere       Llama 3.2, Gemma

and the formats of :mod:`.formats`. Each is registered with :func:`~.formats.register_format`
(``docs/extending.md``); its recogniser runs only when its marker is in the text, the
model's ``call_format`` first.

Guard rails, because a false positive runs a tool the model never asked for: only names in
``tool_names``; Python syntax only on a line of its own or as a list of calls, parsed with
:mod:`ast`, never executed; JSON in prose only as valid call objects; nothing in a think
block or a fenced example; broken JSON arguments stay the raw string; and only the model's
action (:mod:`..placement`): a dropped call's reason is :attr:`Salvaged.withheld`, an
unclosed one is kept with a refusal (:attr:`PendingCall.cut`). Every scan resumes where
the previous one stopped, so a megabyte of adversarial text is still cheap.
"""

from __future__ import annotations

import bisect
import keyword
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ...errors import ReActParseError
from ...types import PendingCall
from ...wording import Notice, NoticeCode
from .. import patterns as P
from ..common import think_blocks, unfence
from ..placement import CUES, NotAction, placement
from ..react import parse_react
from . import formats as F
from .formats import FORMATS, NativeFormat, register_format, type_arguments
from .readers import (
    MAX_CALL_CHARS,
    Arguments,
    CallSink,
    Tokens,
    call_from_object,
    found_call,
    json_objects,
    loads,
    python_call,
    python_list,
    raw_arguments,
    scan,
    sectioned,
    tagged_functions,
    tile,
)

__all__ = [
    "FORMATS",
    "NativeFormat",
    "Salvaged",
    "read_salvaged",
    "register_format",
    "strip_salvaged",
    "written_call",
]


UNCLOSED: Final = Notice(NoticeCode.UNCLOSED)
"""Why a call whose opening tag is never closed does not run (the policy refuses it)."""

# --- the entry points -----------------------------------------------------------------------------


def read_salvaged(
    text: str,
    tool_names: Collection[str],
    *,
    limit: int | None = None,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    prefer: str | None = None,
    examples: bool = False,
) -> Salvaged:
    """The calls to ``tool_names`` written in ``text``, in order of appearance (the first
    ``limit`` only), and why one that is not the model's action was withheld.

    Where two formats claim the same text, the more explicit one wins (tags before bare
    JSON before Python); ``prefer`` names a format family asked first. ``schemas`` (tool
    name to parameters' JSON Schema) types the values a format writes as text.
    ``examples=True`` also reads calls in think blocks, fenced examples and those that are
    not the model's action.
    """
    names = frozenset(n for n in tool_names if n)
    if not text or not names:
        return Salvaged([])
    fences = [] if examples else _fence_regions(text)
    fenced_last = bool(fences) and not text[fences[-1][1] :].strip(" \t\r\n`~")
    think = [(block.start, block.end) for block in think_blocks(text)]
    found = _Found(think, fences, fenced_last)
    for detect in _detectors(text, prefer):
        detect(text, names, found)
    calls, withheld = found.calls, None
    if calls and not examples:
        closers = {f.closes for f in F.FORMATS.values() if f.closes is not None}
        regions = sorted([*found.think, *fences])
        verdicts = placement(text, [c.span for c in calls], regions, closers)
        calls = []
        for call, verdict in zip(found.calls, verdicts, strict=True):
            if verdict not in (None, "unclosed"):
                withheld = withheld or verdict
                continue
            if verdict == "unclosed":  # kept, so that the model is told (the policy refuses it)
                call.cut = UNCLOSED
            calls.append(call)
    return Salvaged([_typed(c, schemas) for c in calls[:limit]], withheld)


@dataclass(slots=True)
class Salvaged:
    """The calls :func:`read_salvaged` found in a reply."""

    calls: list[PendingCall]
    withheld: NotAction | None = None
    """Why the first call that is not the model's action was dropped, or ``None``."""


@dataclass(slots=True)
class _Found:
    """The recognisers' calls, kept in order of position; one in a think block, a fenced
    example or overlapping one kept before is dropped."""

    think: list[tuple[int, int]]
    fences: list[tuple[int, int]]
    fenced_last: bool
    calls: list[PendingCall] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    def append(self, call: PendingCall) -> None:
        start, end = call.span
        if _region(self.think, start) is not None:
            return
        fence = _region(self.fences, start)
        last = fence == len(self.fences) - 1 and self.fenced_last
        if fence is not None and not (last and call.format in ("json", "python")):
            return
        starts, calls = self.starts, self.calls
        # after the calls of no width already at ``start`` (tiled ones keep their order)
        index = bisect.bisect_right(starts, start)
        if index > 0 and starts[index - 1] == start and calls[index - 1].span[1] > start:
            index -= 1  # before the one call with a width that starts there
        if index > 0 and calls[index - 1].span[1] > start:
            return
        if index < len(starts) and starts[index] < end:
            return
        starts.insert(index, start)
        calls.insert(index, call)

    def extend(self, calls: Iterable[PendingCall]) -> None:
        for call in calls:
            self.append(call)


_END: Final = 1 << 62  # (start, _END) sorts after every region that begins at start


def _region(regions: list[tuple[int, int]], pos: int) -> int | None:
    """The index of the region of ``regions`` (sorted, disjoint) that holds ``pos``."""
    index = bisect.bisect_right(regions, (pos, _END)) - 1
    return index if index >= 0 and pos < regions[index][1] else None


def _typed(call: PendingCall, schemas: Mapping[str, Mapping[str, Any]] | None) -> PendingCall:
    fmt = F.FORMATS.get(call.format)
    if fmt is None or fmt.values is None or not isinstance(call.arguments, dict):
        return call
    schema = schemas.get(call.tool) if schemas is not None else None
    return replace(call, arguments=type_arguments(call.arguments, schema))


def _detectors(text: str, prefer: str | None) -> list[F.Recogniser]:
    """The recognisers whose marker is in ``text``: preferred first, catch-alls last."""
    present: list[F.NativeFormat] = []
    tags = "<" in text  # most markers are tags: without a "<", none of those is there
    for fmt in F.FORMATS.values():  # on every reply: plain loops, no generators
        if fmt.read is None:
            continue
        for marker in fmt.markers or ("",):
            if (tags or marker[:1] != "<") and marker in text:
                present.append(fmt)
                break
    present.sort(key=lambda fmt: (prefer is None or prefer not in fmt.prefer, fmt.last))
    return [fmt.read for fmt in present if fmt.read is not None]


def _fence_regions(text: str) -> list[tuple[int, int]]:
    """The code fences of ``text``, unless one fence is the whole reply."""
    if "```" not in text and "~~~" not in text:
        return []
    marks = [m.start() for m in P.FENCE_LINE.finditer(text)]
    regions = [(marks[i], marks[i + 1] + 3) for i in range(0, len(marks) - 1, 2)]
    if len(marks) % 2:
        regions.append((marks[-1], len(text)))
    if len(regions) == 1 and not text[: regions[0][0]].strip():
        close = text.find("\n", regions[0][1])
        if close == -1 or not text[close:].strip():
            return []
    return regions


def written_call(text: str, tool_names: Collection[str]) -> bool:
    """Whether ``text`` is a call to one of ``tool_names`` written out rather than an answer:
    any syntax :func:`read_salvaged` reads, a leading llama.cpp ``functions.NAME:``, or a
    Thought/Action block naming a tool."""
    names = [n for n in tool_names if n]
    if not names or not text.strip():
        return False
    head = text.lstrip()
    for name in names:
        prefix = f"functions.{name}"
        if head.startswith(prefix) and P.AFTER_FUNCTIONS_NAME.match(head, len(prefix)):
            return True
    if read_salvaged(text, names).calls:
        return True
    try:
        parsed = parse_react(text, tools=names)
    except ReActParseError:
        return False
    return any(action.tool in names for action in parsed.actions)


def strip_salvaged(text: str, calls: Sequence[PendingCall]) -> str:
    """``text`` without the calls' spans (the step's thought), empty fences and blank runs."""
    if not calls:
        return text.strip()
    spans = sorted(c.span for c in calls)
    pieces: list[str] = []
    pos = 0
    for start, end in spans:
        start, end = max(start, pos), min(end, len(text))
        if start >= end:
            continue
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return P.BLANK_LINES.sub("\n\n", P.EMPTY_FENCE.sub("", "".join(pieces))).strip()


# --- detectors ------------------------------------------------------------------------------------


def _tagged(text: str, names: frozenset[str], out: CallSink) -> None:
    """Hermes ``<tool_call>`` blocks (JSON or Qwen3-Coder XML inside) and bare
    ``<function=NAME>`` blocks, read one at a time (never all tags of a megabyte at once)."""
    tokens = Tokens(P.CALL_MARKUP.finditer(text))
    while (token := tokens.take()) is not None:
        is_block = token.group() == P.CALL_OPEN
        if not is_block and token.group(1) is None:
            continue
        # a block's tags up to the next block tag; a bare function's up to the next function
        inner: list[re.Match[str]] = []
        while (tag := tokens.peek()) is not None and tag.group() not in (P.CALL_OPEN, P.CALL_CLOSE):
            if not is_block and tag.group(1) is not None:
                break
            inner.append(tag)
            tokens.take()
        body_end = tokens.start(len(text))
        if not is_block:
            for (name, arguments, start, end, repairs), fmt in tagged_functions(
                text, [token, *inner], body_end
            ):
                if name in names:
                    out.append(found_call(name, arguments, fmt, (start, end), repairs))
            continue
        closer = tokens.take_if(lambda t: t.group() == P.CALL_CLOSE)
        span_end = closer.end() if closer is not None else body_end
        if any(t.group(1) is not None for t in inner):
            pieces = [piece for piece, _ in tagged_functions(text, inner, body_end)]
            out.extend(tile(pieces, "qwen_xml", token.start(), span_end, names))
        else:
            bracket = _BRACKET.search(text, token.end(), body_end)
            if bracket is not None:
                listed, _ = json_objects(text, bracket.start(), body_end)
                out.extend(tile(listed, "hermes", token.start(), span_end, names))


_BRACKET: Final = re.compile(r"[{\[]")


def _deepseek_call(head: str, body: str) -> tuple[str, Arguments]:
    """DeepSeek V3/R1 (``function<sep>NAME`` + fenced JSON) and V3.1 (``NAME<sep>{...}``);
    the calls in a ``tool_calls_begin/end`` block tile it."""
    stripped = body.lstrip()
    if stripped.startswith("{"):  # V3.1: NAME<sep>{...}
        return head.strip(), raw_arguments(stripped)
    # V3: TYPE<sep>NAME\n```json\n{...}\n```
    name, _, rest = stripped.partition("\n")
    fence = rest.find("```")
    fenced = unfence(rest[fence:]) if fence != -1 else None
    if fenced is not None:
        rest = fenced[0]
    return name.strip(), raw_arguments(rest)


def _mistral(text: str, names: frozenset[str], out: CallSink) -> None:
    """``[TOOL_CALLS]`` then JSON, ``NAME[ARGS]{...}`` calls (v11+), or text and a valid
    JSON list of calls."""
    marks = Tokens(P.MISTRAL_MARK.finditer(text))
    while (mark := marks.take()) is not None:
        region_end = marks.start(len(text))
        pos = P.run_end(P.JSON_WS, text, mark.end(), region_end)
        if pos >= region_end:
            continue
        if text[pos] in "[{":
            listed, json_end = json_objects(text, pos, region_end)
            out.extend(tile(listed, "mistral", mark.start(), json_end, names))
            continue
        pieces = []
        while (named := P.MISTRAL_NAMED.match(text, pos, region_end)) is not None:
            args_start = named.end()
            while args_start < region_end and text[args_start] in " \t":
                args_start += 1
            end = region_end
            if args_start < region_end and text[args_start] == "{":
                closed, _ = scan(text, args_start, region_end, P.JSON_STRUCTURE, '"')
                end = closed if closed is not None else region_end
            pieces.append((named.group(1), raw_arguments(text[args_start:end]), pos, end, ()))
            pos = end
            while pos < region_end and text[pos] in " \t\r\n,;":
                pos += 1
        if pieces:
            out.extend(tile(pieces, "mistral", mark.start(), pieces[-1][3], names))
        elif (found := P.JSON_LIST_START.search(text, pos, region_end)) is not None:
            # text before the list: it counts if valid known calls and no example cue
            close, _ = scan(text, found.start(), region_end, P.JSON_STRUCTURE, '"')
            ok, value, _ = loads(text[found.start() : close]) if close else (False, 0, False)
            calls = call_from_object(value) if ok else None
            if (
                calls
                and all(n in names for n, _ in calls)
                and not CUES.search(text, pos, found.start())
            ):
                listed, _ = json_objects(text, found.start(), close or 0)
                out.extend(tile(listed, "mistral", mark.start(), close or 0, names))


def _llama_tag(text: str, names: frozenset[str], out: CallSink) -> None:
    """``<|python_tag|>`` then JSON calls or one Python call, up to an end token."""
    tokens = Tokens(P.LLAMA_TAG.finditer(text))
    while (token := tokens.take()) is not None:
        if token.group() != P.PYTHON_TAG:
            continue
        following = tokens.peek()
        body_end = end = tokens.start(len(text))
        if following is not None and following.group() != P.PYTHON_TAG:
            end = following.end()
        bracket = _BRACKET.search(text, token.end(), body_end)
        if bracket is not None and not text[token.end() : bracket.start()].strip():
            pieces, json_end = json_objects(text, bracket.start(), body_end)
            # with no end token, the text after the JSON is prose
            tiled_end = end if following is not None else json_end
            out.extend(tile(pieces, "llama", token.start(), tiled_end, names))
        elif (call := python_call(text[token.end() : body_end], names)) is not None:
            out.append(found_call(call[0], call[1], "llama", (token.start(), end), call[2]))


def _json(text: str, names: frozenset[str], out: CallSink) -> None:
    """A reply that is only JSON calls of known tools, possibly fenced (broken JSON counts
    only when it starts with ``{"name"``), then JSON call objects in its text."""
    _whole_json(text, names, out)
    F.json_lines(text, names, out)


def _whole_json(text: str, names: frozenset[str], out: CallSink) -> None:
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    body = text[start:end]
    fenced = unfence(body)
    if fenced is not None and not fenced[1].strip() and body.endswith(("```", "~~~")):
        body = fenced[0].strip()
    if not body or body[0] + body[-1] not in ("{}", "[]"):
        return
    ok, value, _ = loads(body)  # a check: the calls are read again, with their repairs
    if ok:
        calls = call_from_object(value)
        if not calls or any(name not in names for name, _ in calls):
            return
    elif P.LOOSE_CALL_START.match(body) is None:
        return
    body_start = text.find(body, start)
    pieces, _ = json_objects(text, body_start, body_start + len(body))
    if not pieces or any(name not in names for name, *_ in pieces):
        return
    out.extend(tile(pieces, "json", start, end, names))


MAX_PYTHON_CALLS = 1024
"""Python call lines read from one reply (each costs a ``compile``, about 25 µs)."""


def _python(text: str, names: frozenset[str], out: CallSink) -> None:
    """``tool(k="v")`` alone on its line, and lists ``[tool(k=1), other()]`` anywhere."""
    idents = sorted(
        (n for n in names if n.isidentifier() and not keyword.iskeyword(n)),
        key=len,
        reverse=True,
    )
    if not idents:
        return
    whole_start = len(text) - len(text.lstrip())
    whole_end = len(text.rstrip())
    if text.startswith("[", whole_start) and text.endswith("]", 0, whole_end):
        listed = python_list(text, whole_start, whole_end, names)
        if listed:
            out.extend(tile(listed, "python", whole_start, whole_end, names))
            return
    read = 0
    resume = 0
    for match in P.call_list(idents).finditer(text):  # [f(k=1), g()] inside prose
        if read >= MAX_PYTHON_CALLS:
            return
        if match.start() < resume:
            continue
        limit = min(len(text), match.start() + MAX_CALL_CHARS)
        close, resume = scan(text, match.start(), limit, P.PYTHON_STRUCTURE, "'\"")
        listed = python_list(text, match.start(), close, names) if close is not None else None
        if close is not None and listed:
            out.extend(tile(listed, "python", match.start(), close, names))
            read += 1
    resume = 0
    for match in P.call_line(idents).finditer(text):
        if read >= MAX_PYTHON_CALLS:
            break  # far more than a reply may run (max_calls_per_step): the rest unread
        if match.start() < resume:
            continue
        limit = min(len(text), match.start(1) + MAX_CALL_CHARS)
        close, resume = scan(text, match.end() - 1, limit, P.PYTHON_STRUCTURE, "'\"")
        tail = P.LINE_TAIL.match(text, close) if close is not None else None
        if close is None or tail is None:
            continue
        call = python_call(text[match.start(1) : close], names)
        if call is not None:
            # the span takes the whole line but its newline: indentation, backticks, ";"
            span = (match.start(), tail.end(1))
            out.append(found_call(call[0], call[1], "python", span, call[2]))
            read += 1


# --- the registrations, in the order the recognisers are asked -------------------------------

register_format(
    "hermes",
    _tagged,
    what="a <tool_call> block",
    markers=("<tool_call>", "<function="),
    prefer=("qwen_xml", "llama_function"),
    closes=("<tool_call>", "</tool_call>"),
)
register_format(
    "qwen_xml",
    what="a <function=...><parameter=...> block",
    closes=("<function=", "</function>"),
    values=("<parameter=", ("</parameter>", "</function>", "</tool_call>")),
)
register_format("llama_function", what="a <function=...>{...} block")
register_format(
    "deepseek",
    sectioned("deepseek", P.DEEPSEEK_TOKEN, _deepseek_call),
    what="DeepSeek's tool-call tokens",
    markers=("tool▁call", "tool_call_begin", "tool_calls_begin"),
)
register_format("mistral", _mistral, what="a [TOOL_CALLS] call", markers=("[TOOL_CALLS]",))
register_format("llama", _llama_tag, what="a <|python_tag|> call", markers=("<|python_tag|>",))
register_format(
    "json",
    _json,
    what="a JSON call object",
    markers=("{", "["),
    prefer=("xlam", "qwen25"),
    last=True,
)
register_format(
    "python",
    _python,
    what="a Python-style call on its own line, or a list of them",
    markers=("(",),
    prefer=("llama4",),
    last=True,
)
