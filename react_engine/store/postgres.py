"""Sessions and runs in PostgreSQL, through ``psycopg`` 3 (async): ``pip install
'react-engine[postgres]'``.

A session append is one transaction under an advisory lock on the session's name, so two
writers take turns. Items are versioned JSON (:mod:`react_engine.store.codec`) in a
``text`` column (``jsonb`` refuses NUL). Each operation takes its own connection, from
``pool`` or ``conninfo``. What ``psycopg`` raises leaves as a :class:`StoreError` naming
the database, never the password (:func:`failures`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, RunExistsError
from ..types import HistoryItem, RunResult
from .backends import register_store, store_scheme
from .codec import RunBusy, StoreError, dump_item, dumps, load_item, storable
from .runs import (
    Entries,
    Entry,
    RunInfo,
    RunStore,
    entries_insert,
    error_json,
    header_json,
    lock_key,
    on_conflict,
    result_json,
    rows_of,
)
from .session import Session
from .sqlite import STORE_ENV

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresRunStore", "PostgresSession"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS react_engine_session_items (
    session text NOT NULL,
    seq bigint NOT NULL,
    item text NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, seq)
)
"""


class PostgresSession(Session):
    """A session in a PostgreSQL database: ``conninfo`` is a libpq connection string or
    URI (``postgresql://user@host/db``)."""

    def __init__(self, name: str, conninfo: str | None = None, *, pool: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a session needs a non-empty name (a str)")
        if (conninfo is None) == (pool is None):
            raise ConfigurationError("PostgresSession takes conninfo or pool (one of them)")
        self.name = name
        self.conninfo = conninfo
        self.pool = pool
        self.schema_ready = False

    def _connection(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        return _connect(self, _SCHEMA, autocommit=False)

    async def load(self) -> list[HistoryItem]:
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT item FROM react_engine_session_items WHERE session = %s ORDER BY seq",
                (self.name,),
            )
            rows = await cur.fetchall()
        return [load_item(json.loads(row[0])) for row in rows]

    async def append(self, items: Sequence[HistoryItem]) -> None:
        if not items:
            return
        bodies = [dumps(dump_item(item)) for item in items]
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.name,))
            cur = await conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM react_engine_session_items WHERE session = %s",
                (self.name,),
            )
            row = await cur.fetchone()
            last = int(row[0]) if row else 0
            async with conn.cursor() as batch:
                await batch.executemany(
                    "INSERT INTO react_engine_session_items (session, seq, item) "
                    "VALUES (%s, %s, %s)",
                    [(self.name, last + i, body) for i, body in enumerate(bodies, 1)],
                )

    async def clear(self) -> None:
        async with self._connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM react_engine_session_items WHERE session = %s", (self.name,)
            )

    def __repr__(self) -> str:
        return f"PostgresSession({self.name!r})"


def _driver(who: str) -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            f"{who} needs psycopg 3: pip install 'react-engine[postgres]'"
        ) from exc
    return psycopg


