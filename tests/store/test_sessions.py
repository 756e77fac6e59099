"""Sessions: a conversation's history in a SQLite file, shared by processes.

The concurrency test: two OS processes append 500 items
each to one session at the same time; every item is there once, each writer's in its own
order, 1,000 in all.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from react_engine import Agent, ToolAnnotations, tool
from react_engine.errors import ConfigurationError
from react_engine.store import MemorySession, StoreError, open_store
from react_engine.store.codec import dump_item, load_item
from react_engine.testing import ScriptedModel, ScriptExhausted, reply, tool_call_reply
from react_engine.types import Step, UserTurn
from react_engine.wording import Notice, NoticeCode

ODD = Notice(NoticeCode.USAGE_INVALID, counts="completion_tokens='x'")

APPENDS = 500


@tool(annotations=ToolAnnotations(read_only=True))  # two in one reply both run
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _writer(path: str, writer: str, start: multiprocessing.synchronize.Event) -> None:
    session = open_store(path).session("shared")
    start.wait(10)
    for i in range(APPENDS):
        asyncio.run(session.append([UserTurn(f"{writer}-{i}")]))


@pytest.mark.slow  # two child processes
def test_two_processes_append_500_each_to_one_sqlite_session(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers = [ctx.Process(target=_writer, args=(path, name, start)) for name in "ab"]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    items = asyncio.run(open_store(path).session("shared").load())
    texts = [i.content for i in items if isinstance(i, UserTurn)]
    assert len(texts) == 2 * APPENDS
    assert len(set(texts)) == 2 * APPENDS  # none lost, none written twice
    for writer in "ab":
        mine = [int(t.split("-")[1]) for t in texts if t.startswith(writer)]
        assert mine == list(range(APPENDS))  # each writer's order kept
    switches = sum(1 for x, y in itertools.pairwise(texts) if x[0] != y[0])
    assert switches > 0  # they did run at the same time (not one after the other)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_batch_is_never_interleaved(tmp_path: Path) -> None:
    session = open_store(tmp_path / "s.db").session("s")
    asyncio.run(session.append([UserTurn("1"), UserTurn("2")]))
    other = open_store(tmp_path / "s.db").session("s")
    asyncio.run(other.append([UserTurn("3")]))
    asyncio.run(session.append([UserTurn("4"), UserTurn("5")]))
    assert [i.content for i in asyncio.run(other.load()) if isinstance(i, UserTurn)] == list(
        "12345"
    )
    asyncio.run(other.clear())
    assert asyncio.run(session.load()) == []


def test_a_session_outlives_the_agent_and_continues_under_another_protocol(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    first = Agent(
        "m",
        [add],
        protocol="function_calling",
        client=ScriptedModel(
            [
                tool_call_reply(("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})),
                reply("5 and 2"),
            ]
        ),
    )
    result = first.run("add 2+3 and 1+1", session=open_store(path).session("u1"))
    assert result.answer == "5 and 2"

    # Another process, later: a text-protocol agent sees the earlier turn, with its calls.
    model = ScriptedModel(["Final Answer: it was 5"])
    second = Agent("m", [add], protocol="text", client=model)
    conversation = second.conversation(session=open_store(path).session("u1"))
    assert conversation.ask("what was the first sum?").answer == "it was 5"
    prompt = "\n".join(m.content or "" for m in model.requests[0].messages)
    assert "add 2+3 and 1+1" in prompt and "Observation" in prompt and "5" in prompt
    stored = asyncio.run(open_store(path).session("u1").load())
    assert [type(i).__name__ for i in stored] == ["UserTurn", "Step", "Step", "UserTurn", "Step"]
    step = stored[1]
    assert isinstance(step, Step) and [a.observation for a in step.actions] == ["5", "2"]
    assert len(conversation.history) == 5


def test_a_failed_run_keeps_its_turn_in_the_session(tmp_path: Path) -> None:
    session = open_store(tmp_path / "s.db").session("s")
    agent = Agent("m", [add], client=ScriptedModel([tool_call_reply(("add", {"a": 1, "b": 2}))]))
    with pytest.raises(ScriptExhausted):  # the script runs out after the first step
        agent.run("add", session=session)
    kinds = [type(i).__name__ for i in asyncio.run(session.load())]
    assert kinds[:2] == ["UserTurn", "Step"]


async def test_arun_and_iter_take_a_session() -> None:
    session = MemorySession()
    agent = Agent("m", client=ScriptedModel([reply("one"), reply("two")]))
    await agent.arun("q1", session=session)
    events = [e async for e in agent.iter("q2", session=session)]
    assert events
    contents = [i.content for i in await session.load() if isinstance(i, UserTurn)]
    assert contents == ["q1", "q2"]


def test_run_stream_takes_a_session() -> None:
    session = MemorySession()
    agent = Agent("m", client=ScriptedModel([reply("one")]))
    list(agent.run_stream("q", session=session))
    assert [type(i).__name__ for i in asyncio.run(session.load())] == ["UserTurn", "Step"]


def test_not_a_session_is_refused() -> None:
    agent = Agent("m", client=ScriptedModel([reply("one")]))
    with pytest.raises(ConfigurationError, match="session must be a Session"):
        agent.run("q", session="name")


def test_a_record_from_a_newer_version_is_refused() -> None:
    record = dump_item(UserTurn("hi"))
    assert load_item(record) == UserTurn("hi")
    with pytest.raises(StoreError, match="version"):
        load_item({**record, "v": 99})


def test_records_hold_every_field_of_the_types() -> None:
    """The codec builds its records field by field (for speed): each holds what
    ``to_jsonable`` gives for the type, so a field added to a type is not left out."""
    from react_engine.run.events import RunNotice
    from react_engine.store.codec import dump_record, dump_reply, dumps, load_record, load_reply
    from react_engine.types import ActionRecord, ModelResponse, ToolCall, Usage, to_jsonable

    usage = Usage(1, 2, 3, 4, 5)
    record = ActionRecord(
        "c1", "act", {"n": [1, {"x": None}]}, '{"n": 1}', "done", "error",
        Notice(NoticeCode.TOOL_FAILED, tool="act", error="e"), 0.5, True,
        ["r"], ["l"],
    )  # fmt: skip
    reply = ModelResponse("hi", [ToolCall("c1", "act", "{}")], "why", "stop", usage, "m", [ODD])
    step = Step(
        2, "action", "text", "t", "th", "re", [record], None, ["rep"], "fb", usage, 1.0, 2.0,
        3.0, [RunNotice(2, "ev")],
    )  # fmt: skip
    assert dump_record(record) == {**to_jsonable(record), "v": 1}
    assert dump_reply(reply) == {**to_jsonable(reply), "v": 1}
    assert dump_item(step) == {**to_jsonable(step), "v": 1, "type": "step"}
    assert load_record(dump_record(record)).arguments == record.arguments
    assert load_reply(dump_reply(reply)) == reply
    assert load_record(json.loads(json.dumps(dump_record(record)))).error == record.error
    # A value JSON cannot take as it is is cut, as in a trace, never an error.
    deep: dict[str, object] = {}
    node = deep
    for _ in range(5000):
        node["a"] = node = {}
    deep_record = ActionRecord("c2", "act", deep, "{}")
    assert '"<cut: nested too deep>"' in dumps(dump_record(deep_record))
