"""Tool calls that a model wrote into its reply text instead of ``tool_calls``.

Under native function calling, a server without the right tool parser (vLLM without
``--tool-call-parser``, llama.cpp without ``--jinja``, a provider that deploys a model
"plain") hands the model's raw call syntax back as content. The call is still there, in
the model family's own format::

    hermes          <tool_call>{"name": "f", "arguments": {...}}</tool_call>       Qwen2.5, Hermes
    qwen_xml        <tool_call><function=f><parameter=k>v</parameter></function>  Qwen3-Coder
    llama_function  <function=f>{"k": "v"}</function>                              Llama 3.1
    deepseek        <｜tool▁call▁begin｜>function<｜tool▁sep｜>f ```json {...}```   DeepSeek V3 / R1
                    <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>       DeepSeek V3.1
    mistral         [TOOL_CALLS][{"name": "f", "arguments": {...}}]               Mistral
                    [TOOL_CALLS]f[ARGS]{...}                                      Mistral (v11+)
    llama           <|python_tag|>{"name": "f", "parameters": {...}}               Llama 3.x
    json            {"name": "f", "parameters": {...}}   as the whole reply        Llama 3.x
    python          f(k="v") on a line of its own, or [f(k=1), g()] as the reply   Llama 3.2, Gemma

and the formats of :mod:`.formats` (GLM-4.5, Kimi K2, InternLM2, Qwen2.5-Coder ``<tools>``,
Jamba, Granite, Llama 4, gpt-oss harmony, MiniMax, Seed-OSS, Functionary, JSON calls on
lines of their own). Each recogniser runs only when its marker is in the text; the one the
capability registry names for the model (``call_format``) runs first.

:func:`salvage_calls` finds them; :func:`strip_salvaged` removes them so that what is
left is the step's thought. Thought/Action text is not handled here: that is the text
protocol's parser. :func:`written_call` asks both (where tools are off, as for a forced
final answer, whether a reply is a call written as text rather than an answer).

Guard rails, because a false positive runs a tool the model never asked for:

* only names in ``tool_names`` are salvaged; with no tools, nothing is;
* Python syntax counts only on a line of its own (or as a whole ``[f(), g()]`` reply), is
  parsed with :mod:`ast` and literal-evaluated, never executed;
* calls inside a think block (``<think>``, ``<thinking>``, ``<reasoning>``, read as the
  text parser reads them) are drafts, not calls, and are skipped;
* broken JSON arguments stay the raw string (the caller may repair them);
* markup inside a fenced example (a code fence that is not the whole reply) is an example,
  and calls after an ``Observation:`` line the model invented were not meant to run.

The patterns live with the parser's in :mod:`.patterns` (linear: no nested quantifiers,
bounded gaps), call objects, think blocks and fences are read by :mod:`.common` as the
parser reads them, and every scan resumes where the previous one stopped, so a megabyte
of adversarial text is still cheap.
"""

from __future__ import annotations

import ast
import bisect
import json
import keyword
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias, get_args

from ..errors import ReActParseError
from . import patterns as P
from .common import call_objects, think_blocks, unfence
from .react import parse_react

__all__ = [
    "SALVAGE_REPAIR_CODES",
    "SalvageFormat",
    "SalvagedCall",
    "salvage_calls",
    "strip_salvaged",
    "written_call",
]

_DECODER: Final = json.JSONDecoder(strict=False)
"""``json.loads(..., strict=False)`` builds a decoder per call: one, shared."""

SalvageFormat: TypeAlias = Literal[
    "hermes",
    "qwen_xml",
    "llama_function",
    "deepseek",
    "mistral",
    "llama",
    "json",
    "python",
    "glm45",
    "kimi",
    "internlm",
    "qwen25",
    "jamba",
    "granite",
    "llama4",
    "harmony",
    "minimax",
    "seed_oss",
    "functionary",
]

TEXT_VALUED: Final[frozenset[str]] = frozenset({"qwen_xml", "glm45", "minimax", "seed_oss"})
"""Formats that write every argument value as text: typed by the tool's schema."""

