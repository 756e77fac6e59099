"""The scripted chat model, the fake that ships with the :class:`ChatModel` seam."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..transport.base import ChatModel
from ..transport.wire import request_payload
from ..types import ModelRequest, ModelResponse, ToolCall, Usage
from .script import Script

__all__ = ["ScriptedModel", "reply", "tool_call_reply"]


def reply(
    content: str | None = None, *, reasoning: str | None = None, usage: Usage | None = None
) -> ModelResponse:
    """A scripted text reply."""
    return ModelResponse(
        content=content, reasoning=reasoning, finish_reason="stop", usage=usage or Usage(requests=1)
    )


def tool_call_reply(
    *calls: tuple[str, Mapping[str, Any] | str] | tuple[str, Mapping[str, Any] | str, str | None],
    content: str | None = None,
    reasoning: str | None = None,
    usage: Usage | None = None,
) -> ModelResponse:
    """A scripted reply with native tool calls: ``(name, args)`` or ``(name, args, id)``.

    Ids default to ``call_1``, ``call_2``... in order; pass ``None`` to omit one.
    """
    out: list[ToolCall] = []
    for i, call in enumerate(calls, 1):
        name, args = call[0], call[1]
        call_id = call[2] if len(call) > 2 else f"call_{i}"
        text = args if isinstance(args, str) else json.dumps(dict(args), ensure_ascii=False)
        out.append(ToolCall(call_id, name, text))
    return ModelResponse(
        content=content,
        tool_calls=out,
        reasoning=reasoning,
        finish_reason="tool_calls",
        usage=usage or Usage(requests=1),
    )


class ScriptedModel(Script[ModelRequest, Any], ChatModel):
    """A model that answers from a script: a queue of replies (a :class:`ModelResponse`,
    a string, an exception to raise, or a function of the request giving one), or a
    function of the request. ``requests`` and ``payloads`` record what was asked; once the
    script is spent, ``default`` answers, else :class:`ScriptExhausted`."""

    def __init__(
        self,
        script: Iterable[Any] | Callable[[ModelRequest], Any] = (),
        *,
        base_url: str = "scripted://",
        default: Any = None,
    ) -> None:
        super().__init__(script, default=default)
        self.base_url = base_url
        self.requests: list[ModelRequest] = []
        self.payloads: list[dict[str, Any]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        self.payloads.append(request_payload(request))
        item = self.answer(request)  # a function's item: what it gave
        if inspect.isawaitable(item):
            item = await item
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return reply(item)
        if isinstance(item, ModelResponse):
            return item
        raise TypeError(f"a script item must be a reply, a string or an exception: {item!r}")
