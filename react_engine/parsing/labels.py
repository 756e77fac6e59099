"""The labels of a text ReAct reply found at line starts outside closed fences, the reply
split into sections at them, and the one cheap pass that reads a plain reply's labels."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Final

from . import patterns as P

__all__ = [
    "MAX_LABELS",
    "PREAMBLE",
    "Label",
    "Section",
    "content_start",
    "plain_labels",
    "scan_labels",
    "split_sections",
]

MAX_LABELS: Final = 1000
"""Labels read per reply; any after that are text (a bound for hostile input)."""
MAX_FENCES: Final = 2000
"""Code fence lines considered when deciding which labels sit inside a fence."""

PREAMBLE: Final = "preamble"
"""The kind of the text before the first label."""


@dataclass(slots=True)
class Label:
    kind: str
    strength: int
    start: int  # start of the label's line
    content: int  # where its content starts
    codes: tuple[str, ...]


@dataclass(slots=True)
class Section:
    kind: str  # a label kind, or PREAMBLE for the text before the first label
    start: int
    content: str
    content_start: int
    codes: tuple[str, ...] = ()


def content_start(m: re.Match[str], text: str, colon: str, pre: str, em: str) -> int | None:
    """Where the content of the label candidate ``m`` starts, or None when it is no label
    (without a colon, only a Markdown heading or bold alone on its line is one)."""
    if colon:
        return m.end()
    if "#" not in pre and not em:
        return None
    eol = text.find("\n", m.end())
    return None if text[m.end() : eol if eol >= 0 else len(text)].strip() else m.end()


@functools.lru_cache(maxsize=512)
def _word_info(word: str) -> tuple[str, int, tuple[str, ...]]:
    """Kind, strength and spelling repair code of a label word as it was written."""
    kind, strength = P.LABEL_WORDS[P.normalise_word(word)]
    canonical = P.CANONICAL[kind]
    if word == canonical:
        return kind, strength, ()
    if not word.isascii():
        return kind, strength, ("chinese_label",)
    if word.lower() == canonical.lower():
        return kind, strength, ("label_case",)
    return kind, strength, ("label_synonym",)


_GROUPS: Final = ("indent", "pre", "em", "num", "paren", "em2", "sp", "colon", "em3", "word")


def _label_codes(groups: tuple[str, ...], word_codes: tuple[str, ...]) -> tuple[str, ...]:
    indent, pre, em, num, paren, em2, sp, colon, em3, word = groups
    codes = list(word_codes)
    if indent:
        codes.append("indented_label")
    if pre or em or em2 or em3:
        codes.append("markdown_label")
    if num or paren:
        codes.append("numbered_label")
    if colon and sp:
        codes.append("space_before_colon")
    if colon == "：":
        codes.append("fullwidth_colon")
    if not (num or paren) and any(ch.isdigit() for ch in word):  # "Action 1 Input"
        codes.append("numbered_label")
    return tuple(codes)


def _closed_fences(body: str) -> list[tuple[int, int]]:
    """(opening line start, closing line start) of each closed fence pair (``MAX_FENCES``)."""
    spans: list[tuple[int, int]] = []
    opened = -1
    for m in islice(P.FENCE_LINE.finditer(body), MAX_FENCES):
        eol = body.find("\n", m.end())
        line_rest = body[m.end() : eol if eol >= 0 else len(body)]
        if opened < 0:
            if "```" in line_rest or "~~~" in line_rest:
                continue  # a fence opened and closed on one line
            opened = m.start()
        else:
            spans.append((opened, m.start()))
            opened = -1
    return spans


def scan_labels(body: str) -> list[Label]:
    """The labels of ``body``, in order (at most :data:`MAX_LABELS`)."""
    labels: list[Label] = []
    fences: list[tuple[int, int]] | None = None  # found once a label needs them
    f = 0
    for m in P.LABEL.finditer(body):
        start = m.start()
        if fences is None:
            fences = _closed_fences(body)
        while f < len(fences) and fences[f][1] < start:
            f += 1
        if f < len(fences) and fences[f][0] < start <= fences[f][1]:
            continue
        groups = m.group(*_GROUPS)
        content = content_start(m, body, groups[7], groups[1], groups[2])
        if content is None:
            continue
        word = P.INNER_NUMBER.sub("", groups[9], count=1)  # "Action 1 Input": the number
        kind, strength, word_codes = _word_info(word)
        labels.append(Label(kind, strength, start, content, _label_codes(groups, word_codes)))
        if len(labels) >= MAX_LABELS:
            break  # the rest is text: no real reply has this many labels
    return labels


_PLAIN_LABELS: Final = (
    ("Action Input:", P.ACTION_INPUT),
    ("Action:", P.ACTION),
    ("Thought:", P.THOUGHT),
    ("Final Answer:", P.FINAL),
)
_PLAIN_MAX_LINES: Final = 200
"""Replies with this many lines skip the plain pass (a Python loop per line)."""


def plain_labels(text: str, stop_words: Sequence[str] | None) -> list[Label] | None:
    """The labels of ``text.rstrip()`` in one cheap pass when the reply is plain (no ``<``, no
    stop word, canonical labels at line starts, no fence before a label): then they are
    :func:`scan_labels`'. None otherwise."""
    if "<" in text or text.count("\n") >= _PLAIN_MAX_LINES:
        return None  # a long reply pays one pass, not two
    for word in stop_words or ():
        if word and word in text:
            return None
    kept = text.rstrip()
    labels: list[Label] = []
    fenced = False  # a fence line was seen: a later label might be inside it
    start = 0
    while True:
        eol = kept.find("\n", start)
        end = len(kept) if eol < 0 else eol
        label = None
        for prefix, kind in _PLAIN_LABELS:
            if kept.startswith(prefix, start):
                after = start + len(prefix)
                if after == end or kept[after] == " ":
                    label = Label(kind, P.STRONG, start, after, ())
                break
        if label is not None:
            if fenced or len(labels) >= MAX_LABELS - 1:
                return None
            labels.append(label)
        elif start < end:
            if P.LABEL.match(kept, start) or P.OBSERVATION_LABEL.match(kept, start):
                return None
            fenced = fenced or P.FENCE_LINE.match(kept, start) is not None
        if eol < 0:
            return labels
        start = eol + 1


