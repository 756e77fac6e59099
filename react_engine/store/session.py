"""Sessions: a conversation's history kept outside the process (``session=``).

The history is loaded before a run and what the run added is appended when it ends.
Backends: :class:`SQLiteSession` (the default), :class:`MemorySession` (this process
only) and :class:`~react_engine.store.postgres.PostgresSession`.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from ..types import HistoryItem
from .codec import dump_item, dumps, load_item
from .sqlite import SQLiteDB

__all__ = ["MemorySession", "SQLiteSession", "Session"]


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


class SQLiteSession(Session):
    """A session in a SQLite file: ``path`` (default: ``$REACT_ENGINE_STORE``, else
    ``~/.local/state/react-engine/store.db``), shared with the file's other sessions and
    runs. Items are stored as versioned JSON (:mod:`react_engine.store.codec`), each with a
    sequence number that an append takes inside its write transaction."""

    def __init__(self, name: str, path: str | os.PathLike[str] | SQLiteDB | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a session needs a non-empty name (a str)")
        self.name = name
        self.db = SQLiteDB.shared(path)

    async def load(self) -> list[HistoryItem]:
        return self.load_sync()

    async def append(self, items: Sequence[HistoryItem]) -> None:
        self.append_sync(items)

    async def clear(self) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM session_items WHERE session = ?", (self.name,))

    # The same, for code without an event loop (the CLI, a script).

    def load_sync(self) -> list[HistoryItem]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT item FROM session_items WHERE session = ? ORDER BY seq", (self.name,)
            ).fetchall()
        return [load_item(json.loads(row[0])) for row in rows]

    def append_sync(self, items: Sequence[HistoryItem]) -> None:
        if not items:
            return
        bodies = [dumps(dump_item(item)) for item in items]  # before the lock is taken
        now = time.time()
        with self.db.write() as conn:
            (last,) = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM session_items WHERE session = ?", (self.name,)
            ).fetchone()
            conn.executemany(
                "INSERT INTO session_items (session, seq, item, created) VALUES (?, ?, ?, ?)",
                [(self.name, last + i, body, now) for i, body in enumerate(bodies, 1)],
            )

    def __repr__(self) -> str:
        return f"SQLiteSession({self.name!r}, path={str(self.db.path)!r})"
