"""The clients under :class:`~react_engine.transport.openai_model.OpenAIChatModel`.

An async client's pooled connections belong to the event loop that opened them: a model
keeps one client per loop (:class:`LoopClient`), closed when that loop shuts down
(:func:`close_at_loop_shutdown`).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["LoopClient", "close_at_loop_shutdown", "close_on_their_loops"]


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
