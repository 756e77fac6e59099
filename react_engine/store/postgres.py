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
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from .backends import register_store
from .codec import RunBusy, StoreError
from .runs import SQLRunStore, lock_key
from .session import Execute

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresRunStore"]


def _driver(who: str) -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            f"{who} needs psycopg 3: pip install 'react-engine[postgres]'"
        ) from exc
    return psycopg


@contextlib.contextmanager
def failures(store: PostgresRunStore) -> Iterator[None]:
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


_SCHEMA = """
CREATE TABLE IF NOT EXISTS react_engine_session_items (
    session text NOT NULL,
    seq bigint NOT NULL,
    item text NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, seq)
);
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


class PostgresRunStore(SQLRunStore):
    """Runs in a PostgreSQL database (``conninfo``, a libpq connection string or URI, or a
    ``psycopg_pool.AsyncConnectionPool`` as ``pool``), for workers on several machines.

    The lease (:meth:`hold`) is a session-level advisory lock, on a connection the run then
    keeps for its commits; the server drops it with the connection."""

    runs_table = "react_engine_runs"
    entries_table = "react_engine_run_entries"
    sessions_table = "react_engine_session_items"
    mark = "%s"
    now = "now()"
    session_lock = "SELECT pg_advisory_xact_lock(hashtext(%s))"

    def __init__(self, conninfo: str | None = None, *, pool: Any = None) -> None:
        super().__init__()
        if (conninfo is None) == (pool is None):
            raise ConfigurationError("PostgresRunStore takes conninfo or pool (one of them)")
        self.conninfo = conninfo
        self.pool = pool
        self.schema_ready = False
        self._held: dict[str, psycopg.AsyncConnection[Any]] = {}
        self.where = repr(self)

    def __repr__(self) -> str:
        return "PostgresRunStore(pool)" if self.pool is not None else "PostgresRunStore(...)"

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of its own (a pool's is given back in the autocommit mode it had),
        the tables made on first use."""
        psycopg = _driver(type(self).__name__)
        with failures(self):
            async with contextlib.AsyncExitStack() as stack:
                if self.pool is None:
                    connect = psycopg.AsyncConnection.connect
                    conn = await stack.enter_async_context(
                        await connect(self.conninfo, autocommit=True)
                    )
                else:
                    conn = await stack.enter_async_context(self.pool.connection())
                    stack.push_async_callback(_autocommit, conn, conn.autocommit, psycopg.Error)
                    await conn.set_autocommit(True)
                if not self.schema_ready:
                    async with conn.transaction():
                        # One creator at a time: CREATE TABLE IF NOT EXISTS races with itself.
                        await conn.execute(
                            "SELECT pg_advisory_xact_lock(hashtext('react_engine_schema'))"
                        )
                        await conn.execute(_SCHEMA)
                    self.schema_ready = True
                yield conn

    def holds(self, run_id: str) -> bool:
        return run_id in self._held

    @contextlib.asynccontextmanager
    async def connection(
        self, run_id: str | None = None, *, transaction: bool = False
    ) -> AsyncIterator[Execute]:
        async with contextlib.AsyncExitStack() as stack:
            conn = self._held.get(run_id or "")
            if conn is None:
                conn = await stack.enter_async_context(self._connect())
            with failures(self):
                block: Any = conn.transaction() if transaction else contextlib.nullcontext()
                async with block:

                    async def execute(sql: str, params: Sequence[Any]) -> tuple[list[Any], int]:
                        cursor = await conn.execute(sql, params)
                        rows = await cursor.fetchall() if cursor.description else []
                        return rows, cursor.rowcount

                    yield execute

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


async def _autocommit(conn: Any, mode: bool, errors: type[Exception]) -> None:
    if not conn.closed:
        with contextlib.suppress(errors):  # a lost connection
            await conn.set_autocommit(mode)


SCHEMES = ("postgresql", "postgres")
"""The URI schemes of a PostgreSQL store (:func:`~react_engine.store.open_store`)."""
for _scheme in SCHEMES:
    register_store(_scheme, PostgresRunStore)
