"""Sessions: a conversation's history kept outside the process (``session=``).

The history is loaded before a run and what the run added is appended when it ends.
Backends: :class:`SQLiteSession` (the default), :class:`MemorySession` (this process
only) and :class:`~react_engine.store.postgres.PostgresSession`.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..types import HistoryItem
from .codec import dump_item, dumps, load_item
from .sqlite import SQLiteDB

__all__ = ["Execute", "MemorySession", "SQLSession", "SQLiteSession", "Session"]


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
    """A session in a SQL store's :attr:`table`, shared with the store's other sessions and
    runs. Items are stored as versioned JSON (:mod:`react_engine.store.codec`), each with a
    sequence number that an append takes inside its transaction. A backend gives its
    placeholder (:attr:`mark`), the time as SQL (:attr:`now`), the lock that makes writers
    of one session take turns (:attr:`lock`) and :meth:`connection`."""

    table = "session_items"
    mark = "?"
    now = "(julianday('now') - 2440587.5) * 86400.0"  # seconds since 1970
    lock = ""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a session needs a non-empty name (a str)")
        self.name = name

    @abstractmethod
    def connection(self, *, transaction: bool = False) -> AbstractAsyncContextManager[Execute]:
        """Statements on the store (in one transaction if ``transaction``)."""

    async def _run(self, sql: str, *params: Any, transaction: bool = False) -> list[Any]:
        async with self.connection(transaction=transaction) as execute:
            rows, _ = await execute(sql.format(table=self.table, m=self.mark), params)
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
        m = self.mark
        async with self.connection(transaction=True) as execute:
            if self.lock:
                await execute(self.lock, [self.name])
            sql = f"SELECT COALESCE(MAX(seq), 0) FROM {self.table} WHERE session = {m}"
            rows, _ = await execute(sql, [self.name])
            last = int(rows[0][0])
            values = ", ".join([f"({m}, {m}, {m}, {self.now})"] * len(bodies))
            await execute(
                f"INSERT INTO {self.table} (session, seq, item, created) VALUES {values}",
                [v for i, body in enumerate(bodies, last + 1) for v in (self.name, i, body)],
            )

    async def clear(self) -> None:
        await self._run("DELETE FROM {table} WHERE session = {m}", self.name, transaction=True)


class SQLiteSession(SQLSession):
    """A session in a SQLite file: ``path`` (default: ``$REACT_ENGINE_STORE``, else
    ``~/.local/state/react-engine/store.db``), shared with the file's other sessions and
    runs."""

    def __init__(self, name: str, path: str | os.PathLike[str] | SQLiteDB | None = None) -> None:
        super().__init__(name)
        self.db = SQLiteDB.shared(path)

    def connection(self, *, transaction: bool = False) -> AbstractAsyncContextManager[Execute]:
        return self.db.statements(transaction=transaction)

    def __repr__(self) -> str:
        return f"SQLiteSession({self.name!r}, path={str(self.db.path)!r})"
