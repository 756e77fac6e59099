"""Sessions: a conversation's history kept outside the process (``session=``).

The history is loaded before a run and what the run added is appended when it ends.
Backends: :class:`SQLSession`, a SQL store's (``open_store(target).session(name)``), and
:class:`MemorySession` (this process only).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..types import HistoryItem
from .codec import dump_item, dumps, load_item

if TYPE_CHECKING:
    from .runs import SQLRunStore

__all__ = ["Execute", "MemorySession", "SQLSession", "Session"]


class Session(ABC):
    """Where one conversation's history lives between runs (and processes)."""

    name: str

    @abstractmethod
    async def load(self) -> list[HistoryItem]:
        """The whole history, oldest first."""

    @abstractmethod
    async def append(self, items: Sequence[HistoryItem]) -> None:
        """Add ``items`` at the end, as one batch: a concurrent writer's items go wholly
        before or wholly after them."""

    @abstractmethod
    async def clear(self) -> None:
        """Forget the history."""


class MemorySession(Session):
    """A session in this process's memory."""

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._items: list[HistoryItem] = []

    async def load(self) -> list[HistoryItem]:
        return list(self._items)

    async def append(self, items: Sequence[HistoryItem]) -> None:
        self._items.extend(items)

    async def clear(self) -> None:
        self._items.clear()

    def __repr__(self) -> str:
        return f"MemorySession({self.name!r}, items={len(self._items)})"


Execute = Callable[[str, Sequence[Any]], Awaitable[tuple[list[Any], int]]]
"""One statement on a SQL backend's connection: its rows and the number of rows it changed."""


class SQLSession(Session):
    """A session in a SQL run store (:meth:`SQLRunStore.session
    <react_engine.store.runs.SQLRunStore.session>`), shared with the store's other sessions
    and runs. Items are stored as versioned JSON (:mod:`react_engine.store.codec`), each with
    a sequence number that an append takes inside its transaction, after the store's
    ``session_lock`` (writers of one session take turns)."""

    def __init__(self, name: str, store: SQLRunStore) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a session needs a non-empty name (a str)")
        self.name = name
        self.store = store

    async def _run(self, sql: str, *params: Any, transaction: bool = False) -> list[Any]:
        store = self.store
        async with store.connection(transaction=transaction) as execute:
            rows, _ = await execute(sql.format(table=store.sessions_table, m=store.mark), params)
        return rows

    async def load(self) -> list[HistoryItem]:
        rows = await self._run(
            "SELECT item FROM {table} WHERE session = {m} ORDER BY seq", self.name
        )
        return [load_item(json.loads(row[0])) for row in rows]

    async def append(self, items: Sequence[HistoryItem]) -> None:
        if not items:
            return
        bodies = [dumps(dump_item(item)) for item in items]  # before the lock is taken
        store, m = self.store, self.store.mark
        async with store.connection(transaction=True) as execute:
            if store.session_lock:
                await execute(store.session_lock, [self.name])
            sql = f"SELECT COALESCE(MAX(seq), 0) FROM {store.sessions_table} WHERE session = {m}"
            rows, _ = await execute(sql, [self.name])
            last = int(rows[0][0])
            values = ", ".join([f"({m}, {m}, {m}, {store.now})"] * len(bodies))
            await execute(
                f"INSERT INTO {store.sessions_table} (session, seq, item, created) VALUES {values}",
                [v for i, body in enumerate(bodies, last + 1) for v in (self.name, i, body)],
            )

    async def clear(self) -> None:
        await self._run("DELETE FROM {table} WHERE session = {m}", self.name, transaction=True)

    def __repr__(self) -> str:
        return f"SQLSession({self.name!r}, {self.store!r})"
