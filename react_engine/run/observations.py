"""What the model sees of a tool's result: compact JSON (``ensure_ascii=False``) or the tool's
``summarize``, truncated to a limit with a visible marker of how much was cut."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel

from ..text import valid_unicode
from ..types import HistoryItem, Step

__all__ = ["render_observation", "serialize_result", "shorten_observations", "truncate"]


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


_RESULT_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default)


def serialize_result(value: Any) -> str:
    """A tool result as compact text: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        return _RESULT_JSON.encode(value)
    except Exception:  # circular or too deep, exotic keys, a __str__ that raises, huge ints
        pass
    try:
        return repr(value)
    except Exception:  # a result the tool returned fine must not fail the call
        return f"<unprintable {type(value).__name__} object>"


def truncate(text: str, limit: int | None) -> str:
    """Cut ``text`` to about ``limit`` characters, keeping its head and tail, with a marker."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text
    marker = f"\n…[truncated {{}} of {len(text)} characters]…\n"
    room = max(0, limit - len(marker.format(len(text))))
    head = room * 3 // 4
    tail = room - head
    cut = len(text) - head - tail
    return text[:head] + marker.format(cut) + (text[len(text) - tail :] if tail else "")


def render_observation(
    value: Any, *, limit: int | None, summarize: Callable[[Any], str] | None = None
) -> str:
    """Serialise (or summarise) a result and apply the length limit."""
    text = summarize(value) if summarize is not None else serialize_result(value)
    if not isinstance(text, str):
        text = serialize_result(text)
    return truncate(valid_unicode(text), limit)


SHORTENED_LIMIT = 400
"""Characters an observation keeps when a request overflows the context window."""


def shorten_observations(history: list[HistoryItem], *, keep_latest: bool) -> int:
    """Shorten the long observations of ``history``'s steps (with ``keep_latest``, not the
    last step's); how many. The steps are replaced by copies: the trace keeps them whole."""
    last = max((i for i, item in enumerate(history) if isinstance(item, Step)), default=-1)
    shortened = 0
    for i, item in enumerate(history):
        if not isinstance(item, Step) or (keep_latest and i == last):
            continue
        long = sum(1 for a in item.actions if len(a.observation) > SHORTENED_LIMIT)
        if not long:
            continue
        actions = [
            dataclasses.replace(a, observation=truncate(a.observation, SHORTENED_LIMIT))
            for a in item.actions
        ]
        history[i] = dataclasses.replace(item, actions=actions)
        shortened += long
    return shortened
