"""ReAct shapes real models send beside the labelled format, each read as what it stands for.

Asked only where :func:`~react_engine.parsing.parse_react`'s own reading failed (or found a
tool name no offered tool has). Each shape is rewritten into the labelled reply it stands
for, with a repair code of its own (:data:`.repairs.REPAIRS`); a tag, token or blob that
:func:`~react_engine.parsing.placement.placement` rejects is not rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from ..errors import JSONRepairError
from ..types import ParsedStep
from . import patterns as P
from .json_repair import decode_prefix
from .placement import placement
from .think import think_span

__all__ = ["marked", "resolve_tools", "rewrite"]

_CHAT_PREFIX: Final = re.compile(r"\s*(?:AI|Assistant|ASSISTANT|assistant|Bot|助手)[ \t]*[:：]\s*")
_BAR, _SPACE = "[|｜]", "[_▁]"
_SEP: Final = rf"<{_BAR}tool{_SPACE}sep{_BAR}>"
_DS_CALL: Final = re.compile(
    rf"<{_BAR}tool{_SPACE}call{_SPACE}begin{_BAR}>[ \t]*"
    rf"(?:(?:function)?[ \t]*{_SEP}[ \t]*(?P<a>[\w.\-]+)|(?P<b>[\w.\-]+)[ \t]*{_SEP})"
)
_DS_END: Final = re.compile(rf"<{_BAR}tool{_SPACE}call{_SPACE}end{_BAR}>")
_DS_BLOCK: Final = re.compile(rf"<{_BAR}tool{_SPACE}calls{_SPACE}(?:begin|end){_BAR}>")
_XML_LABELS: Final = {
    "action": "Action",
    "tool_name": "Action",
    "action_input": "Action Input",
    "parameters": "Action Input",
    "tool_input": "Action Input",
    "thought": "Thought",
    "final_answer": "Final Answer",
}
_XML_TAG: Final = re.compile(rf"<(/?)({'|'.join(_XML_LABELS)})>", re.IGNORECASE)
_XML_OBSERVATION: Final = re.compile(r"<observation\b", re.IGNORECASE)
_MARKER: Final = re.compile(
    r'"action(?:_input)?"\s*:|<(?:action|action_input|tool_name|parameters|final_answer)>'
    r"|<[|｜]tool[_▁]call",
    re.IGNORECASE,
)
_PROSE_BLOB: Final = re.compile(r"(?<=[^\s])[ \t]*(?=\{\s*\"action\"\s*:)")
_MAX_PROSE_BLOBS: Final = 16


def rewrite(text: str) -> tuple[str, str, int] | None:
    """``text`` as the labelled reply its shape stands for, the shape's code, and where the
    reply as written is cut (an invented ``<observation>``); or None."""
    start = think_span(text)[1]
    for reader in _READERS:
        found = reader(text, start)
        if found is not None:
            end = len(text) if found[1] != "xml_action_tags" else _xml_end(text, start)
            return (*found, end)
    return None


def marked(text: str) -> bool:
    """Whether ``text`` holds the mark of a shape: unread, such a reply is no plain answer."""
    return _MARKER.search(text) is not None


def _chat_prefix(text: str, start: int) -> tuple[str, str] | None:
    m = _CHAT_PREFIX.match(text, start)
    if m is None or not text.startswith(("{", "[", "```"), m.end()):
        return None
    return text[:start] + text[m.end() :], "chat_prefix"


def _deepseek(text: str, start: int) -> tuple[str, str] | None:
    calls = list(_DS_CALL.finditer(text, start))
    ends = list(_DS_END.finditer(text, start))
    if not calls or len(calls) != len(ends):
        return None
    for i, (call, end) in enumerate(zip(calls, ends, strict=True)):  # each call closed in turn
        if end.start() < call.end() or (i + 1 < len(calls) and calls[i + 1].start() < end.end()):
            return None
    first = calls[0].start()  # the outer token, when it opens the calls, is their start
    outer = [m for m in _DS_BLOCK.finditer(text, start, first) if not text[m.end() : first].strip()]
    if not _placed(text, [(outer[-1].start() if outer else first, ends[-1].end())]):
        return None
    out = _DS_CALL.sub(lambda m: f"\nAction: {m.group('a') or m.group('b')}\n", text)
    return _DS_BLOCK.sub("", _DS_END.sub("\n", out)), "deepseek_tokens"


def _xml_end(text: str, start: int) -> int:
    """Where an invented ``<observation>`` starts: what follows was not meant to run."""
    seen = _XML_OBSERVATION.search(text, start)
    return len(text) if seen is None else seen.start()


def _xml(text: str, start: int) -> tuple[str, str] | None:
    text = text[: _xml_end(text, start)]
    tags = list(_XML_TAG.finditer(text, start))
    opens, closes = tags[0::2], tags[1::2]
    if len(opens) != len(closes) or any(  # each tag closed before the next opens
        o.group(1) or not c.group(1) or o.group(2).lower() != c.group(2).lower()
        for o, c in zip(opens, closes, strict=True)
    ):
        return None
    if not any(_XML_LABELS[m.group(2).lower()] != "Thought" for m in opens):
        return None
    if not _placed(text, [(tags[0].start(), tags[-1].end())]):
        return None

    def label(m: re.Match[str]) -> str:
        return "\n" if m.group(1) else f"\n{_XML_LABELS[m.group(2).lower()]}: "

    return _XML_TAG.sub(label, text), "xml_action_tags"


def _prose_blob(text: str, start: int) -> tuple[str, str] | None:
    cuts: list[tuple[int, int]] = []
    for m in _PROSE_BLOB.finditer(text, start):
        if len(cuts) >= _MAX_PROSE_BLOBS:
            break
        try:
            value, end, _repairs = decode_prefix(text, m.end(), allow_truncated=False)
        except JSONRepairError:
            return None  # a broken or cut-off blob: no reading
        if not isinstance(value, dict) or "action_input" not in value:
            return None
        cuts.append((m.end(), end))
    if not cuts or not _placed(text, cuts):
        return None
    out, last = [], 0
    for at, end in cuts:
        out += [text[last:at].rstrip(" \t"), "\n", text[at:end], "\n"]
        last = end
    return "".join([*out, text[last:].lstrip(" \t")]), "blob_in_prose"


def _placed(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether every call at ``spans`` is the model's action (not an example, a quote...)."""
    return all(reason is None for reason in placement(text, spans))


_READERS: Final[tuple[Callable[[str, int], tuple[str, str] | None], ...]] = (
    _chat_prefix,
    _deepseek,
    _xml,
    _prose_blob,
)


def resolve_tools(step: ParsedStep, tools: Sequence[str]) -> None:
    """Give each action whose name no offered tool has the one offered tool it names
    (``name<|channel|>...``, ``QueryEngineTool`` for ``query_engine_tool``); otherwise the name
    stays as written and the call is refused."""
    offered: dict[str, list[str]] = {}
    for name in tools:
        offered.setdefault(P.normalise_word(name), []).append(name)
    for call in step.actions:
        if call.tool in tools:
            continue
        head, bar, junk = call.tool.partition("<|")
        named = offered.get(P.normalise_word(head.strip()), [])
        others = {
            t
            for word in re.findall(r"[\w.\-]+", junk)
            for t in offered.get(P.normalise_word(word), [])
        }
        if len(named) != 1 or others - set(named):
            continue
        code = "tool_name_junk" if bar else "tool_name_style"
        call.tool = named[0]
        call.repairs.append(code)
        step.repairs.append(code)
