"""Durable state: sessions that outlive the process, runs that resume after a crash.

* :class:`Session` and its backends (:class:`SQLiteSession`, the embedded default;
  :class:`~react_engine.store.postgres.PostgresSession` with the ``postgres`` extra;
  :class:`MemorySession`): a conversation's history, taken by ``session=``.
* :class:`RunStore`: each run's steps committed as they complete, so that
  ``agent.resume(run_id)`` finishes a run whose process died, and an approval can wait;
  ``RunStore(path)`` is a :class:`SQLiteRunStore`, ``RunStore("postgresql://...")`` a
  :class:`~react_engine.store.postgres.PostgresRunStore`.

What is stored is the protocol-neutral history as versioned JSON
(:mod:`react_engine.store.codec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .codec import RunBusy, StoreError
from .runs import RunStore, SQLiteRunStore
from .session import MemorySession, Session, SQLiteSession
from .sqlite import STORE_ENV, SQLiteDB, default_path

if TYPE_CHECKING:
    from .postgres import PostgresRunStore, PostgresSession

__all__ = [
    "STORE_ENV",
    "MemorySession",
    "PostgresRunStore",
    "PostgresSession",
    "RunBusy",
    "RunStore",
    "SQLiteDB",
    "SQLiteRunStore",
    "SQLiteSession",
    "Session",
    "StoreError",
    "default_path",
]


def __getattr__(name: str) -> Any:
    if name in ("PostgresSession", "PostgresRunStore"):  # psycopg is an extra: on first use
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