Arguments: TypeAlias = dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class SalvagedCall:
    """One tool call recovered from reply text."""

    name: str
    """A name from the ``tool_names`` given to :func:`salvage_calls`."""
    arguments: dict[str, Any] | str
    """The arguments as a JSON-compatible dict, or text: the raw text when it was not valid
    JSON (repair it, or report invalid arguments to the model). A Python call with a single
    positional argument gives that argument as text (a string as written, anything else as
    JSON), like a text action input; several positional arguments are kept in order under
    ``"__args__"`` (map them onto the tool's parameters, or report them)."""
    format: SalvageFormat
    """Which syntax the model used (see the module docstring)."""
    span: tuple[int, int]
    """``text[start:end]`` that the call occupies. Calls from one wrapper (a DeepSeek
    block, a Mistral list) tile it, so removing all spans removes the wrapper too."""
    repairs: tuple[str, ...] = ()
    """``("loose_arguments",)`` when the arguments were read out of a call object that is
    not JSON and are no JSON themselves (``"arguments": /srv/x}``): a guess, never run
    (:mod:`.repairs`)."""

    def __post_init__(self) -> None:
        if isinstance(self.arguments, _Loose):
            object.__setattr__(self, "arguments", str(self.arguments))
            object.__setattr__(self, "repairs", (*self.repairs, "loose_arguments"))
        elif isinstance(self.arguments, _LooseDict):
            object.__setattr__(self, "arguments", dict(self.arguments))
            object.__setattr__(self, "repairs", (*self.repairs, "loose_arguments"))


class _Loose(str):
    """Argument text read loosely from broken call JSON (see :attr:`SalvagedCall.repairs`)."""

    __slots__ = ()


class _LooseDict(dict[str, Any]):
    """Arguments read loosely from broken call JSON (see :attr:`SalvagedCall.repairs`)."""

    __slots__ = ()


def _loose(arguments: Arguments) -> Arguments:
    return _Loose(arguments) if isinstance(arguments, str) else _LooseDict(arguments)


SALVAGE_REPAIR_CODES: Final = frozenset(
    {f"salvaged:{fmt}" for fmt in get_args(SalvageFormat)}
    | {"salvaged:react_text", "loose_arguments"}
)
"""Every code a salvaged call may carry: ``salvaged:<format>`` (added by the protocol that
runs it, ``react_text`` for a Thought/Action block) and ``loose_arguments``."""


_MAX_CALL_CHARS: Final = 20_000
"""Longest Python call considered; longer ones are not calls a model meant to make."""


# --- the entry points -----------------------------------------------------------------------------


def salvage_calls(
    text: str,
    tool_names: Collection[str],
    *,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    prefer: str | None = None,
    examples: bool = False,
) -> list[SalvagedCall]:
    """The tool calls written in ``text``, in order of appearance.

    Only calls to names in ``tool_names`` are returned. Where two formats claim the same
    text, the more explicit one wins (special tokens and tags before bare JSON before
    Python syntax); ``prefer`` names a format family (the capability registry's
    ``call_format`` for the model) whose recogniser is asked first. ``schemas`` maps a
    tool's name to its parameters' JSON Schema: values that a format writes as text
    (:data:`TEXT_VALUED`) are typed by it (without it, a value is JSON when it parses).

    Not calls: anything in a think block, a format's markup inside a fenced example (a
    fence that is not the whole reply), and anything after an ``Observation:`` line the
    model invented. ``examples=True`` reads fenced examples too (to tell a reply whose
    only calls are examples from one with no call at all).
    """
    names = frozenset(n for n in tool_names if n)
    if not text or not names:
        return []
    think = _think_regions(text)
    think_starts = [start for start, _ in think]
    fences = [] if examples else _fence_regions(text)
    fenced_last = bool(fences) and not text[fences[-1][1] :].strip(" \t\r\n`~")
    fence_starts = [start for start, _ in fences]
    accepted: list[SalvagedCall] = []
    starts: list[int] = []
    for detect in _detectors(text, prefer):
        for call in detect(text, names):
            region = bisect.bisect_right(think_starts, call.span[0]) - 1
            if region >= 0 and call.span[0] < think[region][1]:
                continue
            region = bisect.bisect_right(fence_starts, call.span[0]) - 1
            if (
                call.format != "python"
                and region >= 0
                and call.span[0] < fences[region][1]
                and not (call.format == "json" and region == len(fences) - 1 and fenced_last)
            ):
                continue
            index = bisect.bisect_left(starts, call.span[0])
            if index > 0 and accepted[index - 1].span[1] > call.span[0]:
                continue
            if index < len(accepted) and accepted[index].span[0] < call.span[1]:
                continue
            starts.insert(index, call.span[0])
            accepted.insert(index, call)
    if accepted:
        invented = P.INVENTED_OBSERVATION.search(text, accepted[0].span[1])
        if invented is not None:
            accepted = [call for call in accepted if call.span[0] < invented.start()]
    return [_typed(call, schemas) for call in accepted]


