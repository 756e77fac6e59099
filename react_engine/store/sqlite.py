"""The embedded store: one SQLite file (stdlib ``sqlite3``) in WAL mode, shared safely by
several processes on one machine.

Every write is one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock
before reading the next sequence number: two processes appending to one session at once
are serialised by SQLite, so their messages never interleave inside a batch and none is
lost. ``synchronous=NORMAL`` with WAL keeps every committed transaction through a crash of
the process (a power cut may lose the last ones, never corrupt the file).

Calls are made directly from the event loop: a write takes well under a millisecond on a
local disk, less than handing it to a thread would cost. A writer that waits for another
process's lock waits at most ``timeout`` seconds (SQLite's busy timeout).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..paths import state_dir
from .codec import RunBusy

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["STORE_ENV", "SQLiteDB", "default_path"]

STORE_ENV = "REACT_ENGINE_STORE"
"""Environment variable naming the default SQLite file of sessions and runs."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_items (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    item TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    question TEXT NOT NULL,
    model TEXT NOT NULL,
    protocol TEXT NOT NULL,
    header TEXT NOT NULL,
    result TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS run_entries (
    run TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (run, seq)
) WITHOUT ROWID;
"""


_SHARED: dict[Path, SQLiteDB] = {}
_SHARED_LOCK = threading.Lock()


def default_path() -> Path:
    """``$REACT_ENGINE_STORE``, else ``store.db`` in the state directory
    (:func:`~react_engine.paths.state_dir`: ``$XDG_STATE_HOME/react-engine``, the state home
    defaulting to ``~/.local/state``)."""
    named = os.environ.get(STORE_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    return state_dir() / "store.db"


class SQLiteDB:
    """One SQLite file: a connection per process (made again after a ``fork``), used under
    a lock so that the threads of one process take turns."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._held: set[str] = set()
        """The runs this process holds (:meth:`run_lock`)."""
        self._lock_fd: int | None = None
        self._lock_pid = 0

    @classmethod
    def shared(
        cls, path: str | os.PathLike[str] | SQLiteDB | None = None, *, timeout: float = 30.0
    ) -> SQLiteDB:
        """The one :class:`SQLiteDB` of this process for ``path``: sessions and stores
        made per request share its connection instead of opening the file each time."""
        if isinstance(path, SQLiteDB):
            return path
        resolved = (Path(path).expanduser() if path is not None else default_path()).resolve()
        with _SHARED_LOCK:
            db = _SHARED.get(resolved)
            if db is None:
                db = _SHARED[resolved] = cls(resolved, timeout=timeout)
            return db

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            _wal(conn, self.timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)  # idempotent; a concurrent creator waits its turn
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed when the block ends,
        rolled back if it raises."""
        with self._lock:
            conn = self._connection()
            with _immediate(conn):
                yield conn

    def execute(self, sql: str, params: Sequence[Any]) -> None:
        """One statement, in a transaction of its own."""
        with self._lock:
            self._connection().execute(sql, params)

    def _lock_file(self) -> int | None:
        if fcntl is None:
            return None
        if self._lock_fd is None or self._lock_pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(f"{self.path}-runs.lock", os.O_RDWR | os.O_CREAT, 0o644)
            self._lock_pid = os.getpid()
        return self._lock_fd

    @contextlib.contextmanager
    def run_lock(self, run_id: str, key: int) -> Iterator[None]:
        """Hold run ``run_id`` (:class:`RunBusy` if another process or thread of this one
        holds it): a POSIX lock on byte ``key`` of ``FILE-runs.lock``, which the system
        drops when the process dies. POSIX locks belong to the process, so the runs this
        process holds are also kept in a set. The lock file is opened once and never
        closed: closing any descriptor of it would drop every lock of the process."""
        with self._lock:
            if self._lock_pid not in (0, os.getpid()):
                self._held.clear()  # a forked child holds none of its parent's runs
            if run_id in self._held:
                raise RunBusy(run_id)
            fd = self._lock_file()
            if fd is not None:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key)
                except OSError:
                    raise RunBusy(run_id) from None
            self._held.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(run_id)
                if fd is not None and self._lock_pid == os.getpid():
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, key)

    def holds(self, run_id: str) -> bool:
        return run_id in self._held

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads (each statement sees one committed state)."""
        with self._lock:
            yield self._connection()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDB({str(self.path)!r})"


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode. Switching takes the file's lock for a moment, and SQLite
    answers "database is locked" at once, busy timeout or not, when another process opens
    the same new file at the same time: the switch is tried again until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
