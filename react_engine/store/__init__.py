"""Durable state: sessions that outlive the process, runs that resume after a crash.

* :class:`Session` and its backends (:class:`SQLiteSession`, the embedded default;
  :class:`~react_engine.store.postgres.PostgresSession` with the ``postgres`` extra;
  :class:`MemorySession`): a conversation's history, taken by ``session=``.
* :class:`RunStore`: each run's steps committed as they complete, so that
  ``agent.resume(run_id)`` finishes a run whose process died, and an approval can wait.
* :func:`open_store`: the store a target names, by URI scheme (:func:`register_store`):
  ``open_store(path)`` is a :class:`SQLiteRunStore`, ``open_store("postgresql://...")`` a
  :class:`~react_engine.store.postgres.PostgresRunStore`; ``.session(name)`` a session in it.

What is stored is the protocol-neutral history as versioned JSON
(:mod:`react_engine.store.codec`).
"""

from __future__ import annotations

from .backends import open_store, register_store
from .codec import RunBusy, StoreError
from .postgres import PostgresRunStore, PostgresSession  # registers postgresql:// (psycopg: on use)
from .runs import RunJournal, RunStore, SQLiteRunStore
from .session import MemorySession, Session, SQLiteSession
from .sqlite import STORE_ENV, SQLiteDB, default_path

__all__ = [
    "STORE_ENV",
    "MemorySession",
    "PostgresRunStore",
    "PostgresSession",
    "RunBusy",
    "RunJournal",
    "RunStore",
    "SQLiteDB",
    "SQLiteRunStore",
    "SQLiteSession",
    "Session",
    "StoreError",
    "default_path",
    "open_store",
    "register_store",
]