def _typed(call: SalvagedCall, schemas: Mapping[str, Mapping[str, Any]] | None) -> SalvagedCall:
    """``call`` with its text values typed (formats in :data:`TEXT_VALUED` only)."""
    if call.format not in TEXT_VALUED or not isinstance(call.arguments, dict):
        return call
    from .formats import type_arguments

    schema = schemas.get(call.name) if schemas is not None else None
    return replace(call, arguments=type_arguments(call.arguments, schema))


_Detector: TypeAlias = Callable[[str, frozenset[str]], list[SalvagedCall]]


_DetectorRow: TypeAlias = tuple[tuple[str, ...], tuple[str, ...], _Detector]
_TABLE: list[_DetectorRow] = []


def _table() -> list[_DetectorRow]:
    """Each recogniser with its format families and the markers that must be in a reply for
    it to find anything, most explicit first (built once, on first use)."""
    if _TABLE:
        return _TABLE
    from . import formats as F

    _TABLE[:] = [
        (("kimi",), ("<|tool_call_begin|>",), F.kimi),
        (("deepseek",), ("tool▁call", "tool_call_begin", "tool_calls_begin"), _deepseek),
        (("harmony", "gpt-oss"), ("<|message|>",), F.harmony),
        (("internlm",), ("<|action_start|>",), F.internlm),
        (("granite",), ("<|tool_call|>",), F.granite),
        (("llama4",), ("<|python_start|>",), F.llama4),
        (("minimax",), ("<invoke name=",), F.minimax),
        (("seed_oss",), ("<seed:tool_call>",), F.seed_oss),
        (("glm45",), ("<tool_call>",), F.glm45),
        (("hermes", "qwen_xml", "llama_function"), ("<tool_call>", "<function="), _tagged),
        (("qwen25",), ("<tools>",), F.qwen25),
        (("jamba",), ("<tool_calls>",), F.jamba),
        (("mistral",), ("[TOOL_CALLS]",), _mistral),
        (("llama",), ("<|python_tag|>",), _llama_tag),
        (("functionary",), (">>>", "<|recipient|>"), F.functionary),
        (("json", "xlam"), ("{", "["), _whole_json),
        (("json", "qwen25"), ("{",), F.json_lines),
        (("python", "llama4"), ("(",), _python),
    ]
    return _TABLE


def _detectors(text: str, prefer: str | None) -> list[_Detector]:
    """The recognisers whose marker is in ``text``, the preferred family's first."""
    present: list[tuple[tuple[str, ...], _Detector]] = []
    for families, markers, detect in _table():  # on every reply: plain loops, no generators
        for marker in markers:
            if marker in text:
                present.append((families, detect))
                break
    if prefer:
        present.sort(key=lambda entry: prefer not in entry[0])
    return [detect for _, detect in present]


def _fence_regions(text: str) -> list[tuple[int, int]]:
    """The code fences of ``text`` (opening line to closing line), unless one fence is the
    whole reply: markup in a fence with prose around it is an example, not a call (JSON
    calls may still be fenced as the last thing of a reply; Python calls anywhere)."""
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
    """Whether ``text`` is a call to one of ``tool_names`` written out rather than an answer.

    Any syntax :func:`salvage_calls` reads counts, and so do llama.cpp's
    ``functions.NAME:`` notation (the reply starting with it) and a Thought/Action block
    naming a tool (``Action: NAME`` / ``Action Input: {...}``, or a JSON action blob, as
    :func:`~react_engine.parsing.parse_react` reads them). Where no tool can run (a forced
    final answer), such a reply is not an answer.
    """
    names = [n for n in tool_names if n]
    if not names or not text.strip():
        return False
    head = text.lstrip()
    for name in names:
        prefix = f"functions.{name}"
        if head.startswith(prefix) and P.AFTER_FUNCTIONS_NAME.match(head, len(prefix)):
            return True
    if salvage_calls(text, names):
        return True
    try:
        parsed = parse_react(text)
    except ReActParseError:
        return False
    return any(action.tool in names for action in parsed.actions)


