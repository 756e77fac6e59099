"""Sessions in a real PostgreSQL server (tests/support/postgres.py starts one).

Two OS processes append 500 items each to one session at once: every item is there once,
each writer's in its own order, 1,000 in all.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import uuid
from collections.abc import Iterator

import pytest
from support.postgres import postgres_server

from react_engine import Agent
from react_engine.store import open_store
from react_engine.testing import ScriptedModel, reply, tool_call_reply
from react_engine.types import Step, UserTurn

pytestmark = pytest.mark.slow  # a real PostgreSQL server

APPENDS = 500


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with postgres_server() as uri:
        yield uri


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _writer(dsn: str, name: str, writer: str, start: multiprocessing.synchronize.Event) -> None:
    async def main() -> None:
        session = open_store(dsn).session(name)
        await session.load()  # connected before the start
        start.wait(30)
        for i in range(APPENDS):
            await session.append([UserTurn(f"{writer}-{i}")])

    asyncio.run(main())


def test_two_processes_append_500_each_to_one_postgres_session(dsn: str) -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers = [ctx.Process(target=_writer, args=(dsn, name, w, start)) for w in "ab"]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(180)
        assert w.exitcode == 0

    async def load() -> list[str]:
        session = open_store(dsn).session(name)
        return [i.content for i in await session.load() if isinstance(i, UserTurn)]

    texts = asyncio.run(load())
    assert len(texts) == 2 * APPENDS
    assert len(set(texts)) == 2 * APPENDS
    for writer in "ab":
        mine = [int(t.split("-")[1]) for t in texts if t.startswith(writer)]
        assert mine == list(range(APPENDS))
    assert sum(1 for x, y in itertools.pairwise(texts) if x[0] != y[0]) > 0


def test_a_postgres_session_across_runs_and_protocols(dsn: str) -> None:
    name = f"u-{uuid.uuid4().hex[:8]}"
    first = Agent(
        "m",
        [add],
        protocol="function_calling",
        client=ScriptedModel([tool_call_reply(("add", {"a": 2, "b": 3})), reply("5")]),
    )
    session = open_store(dsn).session(name)
    assert first.run("add 2+3", session=session).answer == "5"  # one loop per run
    model = ScriptedModel(["Final Answer: 5 again"])
    second = Agent("m", [add], protocol="text", client=model)
    assert second.run("again?", session=open_store(dsn).session(name)).answer == "5 again"
    prompt = "\n".join(m.content or "" for m in model.requests[0].messages)
    assert "add 2+3" in prompt and "Observation" in prompt

    async def check() -> None:
        items = await session.load()
        assert [type(i).__name__ for i in items] == ["UserTurn", "Step", "Step"] * 1 + [
            "UserTurn",
            "Step",
        ]
        assert isinstance(items[1], Step) and items[1].actions[0].observation == "5"
        await session.clear()
        assert await session.load() == []

    asyncio.run(check())
