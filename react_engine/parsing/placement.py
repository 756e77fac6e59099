"""Where a call written in a reply's text is the model's action, and where it is not.

A complete, valid call of an offered tool written in the text is the action unless something
marks it as not meant now: :func:`placement` judges each group of calls (separated only by
white space) and names why one is dropped (:data:`REASONS`). When in doubt a call does not
run: a false alarm costs one more turn, never a call the model did not mean.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection, Iterator, Sequence
from typing import Final, Literal, TypeAlias

from . import patterns as P

__all__ = ["CUES", "FOLLOW_UP", "REASONS", "NotAction", "placement"]

NotAction: TypeAlias = Literal[
    "after_observation", "after_final_answer", "described", "quoted", "unclosed"
]

REASONS: Final[dict[str, str]] = {
    "after_observation": "written after an Observation you wrote yourself (only the engine "
    "writes observations)",
    "after_final_answer": "written after your final answer",
    "described": "written in prose that presents it as an example, a description, a "
    "refusal, a condition or a quote, not as a call to make now",
    "quoted": "quoted",
    "unclosed": "never closed (its closing tag is missing)",
}
"""Each reason as a clause for the model ("the call was not run: it is ...")."""

CUES: Final = re.compile(
    r"(?<![\w'’])(?:"
    # an example, a description of how one would call it
    r"for example|for instance|e\.\s?g\.|examples?|samples?|such as|illustrat\w*|"
    r"demonstrat\w*|for reference|hypothetical\w*|how (?:you|one|i|we|to)\b|"
    r"here(?:'s|’s| is) how|would look|looks like|syntax|"
    r"you(?:'d|’d| would| could| might| should)\b|would|could|might|"
    # a refusal
    r"won[’']t|will not|wouldn[’']t|can[’']t|cannot|can not|shouldn[’']t|should not|"
    r"don[’']t|do not|not going to|refus\w*|declin\w*|unable|not allowed|never|"
    # a condition
    r"if (?:you|i|we|needed|necessary|required|desired|so|confirmed|approved|wanted)\b|"
    r"unless|once you|in case|suppose\w*|assuming|imagine|"
    # a quote
    r"quot\w*"
    r")(?![\w'’])"
    # the same in Chinese (no spaces between words: found anywhere)
    r"|例如|比如|示例|例子|举例|不会|不要|不能|无法|如果|假如|假设|拒绝|可以这样|这样调用",
    re.IGNORECASE,
)
"""Words that say a call next to them is not meant now (English ones as whole words)."""

FOLLOW_UP: Final = re.compile(
    r"(?<![\w'’])(?:would|do) you (?:like|want)\b"
    r"(?![^?\n]*\b(?:me|run|call|execut\w*|proceed|confirm)\b)[^?\n]*\?",
    re.IGNORECASE,
)
"""A question after a call that offers the user more ("Would you like to know more?"): its
words are not cues (asking whether to run, call or proceed still is one)."""

_OPEN_QUOTES: Final = "\"“'‘「『«"
_CONTEXT: Final = 400
"""Characters of prose looked at on each side of a group of calls, at most."""


def placement(
    text: str,
    spans: Sequence[tuple[int, int]],
    skip: Sequence[tuple[int, int]] = (),
    closers: Collection[tuple[str, str]] = (),
) -> list[NotAction | None]:
    """For each call at ``spans`` (in order), why it is not the model's action, or ``None``.
    ``skip``: regions (think blocks, fences) that are neither labels nor prose around a call;
    ``closers``: each opening tag and the closing tag it needs."""
    regions = _Regions(skip)
    observation = _first_outside(P.INVENTED_OBSERVATION, text, regions)
    final = _first_outside(P.FINAL_ANSWER_LINE, text, regions)
    out: list[NotAction | None] = [None] * len(spans)
    index = 0
    previous_end = 0
    while index < len(spans):
        first = index
        while index + 1 < len(spans) and not text[spans[index][1] : spans[index + 1][0]].strip():
            index += 1  # the next call follows with white space between: the same group
        start, end = spans[first][0], spans[index][1]
        following = spans[index + 1][0] if index + 1 < len(spans) else len(text)
        reason: NotAction | None = None
        if observation is not None and start >= observation:
            reason = "after_observation"
        elif final is not None and start >= final:
            reason = "after_final_answer"
        elif any(_unclosed(text, s, end, closers) for s, _ in spans[first : index + 1]):
            reason = "unclosed"
        else:
            reason = _prose(text, start, end, previous_end, following, regions)
        out[first : index + 1] = [reason] * (index + 1 - first)
        previous_end = end
        index += 1
    return out


class _Regions:
    """Regions of a text (sorted by start, possibly overlapping), asked by position in
    logarithmic time (a hostile reply may hold tens of thousands of them)."""

    __slots__ = ("reach", "regions", "starts")

    def __init__(self, regions: Sequence[tuple[int, int]]) -> None:
        self.regions = sorted(regions)
        self.starts = [s for s, _ in self.regions]
        self.reach: list[int] = []  # the furthest end of the regions up to each one
        for _, end in self.regions:
            self.reach.append(max(end, self.reach[-1]) if self.reach else end)

    def covers(self, pos: int) -> bool:
        index = bisect.bisect_right(self.starts, pos) - 1
        return index >= 0 and self.reach[index] > pos

    def within(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """The regions that overlap ``[start, end)``."""
        first = bisect.bisect_left(self.reach, start + 1)
        last = bisect.bisect_left(self.starts, end)
        return (r for r in self.regions[first:last] if r[1] > start)


def _first_outside(pattern: re.Pattern[str], text: str, regions: _Regions) -> int | None:
    for found in pattern.finditer(text):
        if not regions.covers(found.start()):
            return found.start()
    return None


def _unclosed(text: str, start: int, end: int, closers: Collection[tuple[str, str]]) -> bool:
    """Whether the call at ``start`` opens with a tag never closed before ``end``."""
    head = text[start : start + 40].lstrip()
    for opener, closer in closers:
        if head.startswith(opener):
            after = text.find(opener, start + len(text[start : start + 40]) - len(head) + 1, end)
            return text.find(closer, start, end if after == -1 else after) == -1
    return False


def _prose(
    text: str, start: int, end: int, before: int, after: int, skip: _Regions
) -> NotAction | None:
    """Why the prose around ``text[start:end]`` says the calls there are not meant now."""
    lead = _blank(text, max(before, start - _CONTEXT), start, skip)
    tail = _blank(text, end, min(after, end + _CONTEXT), skip)
    opening = lead.rstrip(" \t*_`")[-1:]
    if opening and opening in _OPEN_QUOTES:
        return "quoted"  # the quote's end may lie inside what a reader took for the call
    line_start = lead.rfind("\n") + 1
    if lead[line_start:].lstrip(" \t").startswith(">"):
        return "quoted"
    near = _nearest_line(lead.split("\n")[::-1]), _nearest_line(tail.split("\n"))
    return "described" if CUES.search(near[0] + "\n" + FOLLOW_UP.sub("", near[1])) else None


def _blank(text: str, start: int, end: int, skip: _Regions) -> str:
    piece = text[start:end]
    for s, e in skip.within(start, end):
        a, b = max(s, start) - start, min(e, end) - start
        piece = piece[:a] + " " * (b - a) + piece[b:]
    return piece


def _nearest_line(lines: list[str]) -> str:
    """``lines[0]`` and, where that is blank, the next line with text (the lines nearest the
    calls, going away from them)."""
    if lines[0].strip() or len(lines) == 1:
        return lines[0]
    return next((line for line in lines[1:] if line.strip()), "")
