"""open_store: one dispatch by URI scheme for run stores and sessions; a libpq key=value
string refused instead of becoming a SQLite file; run/ reaching the store only through the
protocols of run/journal.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from react_engine import Agent
from react_engine.errors import ConfigurationError
from react_engine.store import (
    PostgresRunStore,
    RunStore,
    SQLiteRunStore,
    open_store,
)
from react_engine.store.session import SQLSession
from react_engine.testing import ScriptedModel

CONNINFO = "host=db.internal dbname=app user=app password=hunter2"


def test_a_key_value_connection_string_is_refused_not_made_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for make in (
        lambda: open_store(CONNINFO),
        lambda: Agent("m", client=ScriptedModel([]), store=CONNINFO),
    ):
        with pytest.raises(ConfigurationError, match="postgresql://") as caught:
            make()
        assert "hunter2" not in str(caught.value)
    monkeypatch.setenv("REACT_ENGINE_STORE", CONNINFO)
    with pytest.raises(ConfigurationError, match="postgresql://"):
        open_store()
    assert list(tmp_path.iterdir()) == []


def test_open_store_goes_by_scheme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "runs.db"
    for target in (db, str(db), f"sqlite://{db}"):
        store = open_store(target)
        assert isinstance(store, SQLiteRunStore) and store.db.path == db
    monkeypatch.setenv("REACT_ENGINE_STORE", str(db))
    assert isinstance(open_store(), SQLiteRunStore) and open_store().db.path == db
    for uri in ("postgresql://u@h/d", "postgres://u@h/d", "POSTGRESQL://u@h/d"):
        assert isinstance(open_store(uri), PostgresRunStore)  # psycopg: on first use
    with pytest.raises(ConfigurationError, match=r"nosuch://.*registered: .*postgresql://"):
        open_store("nosuch://x")


def test_a_store_gives_the_sessions_of_its_backend(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    session = store.session("chat")
    assert isinstance(session, SQLSession) and session.store is store
    postgres = open_store("postgresql://u@h/d")
    assert isinstance(postgres.session("chat"), SQLSession)
    assert postgres.session("chat").store is postgres
    asyncio.run(session.append([]))
    assert asyncio.run(session.load()) == []


def test_run_store_is_abstract_and_names_its_contract() -> None:
    with pytest.raises(TypeError):
        RunStore()  # type: ignore[abstract]
    assert RunStore.__abstractmethods__ == {
        "hold",
        "begin",
        "add_many",
        "finish",
        "failed",
        "runs",
        "info",
        "header",
        "result",
        "entries",
    }
