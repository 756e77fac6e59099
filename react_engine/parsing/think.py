"""The one reader of a reply's reasoning (think blocks), for every protocol: set apart
(:func:`read_think`), blanked out (:func:`mask_think`) or the leading one (:func:`think_span`)."""

from __future__ import annotations

from dataclasses import dataclass

from .common import think_blocks

__all__ = ["Thinking", "mask_think", "read_think", "think_span"]


def mask_think(body: str) -> tuple[str, list[str], str | None]:
    """``body`` with every think block blanked out (line breaks and offsets kept, so nothing
    inside a block is read as part of the step), their contents, and a repair code."""
    blocks = list(think_blocks(body))
    if not blocks:
        return body, [], None
    chars = list(body)
    for block in blocks:
        for i in range(block.start, block.end):
            if chars[i] != "\n":
                chars[i] = " "
    contents = [body[b.content_start : b.content_end].strip() for b in blocks]
    code = "think_block" if all(b.closed for b in blocks) else "unclosed_think"
    return "".join(chars), [c for c in contents if c], code


@dataclass(frozen=True, slots=True)
class Thinking:
    """A reply read for its reasoning (:func:`read_think`)."""

    reasoning: str | None
    """What its think blocks hold (and, before a JSON payload, the prose around them),
    stripped; ``None`` when there is none or it is blank."""
    rest: str
    """The reply without them."""
    codes: tuple[str, ...] = ()
    """``think_block``, ``unclosed_think`` (a block never closed: reasoning to the end)."""


def read_think(text: str, *, payload: str = "") -> Thinking:
    """The one reader of a reply's reasoning, for every protocol: its think blocks (one never
    closed runs to the end of the reply).

    ``payload``: the characters that open a delimited payload (``"{[`"``): blocks are then read
    only before it, so a tag inside it stays text, and prose before a block is reasoning too."""
    if payload:
        return _think_before(text, payload)
    think, body_start, code = think_span(text)
    rest = text[body_start:]
    parts = [(think or "").strip()]
    kept: list[str] = []
    codes = [code] if code else []
    at = 0
    for block in think_blocks(rest):
        kept.append(rest[at : block.start])
        parts.append(rest[block.content_start : block.content_end].strip())
        codes.append("think_block" if block.closed else "unclosed_think")
        at = block.end
    kept.append(rest[at:])
    reasoning = "\n\n".join(p for p in parts if p) or None
    return Thinking(reasoning, "".join(kept), tuple(dict.fromkeys(codes)))


def _think_before(raw: str, payload: str) -> Thinking:
    thoughts: list[str] = []
    codes: list[str] = []
    body = raw
    while body.lstrip()[:1] not in tuple(payload):
        block = next(think_blocks(body), None)
        if block is None:
            break
        prose = body[: block.start].strip()
        content = body[block.content_start : block.content_end].strip()
        thoughts += [t for t in (prose, content) if t]
        codes.append("think_block" if block.closed else "unclosed_think")
        body = body[block.end :]  # "" when never closed: it runs to the end
    return Thinking("\n\n".join(thoughts) or None, body, tuple(dict.fromkeys(codes)))


def think_span(text: str) -> tuple[str | None, int, str | None]:
    """The leading think block's content, where the reply proper starts, and the repair
    code. Leading: at the start, or everything before a stray closing tag; a block after
    some text is a later block (:func:`mask_think`)."""
    block = next(think_blocks(text), None)
    if block is None:
        return None, 0, None
    if not block.opened:
        return text[: block.content_end], block.end, "think_block"
    if text[: block.start].strip():
        return None, 0, None
    if not block.closed:  # cut while thinking, or never closed: all of it is reasoning
        return text[block.content_start :], len(text), "unclosed_think"
    return text[block.content_start : block.content_end], block.end, "think_block"
