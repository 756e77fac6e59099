"""The adapter to the ``openai`` SDK: :class:`OpenAIChatModel`, with a sync or an async
client and any ``base_url``.

Its requests and replies go through :mod:`~react_engine.transport.wire`; an async client
is kept per event loop (:class:`LoopClient`), closed when that loop shuts down. The SDK's
own retries are off: the retry budget is :mod:`~react_engine.transport.retries`' alone.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# ``asyncio`` (with ``ssl``, ``socket``, ``subprocess``...) and the worker threads are
# imported by the coroutines that use them, not with the library: a coroutine runs on an
# event loop, so asyncio is loaded by then and the import is a lookup.
if TYPE_CHECKING:
    import asyncio

    import openai

from ..errors import ModelAPIError
from ..types import ModelDelta, ModelRequest, ModelResponse, is_seconds
from .base import ChatModel
from .wire import (
    delta_from_chunk,
    error_body,
    mask_key,
    mask_url,
    response_from_sdk,
    sdk_arguments,
    translate_error,
)

__all__ = ["DEFAULT_ATTEMPT_TIMEOUT", "OpenAIChatModel"]


class OpenAIChatModel(ChatModel):
    """Chat completions through the ``openai`` SDK, with a sync or an async client (its own
    retries off: see the module)."""

    def __init__(self, client: openai.AsyncOpenAI | openai.OpenAI, *, owned: bool = False) -> None:
        import openai  # only once a client exists: ``import react_engine`` stays light

        self._client = client.with_options(max_retries=0)
        self._is_async = isinstance(client, openai.AsyncOpenAI)
        timeout = getattr(client, "timeout", None)
        self._default_timeout = float(timeout) if is_seconds(timeout) else DEFAULT_ATTEMPT_TIMEOUT
        self.base_url = str(client.base_url).rstrip("/")
        key = getattr(client, "api_key", None)
        self._secret: str | None = key if isinstance(key, str) else None
        self._owned = owned and self._is_async  # built by connect(): one client per loop
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lent_first = False  # _client went to a loop already (closed with that loop)
        self._stream_usage = True  # off once the server rejected stream_options
        # ``owned``: the pooled connections are ours. Close them when the model goes (a loop
        # may outlive it: ``agent.run()``'s is kept per thread), each async client on its
        # loop, rather than leave open sockets to the garbage collector.
        if self._owned:
            weakref.finalize(self, close_on_their_loops, self._per_loop)
        elif owned:
            weakref.finalize(self, client.close)

    def __repr__(self) -> str:
        url, key = mask_url(self.base_url), mask_key(self._secret)
        return f"OpenAIChatModel(base_url={url!r}, api_key={key!r})"

    async def _client_here(self) -> Any:
        if not self._owned:
            return self._client
        import asyncio

        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is None:
            client = self._client
            if self._lent_first:
                import openai

                fresh = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._secret)
                client = fresh.with_options(max_retries=0)
            self._lent_first = True
            # An async generator of the loop: its shutdown closes the client's connections
            # while it still can, and drops the entry (which holds the loop).
            closer = close_at_loop_shutdown(client, self._per_loop, loop)
            entry = self._per_loop[loop] = LoopClient(client, closer)
            await closer.__anext__()
        return entry.client

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One attempt, bounded in total by ``settings.timeout`` (else the client's own
        timeout, else :data:`DEFAULT_ATTEMPT_TIMEOUT`): the HTTP timeout bounds each read
        only, and a server that trickles a byte at a time would hold a run forever."""
        payload, limit, deadline = self._prepare(request)
        error: ModelAPIError | None = None
        try:
            completion = await self._create(payload, deadline)
            if isinstance(completion, str):  # a server that answered with non-JSON text
                raise ValueError("non-JSON body")
        except Exception as exc:
            error = translate_error(exc, secret=self._secret, limit=limit)
        if error is not None:  # outside the ``except`` block: see translate_error
            raise error
        return response_from_sdk(completion)

    def _prepare(self, request: ModelRequest) -> tuple[dict[str, Any], float, float]:
        import asyncio

        payload = sdk_arguments(request)
        if request.settings.timeout is not None:
            payload["timeout"] = request.settings.timeout
        limit = request.settings.timeout or self._default_timeout
        return payload, limit, asyncio.get_running_loop().time() + limit

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """One streamed attempt, bounded in total like :meth:`complete`, asking for the usage
        chunk (``stream_options``) until a server rejects the option."""
        import asyncio

        payload, limit, deadline = self._prepare(request)
        payload["stream"] = True
        stream: Any = None
        error: ModelAPIError | None = None
        try:
            stream = await self._open_stream(payload, deadline)
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        if self._is_async:
                            chunk = await stream.__anext__()
                        else:
                            chunk = await _blocking(next, stream, _DONE)
                except StopAsyncIteration:
                    break
                if chunk is _DONE:
                    break
                yield delta_from_chunk(chunk)
        except Exception as exc:
            error = translate_error(exc, secret=self._secret, limit=limit)
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    if self._is_async:
                        await stream.close()
                    else:  # closes the connection under a worker thread still reading it
                        stream.close()
        if error is not None:
            raise error

    async def _open_stream(self, payload: dict[str, Any], deadline: float) -> Any:
        import openai

        if self._stream_usage:
            payload = {**payload, "stream_options": {"include_usage": True}}
        try:
            return await self._create(payload, deadline)
        except openai.APIStatusError as exc:
            if not (self._stream_usage and exc.status_code in (400, 422)):
                raise
            if not any(word in error_body(exc) for word in ("stream_options", "include_usage")):
                raise
        self._stream_usage = False
        payload = {k: v for k, v in payload.items() if k != "stream_options"}
        return await self._create(payload, deadline)

    async def _create(self, payload: dict[str, Any], deadline: float) -> Any:
        import asyncio

        # asyncio's timeout, not wait_for: when the run's deadline cancels this at the same
        # moment, that cancellation wins.
        async with asyncio.timeout_at(deadline):
            if self._is_async:
                create: Any = (await self._client_here()).chat.completions.create
                return await create(**payload)
            sync_create: Any = self._client.chat.completions.create
            return await _blocking(sync_create, **payload)


@dataclass(slots=True)
class LoopClient:
    client: Any
    closer: AsyncGenerator[None, None]


async def close_at_loop_shutdown(
    client: Any,
    per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClient],
    loop: asyncio.AbstractEventLoop,
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        per_loop.pop(loop, None)
        with contextlib.suppress(Exception):
            await client.close()


def close_on_their_loops(
    per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClient],
) -> None:
    """Close each loop's client on that loop (from any thread, the garbage collector's
    included): its closer runs when the loop next runs, or when it shuts down."""
    for loop, entry in list(per_loop.items()):
        with contextlib.suppress(RuntimeError):  # the loop is closed: so is the client
            loop.call_soon_threadsafe(_close_entry, loop, entry)


def _close_entry(loop: asyncio.AbstractEventLoop, entry: LoopClient) -> None:
    # The client, not its closer: the loop's shutdown may close that generator at the same
    # time (closing a client twice is harmless; a generator twice at once is an error).
    loop.create_task(entry.client.close())


_DONE = object()


async def _blocking(function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """A blocking client's call on a daemon thread of the runtime's bounded pool: one given
    up ends on its own, counted as a stuck thread until then (docs/reliability.md)."""
    from ..runtime import run_sync_call

    return await run_sync_call(functools.partial(function, *args, **kwargs))


DEFAULT_ATTEMPT_TIMEOUT = 600.0
"""Seconds one request may take in all, when neither the settings nor the client say."""
