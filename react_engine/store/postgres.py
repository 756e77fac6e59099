"""Sessions in PostgreSQL, through ``psycopg`` 3 (async): ``pip install
'react-engine[postgres]'``.

For app servers on several machines sharing their users' conversations. An append is one
transaction that first takes a transaction-scoped advisory lock on the session's name, then
numbers its items after the session's last: two writers on one session take turns, and a
batch is never interleaved with another's. Items are stored as the same versioned JSON as
in SQLite (:mod:`react_engine.store.codec`), in a ``text`` column (``jsonb`` would refuse a
NUL character that a tool's output may hold).

Each operation takes a connection for itself: from ``pool`` when one is given (a
``psycopg_pool.AsyncConnectionPool``, what an app server should pass), else a new one from
``conninfo``, closed when the operation ends. A connection belongs to one event loop, and
``Agent.run`` runs each call on a loop of its own, so a session keeps none between
operations.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..types import HistoryItem
from .codec import dump_item, dumps, load_item
from .session import Session

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresSession"]

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
        self._ready = False

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self.pool is not None:
            async with self.pool.connection() as conn:
                await self._schema(conn)
                yield conn
            return
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigurationError(
                "PostgresSession needs psycopg 3: pip install 'react-engine[postgres]'"
            ) from exc
        assert self.conninfo is not None
        async with await psycopg.AsyncConnection.connect(self.conninfo) as conn:
            await self._schema(conn)
            yield conn

    async def _schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if self._ready:
            return
        async with conn.transaction():
            # One creator at a time: CREATE TABLE IF NOT EXISTS races with itself.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('react_engine_schema'))")
            await conn.execute(_SCHEMA)
        self._ready = True

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