def split_sections(body: str, labels: list[Label]) -> list[Section]:
    """The reply split at the labels that count where they stand."""
    sections: list[Section] = []
    first = labels[0].start if labels else len(body)
    if body[:first].strip():
        sections.append(Section(PREAMBLE, 0, body[:first], 0))
    honoured: list[Label] = []
    for label in labels:
        prev = honoured[-1].kind if honoured else None
        if label.strength == P.WEAK:
            if label.kind == P.ACTION_INPUT and prev != P.ACTION:
                continue
            if label.kind == P.FINAL and any(h.kind == P.FINAL for h in honoured):
                continue
        if label.kind == P.QUESTION and honoured and prev != P.FINAL:
            continue
        honoured.append(label)
    for i, label in enumerate(honoured):
        end = honoured[i + 1].start if i + 1 < len(honoured) else len(body)
        sections.append(
            Section(label.kind, label.start, body[label.content : end], label.content, label.codes)
        )
    return _split_inline(sections)


def _split_inline(sections: list[Section]) -> list[Section]:
    """Split "Thought: ... . Action: x" on one line into a thought and an action."""
    out: list[Section] = []
    for sec in sections:
        m = P.INLINE_LABEL.search(sec.content) if sec.kind in (P.THOUGHT, PREAMBLE) else None
        if m is None:
            out.append(sec)
            continue
        kind, _strength, word_codes = _word_info(m.group("word"))
        at, end = sec.content_start + m.start(), sec.content_start + m.end()
        out.append(replace(sec, content=sec.content[: m.start()]))
        out.append(Section(kind, at, sec.content[m.end() :], end, ("inline_label", *word_codes)))
    return out
