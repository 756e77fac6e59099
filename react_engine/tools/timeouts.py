"""A tool call bounded in time: :func:`within`.

``asyncio.wait_for`` with two differences that matter to a tool: a ``KeyboardInterrupt`` or
``SystemExit`` raised by the tool reaches the caller instead of stopping the event loop,
and the time running out is told apart from a ``TimeoutError`` the tool raised itself.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


class _Escaped(Exception):
    """Carries a ``KeyboardInterrupt`` or ``SystemExit`` out of the task that ``wait_for``
    runs the awaitable in (raised in a task, those two stop the event loop itself), and a
    ``TimeoutError`` of the awaitable's own, which ``wait_for`` would pass on looking like
    its own timeout."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(repr(original))
        self.original = original


async def _contained(awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except (KeyboardInterrupt, SystemExit, TimeoutError) as exc:
        raise _Escaped(exc) from None


async def within(awaitable: Awaitable[T], timeout: float) -> T:
    """``asyncio.wait_for``, except that a ``KeyboardInterrupt`` or ``SystemExit`` from the
    awaitable reaches the caller, like any exception, instead of stopping the loop, and
    that the time running out raises :class:`~react_engine.run._threads.DeadlinePassed` (a
    ``TimeoutError``), apart from a ``TimeoutError`` the awaitable raised itself."""
    import asyncio  # loaded by the running loop: not imported with the library

    from ..run._threads import DeadlinePassed

    try:
        return await asyncio.wait_for(_contained(awaitable), timeout)
    except _Escaped as escaped:
        raise escaped.original from None
    except TimeoutError:
        raise DeadlinePassed(timeout) from None
