"""Streamed replies: assembling deltas, stopping early at a stop sequence (docs/streaming.md).

:class:`ReplyBuilder` turns the deltas of one streamed reply into the reply a non-streamed
call returns, and cuts its text where a ``stop`` sequence begins (a server that ignores
``stop`` is then closed, and its usage estimated). :func:`stream_once` raises
:class:`EmptyStream` for HTTP 200 with no chunk (the loop asks again through
:class:`Unstreamed`); a failure after deltas were passed on calls ``on_discard`` first.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from ..errors import ModelRequestError, ModelUnavailableError
from ..types import ModelDelta, ModelRequest, ModelResponse, ToolCall, ToolCallChunk, Usage
from ..wording import Notice, NoticeCode
from .base import ChatModel

__all__ = ["EmptyStream", "ReplyBuilder", "Unstreamed", "stream_once"]

CHARS_PER_TOKEN = 4
"""For the estimate of a prompt's tokens when the server sent no usage."""


class EmptyStream(ModelRequestError):
    """HTTP 200 and a stream with no chunk: the server cannot stream this request, and a
    retry would get the same. Sent again without ``stream`` it is answered."""


class Unstreamed(ChatModel):
    """``model`` asked without streaming: its :meth:`stream` is the default one, the
    whole reply of :meth:`ChatModel.complete` as one delta."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.base_url = model.base_url

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.model.complete(request)


class ReplyBuilder:
    """Assembles one streamed reply; watches its text for ``stop`` sequences
    (:attr:`stopped`, once one is found)."""

    def __init__(self, stop: tuple[str, ...] | None = None) -> None:
        self.stop = tuple(s for s in (stop or ()) if s)
        self.stopped: str | None = None
        self.chunks = 0  # deltas with text, reasoning or a call: completion tokens, estimated
        self._shown: list[str] = []  # the text passed on, in pieces (joined at the end)
        self._pending = ""  # held back: it may be the beginning of a stop sequence
        self._any_content = False
        self._reasoning: list[str] = []
        self._calls: dict[int, tuple[list[str | None], list[str]]] = {}  # [id, name], args
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._model: str | None = None
        self._events: list[Notice] = []

    def add(self, delta: ModelDelta) -> ModelDelta | None:
        """Take one delta; return the part to pass on (None when there is nothing yet)."""
        if self.stopped is not None:
            return None
        if delta.content or delta.reasoning or delta.tool_calls:
            self.chunks += 1
        self._events.extend(delta.events)
        if delta.model:
            self._model = delta.model
        if delta.usage is not None:
            self._usage = delta.usage
        if delta.finish_reason:
            self._finish = delta.finish_reason
        if delta.reasoning:
            self._reasoning.append(delta.reasoning)
        for chunk in delta.tool_calls:
            self._add_call(chunk)
        text = self._add_text(delta.content) if delta.content is not None else None
        if not (text or delta.reasoning or delta.tool_calls):
            return None
        return ModelDelta(
            content=text or None, reasoning=delta.reasoning, tool_calls=delta.tool_calls
        )

    def _add_text(self, piece: str) -> str:
        self._any_content = True
        if not self.stop:
            self._shown.append(piece)
            return piece
        text = self._pending + piece
        found = [(i, s) for s in self.stop if (i := text.find(s)) >= 0]
        if found:
            at, label = min(found)
            self.stopped = label
            self._finish = "stop"
            self._pending = ""
            self._shown.append(text[:at])
            return text[:at]
        held = _held_back(text, self.stop)
        out = text[: len(text) - held]
        self._pending = text[len(text) - held :]
        self._shown.append(out)
        return out

    def flush(self) -> str:
        """The text held back at the end of the stream (it was no stop sequence after all)."""
        out, self._pending = self._pending, ""
        self._shown.append(out)
        return out

    def _add_call(self, chunk: ToolCallChunk) -> None:
        head, arguments = self._calls.setdefault(chunk.index, ([None, ""], []))
        if chunk.id and head[0] is None:
            head[0] = chunk.id
        if chunk.name and chunk.name != head[1]:  # a few servers send it with every fragment
            head[1] = (head[1] or "") + chunk.name
        if chunk.arguments:
            arguments.append(chunk.arguments)

    def response(self, request: ModelRequest | None = None) -> ModelResponse:
        """The reply so far, as a non-streamed call would have returned it."""
        events = list(self._events)
        usage = self._usage
        if self.stopped is not None:
            events.append(Notice(NoticeCode.STOPPED_LIVE, stop=repr(self.stopped)))
        if usage is None:
            messages = request.messages if request is not None else ()
            chars = sum(len(getattr(m, "content", None) or "") for m in messages)
            prompt = -(-chars // CHARS_PER_TOKEN)
            usage = Usage(prompt, self.chunks, prompt + self.chunks, requests=1)
            counts = {"chunks": str(self.chunks), "prompt": str(prompt)}
            events.append(Notice(NoticeCode.USAGE_ESTIMATED, **counts))
        calls = [
            ToolCall(head[0], head[1] or "", "".join(arguments))
            for _, (head, arguments) in sorted(self._calls.items())
            if head[1]
        ]
        text = "".join(self._shown) + self._pending
        return ModelResponse(
            # An empty text beside tool calls is no text, as non-streamed replies send it.
            content=text if self._any_content and (text or not calls) else None,
            tool_calls=calls,
            reasoning="".join(self._reasoning) if self._reasoning else None,
            finish_reason=self._finish,
            usage=usage,
            model=self._model,
            events=events,
        )


def _held_back(text: str, stops: tuple[str, ...]) -> int:
    """The length of the longest end of ``text`` that begins some stop sequence."""
    longest = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:n]):
                longest = n
                break
    return longest


async def stream_once(
    model: ChatModel,
    request: ModelRequest,
    on_delta: Callable[[ModelDelta], None] | None = None,
    on_stop: Callable[[str, int], None] | None = None,
    on_discard: Callable[[str], None] | None = None,
) -> ModelResponse:
    """One streamed attempt, assembled into a reply (see the module)."""
    builder = ReplyBuilder(request.stop)
    delivered = False
    received = 0
    deltas: AsyncIterator[ModelDelta] = model.stream(request)
    try:
        async for delta in deltas:
            received += 1
            out = builder.add(delta)
            if out is not None and on_delta is not None:
                on_delta(out)
                delivered = True
            if builder.stopped is not None:
                break
    except ModelUnavailableError as exc:
        if delivered and on_discard is not None:
            on_discard(str(exc))
        raise
    finally:
        closing = getattr(deltas, "aclose", None)
        if closing is not None:
            # closes the HTTP response: the server sees the connection end
            with contextlib.suppress(Exception):
                await closing()
    if not received:
        raise EmptyStream(
            "the server answered HTTP 200 with an empty stream: no chunk, no reply", status_code=200
        )
    if builder.stopped is not None and on_stop is not None:
        on_stop(builder.stopped, builder.chunks)
    rest = builder.flush()
    if rest and on_delta is not None:
        on_delta(ModelDelta(content=rest))
    return builder.response(request)
