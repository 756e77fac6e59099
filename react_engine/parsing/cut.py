"""Cutting a text ReAct reply where the model started inventing, as a server's ``stop``
would (an Observation label, a stop word, special tokens, a partial stop at the end)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from . import patterns as P
from .labels import content_start
from .think import mask_think, think_span

__all__ = ["Cut", "cut_reply", "partial_stop", "tidy"]

_PARTIAL_FORMS: Final = tuple(
    spelling + colon
    for word in ("Observation", "Observations", "Obs", "观察", "观察结果", "观测", "观测结果")
    for spelling in dict.fromkeys((word, word.lower(), word.upper()))
    for colon in (":", "：")
)

_LONGEST_FORM: Final = max(len(form) for form in _PARTIAL_FORMS)
_PARTIAL_PREFIXES: Final = frozenset(
    form[:n] for form in _PARTIAL_FORMS for n in range(len(form) + 1)
)
"""Every beginning of a :data:`_PARTIAL_FORMS` spelling (a set lookup, not a scan)."""


@dataclass(slots=True)
class Cut:
    """A reply cut (:func:`cut_reply`), its think blocks set aside."""

    text: str  # the reply as kept
    codes: list[str]
    think: str | None  # content of the think block, if there is one
    body_start: int  # where the reply proper starts (after the think block)
    unclosed_think: bool
    masked: str = ""  # the kept body with every later think block blanked out
    later_think: list[str] = field(default_factory=list)  # those blocks' contents
    blanked: bool = False  # whether any later block was blanked out


def cut_reply(text: str, stop_words: Sequence[str] | None = None) -> Cut:
    """Cut a reply where the model started inventing, as a server's ``stop`` would: at the
    first Observation label or stop word outside think blocks, then special tokens and a
    partial stop at the end."""
    think, body_start, think_code = think_span(text)
    codes = [think_code] if think_code else []
    body = text[body_start:]
    masked, later_think, later_code = mask_think(body)
    if later_code:
        codes.append(later_code)
    end = len(body)
    obs_at = _first_observation(masked)
    stop_at = -1
    for word in stop_words or ():
        if word:
            at = masked.find(word, 0, end if stop_at < 0 else stop_at)
            if at >= 0:
                stop_at = at
    if obs_at >= 0 or stop_at >= 0:
        end = min(at for at in (obs_at, stop_at) if at >= 0)
        if obs_at >= 0 and not body[end:obs_at].strip():
            codes.append("cut_observation")
        else:
            codes.append("cut_stop_word")
    kept = body[:end].rstrip()
    while True:
        lt = kept.rfind("<")
        if lt < 0 or P.SPECIAL_TOKEN.fullmatch(kept, lt) is None:
            break
        kept = kept[:lt].rstrip()
        codes.append("special_token")
    partial = partial_stop(kept, stop_words)
    if partial < len(kept):
        kept = kept[:partial].rstrip()
        codes.append("trim_partial_stop")
    return Cut(
        text=(text[:body_start] + kept).rstrip(),
        codes=list(dict.fromkeys(codes)),
        think=think,
        body_start=body_start,
        unclosed_think=think_code == "unclosed_think",
        masked=masked[: len(kept)],
        later_think=later_think,
        blanked=later_code is not None,
    )


_BLANKED: Final = re.compile(r"(?<=\S)[ \t]{15,}")
"""A run of blanks at least as long as an empty think block (``<think></think>``) after
some text on the same line: where a block was blanked out inside a line."""


def tidy(text: str | None) -> str | None:
    """Text read from a masked body, without the blanks its think blocks left."""
    if text is None:
        return None
    lines = (_BLANKED.sub(" ", line).rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _first_observation(body: str) -> int:
    for m in P.OBSERVATION_LABEL.finditer(body):
        if content_start(m, body, *m.group("colon", "pre", "em")) is not None:
            return m.start()
    return -1


def partial_stop(kept: str, stop_words: Sequence[str] | None) -> int:
    """Where a last line that only begins ``Observation:`` or a stop word starts (three
    characters at least unless Chinese, so an answer ending in ``O`` keeps it)."""
    nl = kept.rfind("\n")
    if nl < 0:
        return len(kept)
    last = kept[nl + 1 :]
    core = last.strip(" \t>#*_-")
    if len(core) < 3 and core.isascii():
        return len(kept)
    if len(core) < _LONGEST_FORM and core in _PARTIAL_PREFIXES:
        return nl
    long_enough = len(last) >= 3 or not last.isascii()
    for word in stop_words or ():
        word = word.lstrip("\n")
        if long_enough and len(last) < len(word) and word.startswith(last):
            return nl
    return len(kept)