def strip_salvaged(text: str, calls: Sequence[SalvagedCall]) -> str:
    """``text`` without the calls' spans: the prose around them, i.e. the step's thought.

    Code fences left empty by the removal are dropped and runs of blank lines collapse,
    so ``"Let me check.\\n```python\\nget_weather('Paris')\\n```"`` becomes
    ``"Let me check."``.
    """
    if not calls:
        return text.strip()
    pieces: list[str] = []
    pos = 0
    for start, end in sorted(c.span for c in calls):
        start, end = max(start, pos), min(end, len(text))
        if start >= end:
            continue
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    out = "".join(pieces)
    out = P.EMPTY_FENCE.sub("", out)
    out = P.BLANK_LINES.sub("\n\n", out)
    return out.strip()


# --- regions ----------------------------------------------------------------------------------

_Piece: TypeAlias = tuple[str, Arguments, int, int]
"""A call found in text: name, arguments, and the extent of its own syntax."""


def _think_regions(text: str) -> list[tuple[int, int]]:
    """The spans of the think blocks (:func:`~.common.think_blocks`): a closing tag with no
    opening one closes a block begun in the prompt (Qwen3's template), so it covers the
    text from the start; an unclosed opening tag (a truncated reply) runs to the end."""
    return [(block.start, block.end) for block in think_blocks(text)]


def _tile(
    pieces: Sequence[_Piece],
    fmt: SalvageFormat,
    start: int,
    end: int,
    names: frozenset[str],
) -> list[SalvagedCall]:
    """The known-name calls among ``pieces``, which share one wrapper ``[start, end)``,
    with spans that tile it: the first reaches back to the wrapper's start, each next one
    begins where the previous ended, the last reaches to the wrapper's end."""
    out: list[SalvagedCall] = []
    previous_end = start
    for index, (name, arguments, _, piece_end) in enumerate(pieces):
        span_end = end if index == len(pieces) - 1 else piece_end
        if name in names:
            out.append(SalvagedCall(name, arguments, fmt, (previous_end, span_end)))
        previous_end = span_end
    return out


# --- arguments -----------------------------------------------------------------------------------


def _loads(src: str) -> tuple[bool, Any]:
    """``json.loads`` that reports failure instead of raising. Raw newlines and tabs inside
    strings are accepted (``strict=False``): models write code arguments that way, and
    nothing else about the JSON is forgiven here."""
    try:
        return True, _DECODER.decode(src)
    except (ValueError, RecursionError):
        return False, None


