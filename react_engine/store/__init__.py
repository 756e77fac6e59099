"""Durable state: sessions that outlive the process, runs that resume after a crash.

* :class:`Session` and its backends (:class:`SQLiteSession`, the embedded default;
  :class:`~react_engine.store.postgres.PostgresSession` with the ``postgres`` extra;
  :class:`MemorySession`): a conversation's history, taken by ``session=``.
* :class:`RunStore`: each run's steps committed as they complete, so that
  ``agent.resume(run_id)`` finishes a run whose process died, and an approval can wait.

What is stored is the protocol-neutral history as versioned JSON
(:mod:`react_engine.store.codec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .codec import StoreError
from .runs import RunStore
from .session import MemorySession, Session, SQLiteSession
from .sqlite import STORE_ENV, SQLiteDB, default_path

if TYPE_CHECKING:
    from .postgres import PostgresSession

__all__ = [
    "STORE_ENV",
    "MemorySession",
    "PostgresSession",
    "RunStore",
    "SQLiteDB",
    "SQLiteSession",
    "Session",
    "StoreError",
    "default_path",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresSession":  # psycopg is an extra: imported on first use
        from .postgres import PostgresSession

        return PostgresSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
