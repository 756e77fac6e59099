"""The clients under :class:`~react_engine.transport.openai_model.OpenAIChatModel`.

An async client's pooled connections belong to the event loop that opened them: a model
keeps one client per loop (:class:`LoopClient`), closed when that loop shuts down
(:func:`close_at_loop_shutdown`). A blocking client runs in a worker thread
(:func:`react_engine.runtime.run_blocking`), which cancelling cannot stop:
:class:`SyncAttempt` records the HTTP requests of one attempt
(:func:`note_requests` hooks the client) so that their sockets can be shut down when the
attempt is given up.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "LoopClient",
    "SyncAttempt",
    "close_at_loop_shutdown",
    "close_on_their_loops",
    "note_requests",
]


_SYNC_ATTEMPT: contextvars.ContextVar[SyncAttempt | None] = contextvars.ContextVar(
    "react_engine_sync_attempt", default=None
)


class SyncAttempt:
    """One blocking request in a worker thread: the HTTP requests it sent, so that their
    connections can be shut down when the attempt is given up."""

    def __init__(self) -> None:
        self.extensions: list[Any] = []
        self.given_up = False

    def call(self, create: Callable[..., Any], payload: dict[str, Any]) -> Any:
        token = _SYNC_ATTEMPT.set(self)
        try:
            return create(**payload)
        finally:
            _SYNC_ATTEMPT.reset(token)

    def abort(self, client: Any) -> None:
        """Shut down the sockets of this attempt's requests still in the client's pool.

        This reaches into the HTTP client's pool (``httpx2``/``httpcore2`` internals); with
        a transport of another kind nothing is found, and the worker thread is left to end
        when its request does.
        """
        self.given_up = True
        import socket

        with contextlib.suppress(Exception):
            pool = client._client._transport._pool
            for pending in list(pool._requests):
                if not any(pending.request.extensions is e for e in self.extensions):
                    continue
                stream = pending.connection._connection._network_stream
                sock = stream.get_extra_info("socket")
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def note_requests(client: Any) -> None:
    """Have a blocking client tell the attempt in progress (if any) about each HTTP request
    it sends, through the SDK's ``_prepare_request`` hook (on our own copy of the client)."""
    original = getattr(client, "_prepare_request", None)
    if not callable(original):  # pragma: no cover - an SDK without the hook
        return

    def prepare(request: Any) -> None:
        attempt = _SYNC_ATTEMPT.get()
        if attempt is not None:
            if attempt.given_up:
                raise TimeoutError("the attempt was given up")
            attempt.extensions.append(request.extensions)
        original(request)

    with contextlib.suppress(AttributeError, TypeError):
        client._prepare_request = prepare


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
