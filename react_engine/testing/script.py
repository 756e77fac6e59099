"""A script: the answers a fake gives, from a queue or from a function of the request (the
one mechanism behind :class:`~react_engine.testing.ScriptedModel` and
:class:`~react_engine.testing.ScriptedServer`); a queued item may be a function too.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ..errors import UserError

__all__ = ["Script", "ScriptExhausted"]

Request = TypeVar("Request")
Item = TypeVar("Item")


class ScriptExhausted(UserError):
    """A scripted fake was asked more often than its script allows."""


class Script(Generic[Request, Item]):
    """Answers in order from a queue, or from one function of the request; ``default``
    once the queue is empty (``None``: :class:`ScriptExhausted`). Thread-safe. The scripted
    fakes are scripts themselves (``fake.push(...)``, ``fake.default = ...``)."""

    def __init__(
        self,
        script: Iterable[Item | Callable[[Request], Item]] | Callable[[Request], Item] = (),
        *,
        default: Item | Callable[[Request], Item] | None = None,
    ) -> None:
        self._fn: Callable[[Request], Item] | None = None
        self._queue: deque[Item | Callable[[Request], Item]] = deque()
        if callable(script):
            self._fn = script
        else:
            self._queue.extend(script)
        self.default = default
        self.asked = 0  # requests answered (or that found the script spent)
        self._script_lock = threading.Lock()

    def push(self, *items: Item | Callable[[Request], Item]) -> None:
        with self._script_lock:
            self._queue.extend(items)

    @property
    def remaining(self) -> int:
        """Queued items never asked for."""
        return len(self._queue)

    def answer(self, request: Request) -> Item:
        """The next item, called with ``request`` if it is a function."""
        with self._script_lock:
            self.asked += 1
            asked = self.asked
            if self._fn is not None:
                item: Item | Callable[[Request], Item] | None = self._fn
            elif self._queue:
                item = self._queue.popleft()
            else:
                item = self.default
        if item is None:
            raise ScriptExhausted(f"the script has no reply left for request #{asked}")
        if callable(item):
            return item(request)
        return item
