"""The embedded store: one SQLite file in WAL mode, shared safely by several processes.

Every write is one ``BEGIN IMMEDIATE`` transaction (the file's write lock is taken before
the next sequence number is read), made directly from the event loop: it takes well under
a millisecond. A file that cannot be written is opened for reading. Whatever SQLite or the
system raises leaves as a :class:`StoreError` naming the file and the cause
(:func:`store_error`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..errors import ConfigurationError
from ..paths import state_dir
from .codec import RunBusy, StoreError

if TYPE_CHECKING:
    from .session import Execute

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["SQLiteDB", "default_path", "store_error"]

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


_TIMEOUT = 30.0
"""Seconds a connection waits for another's lock on the file."""
_SHARED: dict[Path, SQLiteDB] = {}
_SHARED_LOCK = threading.RLock()


def default_path() -> Path:
    """``store.db`` in the state directory (:func:`~react_engine.paths.state_dir`:
    ``$XDG_STATE_HOME/react-engine``, the state home defaulting to ``~/.local/state``);
    :func:`~react_engine.store.open_store` reads ``$REACT_ENGINE_STORE`` first."""
    return state_dir() / "store.db"


class SQLiteDB:
    """One SQLite file: a connection per process (made again after a ``fork``), used under
    a lock so that the threads of one process take turns."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = _resolved(path)  # one file is one store, whatever name it is opened by
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        with _SHARED_LOCK:
            self.leases = _LEASES.setdefault(self.path, _Leases(self.path))
            """The runs held in this file (the lease of :meth:`SQLiteRunStore.hold`)."""

    @classmethod
    def shared(cls, path: str | os.PathLike[str] | None = None) -> SQLiteDB:
        """The one :class:`SQLiteDB` of this process for ``path``: sessions and stores
        made per request share its connection instead of opening the file each time."""
        resolved = _resolved(path)
        with _SHARED_LOCK:
            db = _SHARED.get(resolved)
            if db is None:
                db = _SHARED[resolved] = cls(resolved)
            return db

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = self._open(), os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """The file for reading and writing (made, in WAL mode, with its tables, if new);
        for reading only when it, or its directory, cannot be written."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect(f"file:{quote(str(self.path))}")
            try:
                if not _ready(conn):
                    _wal(conn)
                    conn.executescript(_SCHEMA)  # idempotent; a concurrent creator waits
                conn.execute("PRAGMA synchronous=NORMAL")
            except BaseException:
                conn.close()
                raise
            return conn
        except (sqlite3.OperationalError, PermissionError) as exc:
            if not self.path.is_file() or not _denied(exc):
                raise
        # Read-only: the WAL's index (FILE-shm) cannot be made beside a file in a directory
        # nobody may write, and then only the immutable mode reads it (no writer can be).
        for flags in ("", "&immutable=1"):
            conn = self._connect(f"file:{quote(str(self.path))}?mode=ro{flags}")
            try:
                _ready(conn)
                return conn
            except sqlite3.OperationalError:
                conn.close()
                if flags:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _connect(self, uri: str) -> sqlite3.Connection:
        return sqlite3.connect(
            uri, timeout=_TIMEOUT, isolation_level=None, check_same_thread=False, uri=True
        )

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """What SQLite or the system raised, as a :class:`StoreError` naming the file and
        the cause."""
        try:
            yield
        except (sqlite3.Error, OSError, UnicodeError) as exc:
            raise store_error(self.path, exc) from exc

    @contextlib.asynccontextmanager
    async def statements(self, *, transaction: bool = False) -> AsyncIterator[Execute]:
        """Statements on the file; with ``transaction``, in one write transaction (``BEGIN
        IMMEDIATE``), committed when the block ends and rolled back if it raises. They do
        not wait (a write takes microseconds on a local disk): the file's lock is never held
        across an await that yields to the event loop."""
        with self._lock, self._failures():
            conn = self._connection()

            async def execute(sql: str, params: Sequence[Any]) -> tuple[list[Any], int]:
                cursor = conn.execute(sql, params)
                return cursor.fetchall(), cursor.rowcount

            if transaction:
                conn.execute("BEGIN IMMEDIATE")
            try:
                yield execute
                if transaction:
                    conn.execute("COMMIT")
            except BaseException:
                if transaction and conn.in_transaction:  # SQLite ends some failed ones itself
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDB({str(self.path)!r})"


