"""A tool call bounded in time (:func:`within`), in the caller's own task (not ``wait_for``)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float) -> T:
    """``await awaitable`` for at most ``timeout`` seconds, then
    :class:`~react_engine.runtime.DeadlinePassed`."""
    import asyncio  # loaded by the running loop: not imported with the library

    from ..runtime import DeadlinePassed

    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise DeadlinePassed(timeout) from None
        raise
