"""A PostgreSQL store (a real server: tests/support/postgres.py) fails typed, and takes any
text: a lone surrogate or a NUL in the question (which ``text`` refuses) is stored and read
back exactly; a connection lost in the middle of a run is a :class:`StoreError` carrying
the run so far, never a raw ``psycopg`` error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import postgres

from react_engine import Agent, StoreError
from react_engine.store import open_store
from react_engine.testing import ScriptedModel, reply, tool_call_reply
from react_engine.types import Step, UserTurn

pytestmark = pytest.mark.slow  # a real PostgreSQL server

pg_uri = postgres.pg_uri  # the fixture: one server for the module

SURROGATES = "is \ud800 lone, \udfff too?"
NUL = "is \x00 a NUL?"
ESCAPED = {SURROGATES: "is \\ud800 lone, \\udfff too?", NUL: "is \\x00 a NUL?"}
"""Each question, as the listing's column keeps it."""


def wait(coro: Any) -> Any:
    return asyncio.run(coro)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize("question", [SURROGATES, NUL], ids=["surrogates", "nul"])
def test_a_lone_surrogate_and_a_nul_are_stored_and_resumed_exactly(
    pg_uri: str, question: str
) -> None:
    db = postgres.fresh_database(pg_uri)
    model = ScriptedModel([tool_call_reply(("add", {"a": 1, "b": 2})), reply(f"3 {question}")])
    bot = Agent(client=model, protocol="function_calling", store=db, model="m", tools=[add])
    result = bot.run(question)
    assert result.answer == f"3 {question}" and result.run_id is not None
    store = open_store(db)
    assert wait(store.question(result.run_id)) == question
    assert wait(store.info(result.run_id)).question == ESCAPED[question]
    resumed = bot.resume(result.run_id)  # replayed from the store: nothing asked again
    assert resumed.question == question and resumed.answer == f"3 {question}"
    assert len(model.requests) == 2

    session = store.session("odd")
    talk = Agent(client=ScriptedModel(["Final Answer: \ud800\x00"]), protocol="text", model="m")
    assert talk.run(question, session=session).answer == "\ud800\x00"
    first, final = wait(session.load())
    assert isinstance(first, UserTurn) and first.content == question
    assert isinstance(final, Step) and final.final_answer == "\ud800\x00"


def test_a_connection_lost_in_a_run_raises_store_error_with_the_run_so_far(pg_uri: str) -> None:
    import psycopg

    db = postgres.fresh_database(pg_uri)

    def cut() -> str:
        """Cut the store's connections."""
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        return "cut"  # its record cannot be committed: the run's connection is gone

    bot = Agent(
        client=ScriptedModel([tool_call_reply(("cut", {})), reply("done")]),
        protocol="function_calling",
        store=db,
        model="m",
        tools=[cut],
    )
    with pytest.raises(StoreError, match="the connection failed or was lost") as raised:
        bot.run("Cut it")
    result = raised.value.result
    assert result is not None and result.question == "Cut it" and result.answer is None
    assert result.run_id is not None
    assert raised.value.location is not None and "PostgreSQL database" in raised.value.location
    assert wait(open_store(db).info(result.run_id)).status == "running"  # as after a crash