def _resolved(path: str | os.PathLike[str] | None) -> Path:
    named = Path(path) if path is not None else default_path()
    if _CONNINFO.search(named.name):
        raise ConfigurationError(
            "a store target reads as a key=value connection string (host=..., dbname=...), "
            "which would name a SQLite file: for PostgreSQL give a postgresql:// URI "
            "(postgresql://user:password@host:5432/dbname)"  # the target is not repeated
        )
    return named.expanduser().resolve()


_CONNINFO = re.compile(
    r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|sslmode|service"
    r"|connect_timeout|application_name|options)\s*="
)
"""A libpq key=value connection string (``"host=db dbname=app password=..."``): as a file
name, a SQLite file nobody meant, with the password in its name."""


def _ready(conn: sqlite3.Connection) -> bool:
    """Whether the file has the store's tables (a read: "not a database" for a file that is
    not one, or whose header is damaged)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {"session_items", "runs", "run_entries"} <= {row[0] for row in rows}


def _denied(exc: BaseException) -> bool:
    """Whether ``exc`` says the file or its directory cannot be written."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    return isinstance(exc, PermissionError) or name.startswith(
        ("SQLITE_READONLY", "SQLITE_CANTOPEN")
    )


_CAUSES = {  # SQLite's error name (a prefix of the extended one's): the cause
    "SQLITE_NOTADB": "not a SQLite database (a corrupt store, or another kind of file)",
    "SQLITE_CORRUPT": "the file is corrupt or truncated",
    "SQLITE_FULL": "the disk is full",
    "SQLITE_READONLY": "the store is read-only (the file or its directory cannot be written)",
    "SQLITE_CANTOPEN": "the file cannot be opened",
    "SQLITE_IOERR": "an I/O error",
    "SQLITE_BUSY": "another process holds the file's lock",
    "SQLITE_LOCKED": "another process holds the file's lock",
}


def store_error(path: Path, exc: BaseException) -> StoreError:
    """``exc`` (from SQLite or the system) as a :class:`StoreError` naming the file."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    cause = next((c for prefix, c in _CAUSES.items() if name.startswith(prefix)), None)
    if cause is None and isinstance(exc, sqlite3.DatabaseError):
        cause = "the database could not be used"
    if cause is None and isinstance(exc, OSError):
        cause = f"{exc.strerror or type(exc).__name__} ({exc.filename or path})"
    if cause is None:
        cause = type(exc).__name__
    detail = "" if isinstance(exc, OSError) else f" ({exc})"
    return StoreError(f"store {path}: {cause}{detail}", location=str(path))


class _Leases:
    """The runs this process holds in one file: a POSIX lock on byte ``key`` of
    ``FILE-runs.lock`` (dropped when the process dies), and a set, as POSIX locks belong to
    the process. The lock file is never closed: that would drop every lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.held: set[str] = set()
        self._fd: int | None = None
        self._pid = 0

    def _file(self) -> int | None:
        if fcntl is None:
            return None
        if self._fd is None or self._pid != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(f"{self.path}-runs.lock", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise store_error(self.path, exc) from None
            self._pid = os.getpid()
        return self._fd

    @contextlib.contextmanager
    def hold(self, run_id: str, key: int) -> Iterator[None]:
        with self._lock:
            if self._pid not in (0, os.getpid()):
                self.held.clear()  # a forked child holds none of its parent's runs
            if run_id in self.held:
                raise RunBusy(run_id)
            fd = self._file()
            if fd is not None:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key)
                except OSError:
                    raise RunBusy(run_id) from None
            self.held.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self.held.discard(run_id)
                if fd is not None and self._pid == os.getpid():
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, key)


_LEASES: dict[Path, _Leases] = {}


def _wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode, tried again until :data:`_TIMEOUT` while another process opening
    the same new file holds its lock (SQLite answers "locked" at once, busy timeout or not)."""
    deadline = time.monotonic() + _TIMEOUT
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