@contextlib.asynccontextmanager
async def _connect(
    owner: PostgresSession | PostgresRunStore, schema: str, *, autocommit: bool
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection of its own, with ``schema`` made once (a pool's connection is given
    back in the autocommit mode it had)."""
    psycopg = _driver(type(owner).__name__)
    with failures(owner):
        if owner.pool is None:
            assert owner.conninfo is not None
            connect = psycopg.AsyncConnection.connect
            async with await connect(owner.conninfo, autocommit=autocommit) as conn:
                await _schema(owner, conn, schema)
                yield conn
            return
        async with owner.pool.connection() as conn:
            before = conn.autocommit
            await conn.set_autocommit(autocommit)
            try:
                await _schema(owner, conn, schema)
                yield conn
            finally:
                if not conn.closed:
                    with contextlib.suppress(psycopg.Error):  # a lost connection
                        await conn.set_autocommit(before)


async def _schema(
    owner: PostgresSession | PostgresRunStore, conn: psycopg.AsyncConnection[Any], schema: str
) -> None:
    if owner.schema_ready:
        return
    async with conn.transaction():
        # One creator at a time: CREATE TABLE IF NOT EXISTS races with itself.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('react_engine_schema'))")
        await conn.execute(schema)
    owner.schema_ready = True


@contextlib.contextmanager
def failures(store: PostgresSession | PostgresRunStore) -> Iterator[None]:
    """What ``psycopg`` raised (a connection refused or lost, a value the server refused),
    as a :class:`StoreError` naming the database (never its password) and the cause."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError):
            cause = "the connection failed or was lost"
        elif isinstance(exc, psycopg.DataError):
            cause = "the server refused a value"
        else:
            cause = type(exc).__name__
        where, secret = _where(store.conninfo)
        detail = " ".join(str(exc).split())[:300]
        if secret is None:  # echoed in the error, perhaps with its password: not a word of it
            cause, detail = "its connection string cannot be read", ""
        elif secret and secret in detail:
            detail = detail.replace(secret, "***")
        detail = f" ({detail})" if detail else ""
        raise StoreError(f"store {where}: {cause}{detail}", location=where) from None


def _where(conninfo: str | None) -> tuple[str, str | None]:
    """The database a connection string names, without its credentials; and its password
    ("" for none; None when the string cannot be read)."""
    if conninfo is None:
        return "PostgreSQL (a pool)", ""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(conninfo)
    except Exception:
        return "PostgreSQL", None
    where = (
        f"PostgreSQL database {parts.get('dbname', '?')!s} on {parts.get('host', 'localhost')!s}"
    )
    return where, str(parts.get("password") or "")


_RUN_SCHEMA = """
CREATE TABLE IF NOT EXISTS react_engine_runs (
    id text PRIMARY KEY,
    status text NOT NULL,
    question text NOT NULL,
    model text NOT NULL,
    protocol text NOT NULL,
    header text NOT NULL,
    result text,
    created double precision NOT NULL,
    updated double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS react_engine_run_entries (
    run text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    body text NOT NULL,
    created double precision NOT NULL,
    PRIMARY KEY (run, seq)
)
"""

_INFO = "SELECT id, status, question, model, protocol, created, updated FROM react_engine_runs"


class PostgresRunStore(RunStore):
    """Runs in a PostgreSQL database (``conninfo``, a libpq connection string or URI, or a
    ``psycopg_pool.AsyncConnectionPool`` as ``pool``), for workers on several machines.

    The lease (:meth:`hold`) is a session-level advisory lock, on a connection the run then
    keeps for its commits (one statement each); the server drops it with the connection."""

    def __init__(self, conninfo: str | None = None, *, pool: Any = None) -> None:
        if (
            conninfo is None
            and pool is None
            and store_scheme(named := os.environ.get(STORE_ENV, "").strip()) in SCHEMES
        ):
            conninfo = named
        if (conninfo is None) == (pool is None):
            raise ConfigurationError("PostgresRunStore takes conninfo or pool (one of them)")
        self.conninfo = conninfo
        self.pool = pool
        self.schema_ready = False
        self._held: dict[str, psycopg.AsyncConnection[Any]] = {}
        self._seq: dict[str, int] = {}

    def __repr__(self) -> str:
        return "PostgresRunStore(pool)" if self.pool is not None else "PostgresRunStore(...)"

    def session(self, name: str) -> PostgresSession:
        return PostgresSession(name, self.conninfo, pool=self.pool)

    def _connect(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        return _connect(self, _RUN_SCHEMA, autocommit=True)

    @contextlib.asynccontextmanager
    async def _connection(
        self, run_id: str | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The held run's connection, else one of its own."""
        held = self._held.get(run_id) if run_id is not None else None
        if held is not None:
            with failures(self):
                yield held
            return
        async with self._connect() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        if run_id in self._held:
            raise RunBusy(run_id)
        key = lock_key(run_id)
        async with self._connect() as conn:
            with failures(self):
                cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                row = await cur.fetchone()
            if not (row and row[0]) or run_id in self._held:
                raise RunBusy(run_id)
            self._held[run_id] = conn
            try:
                yield
            finally:
                del self._held[run_id]
                self._seq.pop(run_id, None)
                if not conn.closed:  # a pooled connection must not keep the lock
                    # (a lost one keeps none: the server dropped it with the connection)
                    with contextlib.suppress(_driver("PostgresRunStore").Error):
                        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    async def begin(
        self,
        run_id: str,
        *,
        question: str,
        model: str,
        protocol: str,
        history: Sequence[HistoryItem],
        new: bool = True,
    ) -> None:
        now = time.time()
        async with self._connection(run_id) as conn:
            cur = await conn.execute(
                "INSERT INTO react_engine_runs (id, status, question, model, protocol, header, "
                "created, updated) VALUES (%s, 'running', %s, %s, %s, %s, %s, %s) "
                + on_conflict(new),
                (
                    run_id,
                    *map(storable, (question, model, protocol)),
                    header_json(question, history),
                    now,
                    now,
                ),
            )
            if new and cur.rowcount == 0:
                raise RunExistsError(run_id, repr(self))
            if run_id in self._held:
                self._seq[run_id] = await _last(conn, run_id)

    def _numbered(
        self, run_id: str, rows: list[tuple[str, str, str]], now: float
    ) -> tuple[str, list[Any]] | None:
        """The held run's ``INSERT`` of ``rows`` (numbered at once); None if not held."""
        last = self._seq.get(run_id)
        if last is None:
            return None
        self._seq[run_id] = last + len(rows)
        return entries_insert(_ENTRIES, "%s", run_id, last, rows, now)

    async def _unheld_insert(
        self, conn: psycopg.AsyncConnection[Any], run_id: str, rows: list[tuple[str, str, str]]
    ) -> None:
        last = await _last(conn, run_id)
        await conn.execute(*entries_insert(_ENTRIES, "%s", run_id, last, rows, time.time()))

    async def add_many(self, run_id: str, entries: Entries) -> None:
        rows = rows_of(entries)
        if not rows:
            return
        statement = self._numbered(run_id, rows, time.time())
        async with self._connection(run_id) as conn:
            if statement is not None:
                await conn.execute(*statement)
                return
            async with conn.transaction():
                await self._unheld_insert(conn, run_id, rows)

    async def finish(self, run_id: str, result: RunResult, entries: Entries = ()) -> None:
        await self._end(run_id, result.stop_reason, result_json(result), entries)

    async def failed(self, run_id: str, error: BaseException, entries: Entries = ()) -> None:
        await self._end(run_id, "failed", error_json(error), entries)

    async def _end(self, run_id: str, status: str, record: str, entries: Entries) -> None:
        rows = rows_of(entries)
        now = time.time()
        update = "UPDATE react_engine_runs SET status = %s, result = %s, updated = %s WHERE id = %s"
        statement = self._numbered(run_id, rows, now) if rows else None
        async with self._connection(run_id) as conn:
            if statement is not None:  # one statement: the last entries and the outcome
                sql, params = statement
                await conn.execute(
                    f"WITH added AS ({sql}) {update}", [*params, status, record, now, run_id]
                )
                return
            async with conn.transaction():
                if rows:
                    await self._unheld_insert(conn, run_id, rows)
                await conn.execute(update, (status, record, now, run_id))

    async def runs(self, limit: int = 50) -> list[RunInfo]:
        async with self._connection() as conn:
            cur = await conn.execute(f"{_INFO} ORDER BY updated DESC LIMIT %s", (limit,))
            rows = await cur.fetchall()
        return [RunInfo(*row) for row in rows]

    async def info(self, run_id: str) -> RunInfo:
        async with self._connection(run_id) as conn:
            cur = await conn.execute(f"{_INFO} WHERE id = %s", (run_id,))
            row = await cur.fetchone()
        if row is None:
            raise StoreError(f"no run {run_id!r} in this PostgreSQL store")
        return RunInfo(*row)

    async def _value(self, column: str, run_id: str) -> tuple[Any, ...] | None:
        async with self._connection(run_id) as conn:
            cur = await conn.execute(
                f"SELECT {column} FROM react_engine_runs WHERE id = %s", (run_id,)
            )
            return await cur.fetchone()

    async def header(self, run_id: str) -> str | None:
        row = await self._value("header", run_id)
        return None if row is None else str(row[0])

    async def result(self, run_id: str) -> dict[str, Any] | None:
        row = await self._value("result", run_id)
        return None if row is None or row[0] is None else dict(json.loads(row[0]))

    async def entries(self, run_id: str) -> list[Entry]:
        async with self._connection(run_id) as conn:
            cur = await conn.execute(
                "SELECT kind, key, body FROM react_engine_run_entries WHERE run = %s ORDER BY seq",
                (run_id,),
            )
            rows = await cur.fetchall()
        return [Entry(kind, key, json.loads(body)) for kind, key, body in rows]


_ENTRIES = "react_engine_run_entries"


async def _last(conn: psycopg.AsyncConnection[Any], run_id: str) -> int:
    cur = await conn.execute(
        f"SELECT COALESCE(MAX(seq), 0) FROM {_ENTRIES} WHERE run = %s", (run_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


SCHEMES = ("postgresql", "postgres")
"""The URI schemes of a PostgreSQL store (:func:`~react_engine.store.open_store`)."""
for _scheme in SCHEMES:
    register_store(_scheme, PostgresRunStore)
