"""Durable state (docs/sessions.md): :class:`Session` backends for a conversation's history,
:class:`RunStore` for runs that ``agent.resume(run_id)`` finishes after a crash, and
:func:`open_store`, the store a target names by URI scheme (a path: SQLite).
"""

from __future__ import annotations

from .backends import STORE_ENV, open_store, register_store
from .codec import RunBusy, StoreError
from .postgres import PostgresRunStore  # registers postgresql:// (psycopg: on use)
from .runs import RunJournal, RunStore, SQLiteRunStore
from .session import MemorySession, Session
from .sqlite import SQLiteDB, default_path

__all__ = [
    "STORE_ENV",
    "MemorySession",
    "PostgresRunStore",
    "RunBusy",
    "RunJournal",
    "RunStore",
    "SQLiteDB",
    "SQLiteRunStore",
    "Session",
    "StoreError",
    "default_path",
    "open_store",
    "register_store",
]