def _arguments(value: Any) -> Arguments:
    """Normalise parsed arguments: a dict stays, JSON text holding an object is decoded
    (some models double-encode), other text stays as written, nothing becomes ``{}``."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if isinstance(value, str):
        ok, decoded = _loads(value)
        return decoded if ok and isinstance(decoded, dict) else value
    return json.dumps(value, ensure_ascii=False)


def _raw_arguments(src: str) -> Arguments:
    """Arguments given as JSON text: decoded when valid, else the stripped raw text."""
    src = src.strip()
    if not src:
        return {}
    ok, value = _loads(src)
    return _arguments(value) if ok else src


def _call_from_object(obj: Any) -> list[tuple[str, Arguments]] | None:
    """Names and arguments of the calls in one decoded JSON value, read as the text
    parser reads a JSON action (:func:`~.common.call_objects`): ``{"name", "arguments"}``,
    ``{"name", "parameters"}``, OpenAI's ``{"type": "function", "function": {...}}`` and
    the other spellings. Without an arguments key the remaining keys are the arguments
    (``{"name": "f", "city": "Paris"}``): only known tool names are salvaged."""
    calls = call_objects(obj, name_alone=True)
    if calls is None:
        return None
    return [(c.tool, _arguments(c.arguments)) for c in calls]


def _loose_call(src: str) -> tuple[str, Arguments] | None:
    """Name and raw arguments from a call object that is not valid JSON.

    The arguments are exact when they are one complete JSON value followed by nothing but
    closing braces (``{"name": "f", "arguments": {...}`` missing its last brace); any other
    reading is a guess (:attr:`SalvagedCall.repairs`)."""
    name = P.LOOSE_NAME.search(src)
    if name is None:
        return None
    args = P.LOOSE_ARGS.search(src)
    if args is None:
        return name.group(1), _LooseDict()
    rest = src[args.end() :]
    if rest.startswith(("{", "[")):
        end, _ = _scan(rest, 0, len(rest), P.JSON_STRUCTURE, '"')
        value = _raw_arguments(rest[:end] if end is not None else rest)
        exact = end is not None and not rest[end:].strip(" \t\r\n}")
        return name.group(1), value if exact else _loose(value)
    if rest.startswith('"'):
        literal = _json_string_prefix(rest)
        ok, value = _loads(literal)
        if ok and not rest[len(literal) :].strip(" \t\r\n}"):
            return name.group(1), _arguments(value)
        return name.group(1), _loose(_arguments(value) if ok else rest.strip())
    return name.group(1), _loose(_raw_arguments(rest.rstrip().removesuffix("}")))


def _json_string_prefix(src: str) -> str:
    """The JSON string literal at the start of ``src``, up to its closing quote."""
    pos = 1
    while True:
        match = P.QUOTE_OR_ESCAPE.search(src, pos)
        if match is None:
            return src
        if match.group() == "\\":
            pos = match.end() + 1
            continue
        return src[: match.end()]


def _call_from_json(src: str) -> list[tuple[str, Arguments]] | None:
    """The calls in the text of one JSON object; broken JSON is read loosely, keeping the
    raw arguments."""
    ok, value = _loads(src)
    if ok:
        return _call_from_object(value)
    loose = _loose_call(src)
    return None if loose is None else [loose]


def _unfence_whole(src: str) -> str:
    """The inside of a Markdown code fence wrapping all of ``src``, else ``src``."""
    fenced = unfence(src)
    if fenced is None or fenced[1].strip() or not src.endswith(("```", "~~~")):
        return src
    return fenced[0].strip()


# --- bracket scanning -------------------------------------------------------------------------


def _scan(
    text: str, start: int, limit: int, structure: re.Pattern[str], quotes: str
) -> tuple[int | None, int]:
    """Find the bracket closing the one at ``text[start]``, skipping string literals.

    Returns ``(index after it, where scanning stopped)``, or ``(None, where it stopped)``
    when it is not closed before ``limit`` (or, for Python, a string runs past its line).
    Jumps from one structural character to the next, so the cost is one pass.
    """
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


def _json_objects(text: str, pos: int, limit: int) -> tuple[list[_Piece], int]:
    """Calls in JSON starting at ``text[pos]``: one object, a list of objects, or objects
    chained with ``;`` (Llama 3.1). Each call keeps its own extent, and objects are read
    one by one, so a broken one does not lose the others. Also returns where the JSON
    ended (``limit`` if it never closed)."""
    pieces: list[_Piece] = []
    in_list = text[pos] == "["
    cursor = pos + 1 if in_list else pos
    end = cursor
    while cursor < limit:
        while cursor < limit and text[cursor] in " \t\r\n,;":
            cursor += 1
        if cursor >= limit:
            return pieces, limit if in_list else end
        if in_list and text[cursor] == "]":
            return pieces, cursor + 1
        if text[cursor] != "{":
            break
        closed, _ = _scan(text, cursor, limit, P.JSON_STRUCTURE, '"')
        end = closed if closed is not None else limit
        for name, arguments in _call_from_json(text[cursor:end]) or ():
            pieces.append((name, arguments, cursor, end))
        if closed is None:
            return pieces, limit
        cursor = end
    return pieces, end


# --- detectors ------------------------------------------------------------------------------------


def _tagged(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """Hermes ``<tool_call>`` blocks (JSON or Qwen3-Coder XML inside) and bare
    ``<function=NAME>`` blocks (Qwen3-Coder XML or Llama 3.1 JSON)."""
    out: list[SalvagedCall] = []
    tokens = list(P.CALL_MARKUP.finditer(text))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        is_block = token.group() == P.CALL_OPEN
        if not is_block and token.group(1) is None:
            i += 1
            continue
        j = i + 1
        while j < len(tokens) and tokens[j].group() not in (P.CALL_OPEN, P.CALL_CLOSE):
            j += 1
        closed = is_block and j < len(tokens) and tokens[j].group() == P.CALL_CLOSE
        body_end = tokens[j].start() if j < len(tokens) else len(text)
        if not is_block:
            for name, arguments, start, end, fmt in _functions(text, tokens[i:j], body_end):
                if name in names:
                    out.append(SalvagedCall(name, arguments, fmt, (start, end)))
            i = j
            continue
        span_end = tokens[j].end() if closed else body_end
        inner = tokens[i + 1 : j]
        if any(t.group(1) is not None for t in inner):
            functions = _functions(text, inner, body_end)
            pieces = [(n, a, s, e) for n, a, s, e, _ in functions]
            out.extend(_tile(pieces, "qwen_xml", token.start(), span_end, names))
        else:
            json_start = _first_of(text, "{[", token.end(), body_end)
            if json_start is not None:
                pieces, _ = _json_objects(text, json_start, body_end)
                out.extend(_tile(pieces, "hermes", token.start(), span_end, names))
        i = j + 1 if closed else j
    return out


def _first_of(text: str, chars: str, start: int, end: int) -> int | None:
    """Index of the first of ``chars`` in ``text[start:end]``."""
    found = [p for p in (text.find(c, start, end) for c in chars) if p != -1]
    return min(found) if found else None


def _functions(
    text: str, tokens: Sequence[re.Match[str]], region_end: int
) -> list[tuple[str, Arguments, int, int, SalvageFormat]]:
    """``(name, arguments, start, end, format)`` for each ``<function=NAME>`` in ``tokens``.

    A function ends at ``</function>``, at the next ``<function=``, or at ``region_end``.
    Its body is either ``<parameter=KEY>value</parameter>`` pairs (Qwen3-Coder) or one
    JSON object (Llama 3.1).
    """
    out: list[tuple[str, Arguments, int, int, SalvageFormat]] = []
    k = 0
    while k < len(tokens):
        opening = tokens[k]
        k += 1
        if opening.group(1) is None:
            continue
        params: dict[str, Any] = {}
        end = body_end = region_end
        while k < len(tokens):
            token = tokens[k]
            if token.group() == P.FUNCTION_CLOSE:
                body_end, end = token.start(), token.end()
                k += 1
                break
            if token.group(1) is not None:  # the next function: this one was not closed
                body_end = end = token.start()
                break
            k += 1
            if token.group(2) is not None:
                value_end = tokens[k].start() if k < len(tokens) else region_end
                params[token.group(2).strip()] = _parameter_value(text[token.end() : value_end])
                if k < len(tokens) and tokens[k].group() == "</parameter>":
                    k += 1
        name = opening.group(1).strip()
        body = text[opening.end() : body_end].strip()
        if params:
            out.append((name, params, opening.start(), end, "qwen_xml"))
        elif body.startswith("{"):
            out.append((name, _raw_arguments(body), opening.start(), end, "llama_function"))
        elif not body:
            out.append((name, {}, opening.start(), end, "qwen_xml"))
    return out


def _parameter_value(raw: str) -> str:
    """A Qwen3-Coder parameter value as text, without the layout the template puts around
    it (:func:`~.formats.strip_text_value`); :func:`_typed` types it by the schema."""
    from .formats import strip_text_value

    return strip_text_value(raw)


def _deepseek(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """DeepSeek V3/R1 (``function<sep>NAME`` + fenced JSON) and V3.1 (``NAME<sep>{...}``)
    special-token calls, full-width or ASCII. Calls inside one ``tool_calls_begin/end``
    block tile it; calls outside any block keep their own spans."""
    out: list[SalvagedCall] = []
    block_start: int | None = None
    pieces: list[_Piece] = []

    def flush(block_end: int | None) -> None:
        if block_start is None:
            for name, arguments, start, end in pieces:
                if name in names:
                    out.append(SalvagedCall(name, arguments, "deepseek", (start, end)))
        elif pieces:
            end = block_end if block_end is not None else pieces[-1][3]
            out.extend(_tile(pieces, "deepseek", block_start, end, names))
        pieces.clear()

    tokens = list(P.DEEPSEEK_TOKEN.finditer(text))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.group(1) == "begin":
            flush(None)
            block_start = token.start()
        elif token.group(1) == "end":
            flush(token.end())
            block_start = None
        elif token.group(2) == "begin":
            separator = None
            if i < len(tokens) and tokens[i].group(1) is None and tokens[i].group(2) is None:
                separator = tokens[i]
                i += 1
            closed = i < len(tokens) and tokens[i].group(2) == "end"
            body_end = tokens[i].start() if i < len(tokens) else len(text)
            end = tokens[i].end() if closed else body_end
            i += 1 if closed else 0
            if separator is not None:
                head = text[token.end() : separator.start()]
                call = _deepseek_call(head, text[separator.end() : body_end])
                pieces.append((call[0], call[1], token.start(), end))
    flush(None)
    return out


def _deepseek_call(head: str, body: str) -> tuple[str, Arguments]:
    """One call from the text before and after ``<｜tool▁sep｜>``."""
    stripped = body.lstrip()
    if stripped.startswith("{"):  # V3.1: NAME<sep>{...}
        return head.strip(), _raw_arguments(stripped)
    # V3: TYPE<sep>NAME\n```json\n{...}\n```
    name, _, rest = stripped.partition("\n")
    fence = rest.find("```")
    fenced = unfence(rest[fence:]) if fence != -1 else None
    if fenced is not None:
        rest = fenced[0]
    return name.strip(), _raw_arguments(rest)


def _mistral(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """``[TOOL_CALLS]`` followed by a JSON list or object, or by ``NAME[ARGS]{...}`` (v11+;
    ``[ARGS]`` may be missing, and several calls may follow one mark)."""
    out: list[SalvagedCall] = []
    marks = list(P.MISTRAL_MARK.finditer(text))
    for index, mark in enumerate(marks):
        region_end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        pos = mark.end()
        while pos < region_end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= region_end:
            continue
        if text[pos] in "[{":
            pieces, end = _json_objects(text, pos, region_end)
            out.extend(_tile(pieces, "mistral", mark.start(), end, names))
            continue
        pieces = []
        while pos < region_end:
            named = P.MISTRAL_NAMED.match(text, pos, region_end)
            if named is None:
                break
            args_start = named.end()
            while args_start < region_end and text[args_start] in " \t":
                args_start += 1
            end = region_end
            if args_start < region_end and text[args_start] == "{":
                closed, _ = _scan(text, args_start, region_end, P.JSON_STRUCTURE, '"')
                end = closed if closed is not None else region_end
            pieces.append((named.group(1), _raw_arguments(text[args_start:end]), pos, end))
            pos = end
            while pos < region_end and text[pos] in " \t\r\n,;":
                pos += 1
        if pieces:
            start = mark.start()
            for name, arguments, _, piece_end in pieces:
                if name in names:
                    out.append(SalvagedCall(name, arguments, "mistral", (start, piece_end)))
                start = piece_end
    return out


def _llama_tag(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """``<|python_tag|>`` then JSON calls (several may be chained with ``;``) or one
    Python call, up to ``<|eom_id|>``/``<|eot_id|>`` (included), the next tag, or the end."""
    out: list[SalvagedCall] = []
    tokens = list(P.LLAMA_TAG.finditer(text))
    for index, token in enumerate(tokens):
        if token.group() != P.PYTHON_TAG:
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        body_end = following.start() if following is not None else len(text)
        end = body_end
        if following is not None and following.group() != P.PYTHON_TAG:
            end = following.end()
        json_start = _first_of(text, "{[", token.end(), body_end)
        if json_start is not None and not text[token.end() : json_start].strip():
            pieces, _ = _json_objects(text, json_start, body_end)
            out.extend(_tile(pieces, "llama", token.start(), end, names))
            continue
        call = _python_call(text[token.end() : body_end], names)
        if call is not None:
            out.append(SalvagedCall(call[0], call[1], "llama", (token.start(), end)))
    return out


def _whole_json(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """A reply that is nothing but a JSON call (or a list of calls), possibly fenced: Llama
    3.x without a tool parser answers ``{"name": ..., "parameters": ...}``. Every call must
    name a known tool; broken JSON counts only when it starts with ``{"name"``."""
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    body = _unfence_whole(text[start:end])
    if not body or body[0] + body[-1] not in ("{}", "[]"):
        return []
    ok, value = _loads(body)
    if ok:
        calls = _call_from_object(value)
        if not calls or any(name not in names for name, _ in calls):
            return []
    elif P.LOOSE_CALL_START.match(body) is None:
        return []
    body_start = text.find(body, start)
    pieces, _ = _json_objects(text, body_start, body_start + len(body))
    if not pieces or any(name not in names for name, *_ in pieces):
        return []
    return _tile(pieces, "json", start, end, names)


MAX_PYTHON_CALLS = 1024
"""Python call lines read from one reply. Each costs a ``compile`` (about 25 µs): a reply of
a megabyte of ``f(a=1)`` lines took 13 s of CPU. No reply runs more than
``max_calls_per_step`` calls (16 by default), and the calls read past it are only reported."""


def _python(text: str, names: frozenset[str]) -> list[SalvagedCall]:
    """``tool(k="v")`` alone on its line (plain, indented, in backticks or a fence), and a
    reply that is just a list of such calls ``[tool(k=1), other()]``."""
    idents = sorted(
        (n for n in names if n.isidentifier() and not keyword.iskeyword(n)),
        key=len,
        reverse=True,
    )
    if not idents:
        return []
    whole_start = len(text) - len(text.lstrip())
    whole_end = len(text.rstrip())
    if text.startswith("[", whole_start) and text.endswith("]", 0, whole_end):
        listed = _python_list(text, whole_start, whole_end, names)
        if listed:
            return _tile(listed, "python", whole_start, whole_end, names)
    out: list[SalvagedCall] = []
    resume = 0
    for match in P.call_line(idents).finditer(text):
        if len(out) >= MAX_PYTHON_CALLS:
            break  # far more than a reply may run (max_calls_per_step): the rest unread
        if match.start() < resume:
            continue
        limit = min(len(text), match.start(1) + _MAX_CALL_CHARS)
        close, resume = _scan(text, match.end() - 1, limit, P.PYTHON_STRUCTURE, "'\"")
        tail = P.LINE_TAIL.match(text, close) if close is not None else None
        if close is None or tail is None:
            continue
        call = _python_call(text[match.start(1) : close], names)
        if call is not None:
            # the span takes the whole line but its newline: indentation, backticks, ";"
            span = (match.start(), tail.end(1))
            out.append(SalvagedCall(call[0], call[1], "python", span))
    return out


def _python_list(text: str, start: int, end: int, names: frozenset[str]) -> list[_Piece] | None:
    """``[f(...), g(...)]`` in ``text[start:end]`` as calls with their extents; ``None``
    unless every element is a call to a known tool."""
    out: list[_Piece] = []
    pos = start + 1
    while True:
        head = P.IDENT_CALL.match(text, pos, end)
        if head is None:
            return None
        close, _ = _scan(text, head.end() - 1, end, P.PYTHON_STRUCTURE, "'\"")
        if close is None:
            return None
        call = _python_call(text[head.start(1) : close], names)
        if call is None:
            return None
        out.append((call[0], call[1], head.start(1), close))
        pos = close
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos < end and text[pos] == ",":
            pos += 1
            continue
        return out if pos == end - 1 else None


def _python_call(src: str, names: frozenset[str]) -> tuple[str, Arguments] | None:
    """Parse ``src`` as exactly one call to a known tool with literal arguments.

    ``f(a=1, b="x")`` gives ``{"a": 1, "b": "x"}``; ``f("Paris")`` gives ``"Paris"``, the
    tool's single input as a text action input would give it (a non-string single value
    gives its JSON text); other positional arguments are kept in order under
    ``"__args__"``, since only the tool knows their names. Anything that is not a literal
    (a variable, a nested call, ``**kw``) means the model wrote code, not a call: ``None``.
    """
    src = src.strip()
    if len(src) > _MAX_CALL_CHARS:
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
        for kw in node.keywords:
            if kw.arg is None:
                return None
            keywords[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    if len(positional) == 1 and not keywords and isinstance(positional[0], str):
        return name, positional[0]
    # Arguments must survive JSON like any others: tuples become lists; sets, bytes and
    # complex numbers have no JSON form, so such a call is not salvaged.
    try:
        if len(positional) == 1 and not keywords:
            return name, json.dumps(positional[0], ensure_ascii=False)
        arguments = {"__args__": positional, **keywords} if positional else keywords
        return name, json.loads(json.dumps(arguments, ensure_ascii=False))
    except (TypeError, ValueError):
        return None
