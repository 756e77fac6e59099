"""Resumable runs: a worker process is killed (SIGKILL) at every commit of a 3-call run
and inside a tool; another process resumes the run from the store. Every test runs against
both backends of the run store's contract: a SQLite file, and a database of its own on a
real PostgreSQL server (tests/support/postgres.py).

The model is a loopback server that calls ``act(1)``, ``act(2)``, ``act(3)`` in turn and
then answers with the observations it was shown. Each check: the resumed run ends with
the uninterrupted run's answer; no committed model reply is asked for again (the server
counts requests: exactly 4 per run); no call of the non-idempotent tool runs twice (the
tool writes one line per run to a file); a call that was running at the crash is not run
again and the model is told it may or may not have happened.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support import postgres

from react_engine import Agent
from react_engine.store import open_store
from react_engine.testing import ScriptedServer, completion, tool_calls_completion
from react_engine.wording import Notice, NoticeCode

pytestmark = pytest.mark.slow  # worker processes killed and resumed

WORKER = Path(__file__).parents[1] / "support" / "durable_worker.py"
ANSWER = "done 1; done 2; done 3"
MAYBE_RAN = Notice(NoticeCode.MAYBE_RAN)  # a call in flight at the crash, not idempotent
ENTRIES = 14  # 4 replies, 3 x (started, done), 4 steps
COMMITS = 6  # each call's start (with its reply and the step before) and end; then the result


T = TypeVar("T")
pg_uri, target = postgres.pg_uri, postgres.target  # the fixtures: each test, on each backend


def wait(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def three_calls(body: dict[str, Any]) -> dict[str, Any]:
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if len(results) < 3:
        return tool_calls_completion(("act", {"n": len(results) + 1}))
    return completion("; ".join(results))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=three_calls) as srv:
        yield srv


def worker(tmp: Path, db: str, url: str, *args: str) -> tuple[int, dict[str, Any] | None]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), db, url, str(tmp / "effects"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode not in (0, -9):
        raise AssertionError(proc.stderr)
    out = json.loads(proc.stdout) if proc.returncode == 0 else None
    return proc.returncode, out


def effects(tmp: Path) -> Counter[str]:
    path = tmp / "effects"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def test_an_uninterrupted_run_commits_each_step(
    tmp_path: Path, target: str, server: ScriptedServer
) -> None:
    code, out = worker(tmp_path, target, server.base_url, "run", "r1")
    assert code == 0 and out is not None
    assert out["answer"] == ANSWER and len(server.requests) == 4
    store = open_store(target)
    kinds = [e.kind for e in wait(store.entries("r1"))]
    assert len(kinds) == ENTRIES
    assert kinds[:4] == ["reply", "started", "done", "step"]
    assert wait(store.info("r1")).status == "final_answer"
    assert [s.kind for s in wait(store.steps("r1"))] == ["action"] * 3 + ["final"]


@pytest.mark.parametrize("kill_after", range(1, COMMITS + 1))
def test_killed_after_each_commit_the_run_resumes(
    tmp_path: Path, target: str, server: ScriptedServer, kill_after: int
) -> None:
    code, _ = worker(tmp_path, target, server.base_url, "run", "r", "--kill-after", str(kill_after))
    assert code == -9
    store = open_store(target)
    assert wait(store.info("r")).status == "running"  # the process died mid-run
    last = wait(store.entries("r"))[-1]
    code, out = worker(tmp_path, target, server.base_url, "resume", "r")
    assert code == 0 and out is not None
    assert len(server.requests) == 4  # no committed reply asked for again
    ran = effects(tmp_path)
    assert max(ran.values()) == 1  # no call ran twice
    assert wait(store.info("r")).status == "final_answer"
    if last.kind == "started":  # killed before the tool ran: not run again, the model told
        n = json.loads(last.body["raw_arguments"])["n"]
        assert ran[str(n)] == 0
        assert out["calls"][n - 1] == ["act", "error", f"Error: {MAYBE_RAN}"]
        assert out["answer"] == ANSWER.replace(f"done {n}", f"Error: {MAYBE_RAN}")
    else:
        assert out["answer"] == ANSWER
        assert sorted(ran) == ["1", "2", "3"]


@pytest.mark.parametrize("call", [1, 2, 3])
def test_killed_inside_a_tool_the_call_is_not_run_again(
    tmp_path: Path, target: str, server: ScriptedServer, call: int
) -> None:
    code, _ = worker(tmp_path, target, server.base_url, "run", "r", "--kill-in-tool", str(call))
    assert code == -9
    code, out = worker(tmp_path, target, server.base_url, "resume", "r")
    assert code == 0 and out is not None
    assert effects(tmp_path)[str(call)] == 1  # it had happened; it is not repeated
    assert out["calls"][call - 1][1:] == ["error", f"Error: {MAYBE_RAN}"]
    assert out["answer"] == ANSWER.replace(f"done {call}", f"Error: {MAYBE_RAN}")
    assert len(server.requests) == 4


def test_an_idempotent_tool_killed_inside_is_run_again(
    tmp_path: Path, target: str, server: ScriptedServer
) -> None:
    args = ("--kill-in-tool", "2", "--idempotent")
    code, _ = worker(tmp_path, target, server.base_url, "run", "r", *args)
    assert code == -9
    code, out = worker(tmp_path, target, server.base_url, "resume", "r", "--idempotent")
    assert code == 0 and out is not None
    assert out["answer"] == ANSWER
    assert effects(tmp_path) == Counter({"1": 1, "2": 2, "3": 1})
    assert len(server.requests) == 4


def test_a_finished_run_resumed_sends_no_request(
    tmp_path: Path, target: str, server: ScriptedServer
) -> None:
    store = open_store(target)
    agent = Agent("m", base_url=server.base_url, api_key="k", store=store, protocol="text")
    server.default = None
    server.push(completion("Final Answer: 42"))
    first = agent.run("q")
    assert first.run_id is not None and first.answer == "42"
    again = agent.resume(first.run_id)
    assert again.answer == "42" and len(server.requests) == 1


def test_deferred_approvals_are_given_from_other_processes(
    tmp_path: Path, target: str, server: ScriptedServer
) -> None:
    code, out = worker(tmp_path, target, server.base_url, "run", "r", "--approval")
    verdicts = {1: "yes", 2: "no", 3: "yes"}
    for n in (1, 2, 3):
        assert code == 0 and out is not None
        assert out["stop_reason"] == "awaiting_approval" and len(out["pending"]) == 1
        assert out["answer"] is None
        assert effects(tmp_path)[str(n)] == 0  # not run before it is approved
        store = open_store(target)
        assert wait(store.info("r")).status == "awaiting_approval"
        approve = f"{out['pending'][0]}={verdicts[n]}"
        code, out = worker(
            tmp_path, target, server.base_url, "resume", "r", "--approval", "--approve", approve
        )
    assert code == 0 and out is not None
    assert out["stop_reason"] == "final_answer"
    denied = "Error: the user did not approve this call"
    assert out["answer"] == f"done 1; {denied}; done 3"
    assert [c[1] for c in out["calls"]] == ["ok", "denied", "ok"]
    assert effects(tmp_path) == Counter({"1": 1, "3": 1})
    assert len(server.requests) == 4


def test_a_deferred_approval_without_a_store_is_refused() -> None:
    from react_engine.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs a store"):
        Agent("m", base_url="http://127.0.0.1:1/v1", approve="defer")


def test_an_approval_callback_may_defer(target: str) -> None:
    from react_engine.testing import ScriptedModel, tool_call_reply
    from react_engine.tools import ToolAnnotations, tool

    ran: list[int] = []

    @tool(
        requires_approval=True, annotations=ToolAnnotations(read_only=True)
    )  # read-only: both calls of a reply run
    def act(n: int) -> str:
        """Do step n."""
        ran.append(n)
        return f"done {n}"

    def later(record: Any) -> str:
        return "defer"

    script = [tool_call_reply(("act", {"n": 1}), ("act", {"n": 2})), "ok"]
    store = open_store(target)
    agent = Agent("m", [act], client=ScriptedModel(script), store=store, approve=later)
    waiting = agent.run("go")
    assert waiting.stop_reason == "awaiting_approval" and not ran
    assert [c.id for c in waiting.pending] == ["call_1", "call_2"]
    done = agent.resume(waiting.run_id or "", approvals={"call_1": False, "call_2": True})
    assert done.answer == "ok" and ran == [2]
    assert [c.status for c in done.tool_calls] == ["denied", "ok"]
    # Without a store, a callback's "defer" is a denial: nothing to resume from.
    bare = Agent("m", [act], client=ScriptedModel(script), approve=later)
    result = bare.run("go")
    assert [c.status for c in result.tool_calls] == ["denied", "denied"]
    assert "needs a store" in str(result.tool_calls[0].error or "")


def test_two_workers_resuming_one_run_do_not_both_run_it(
    tmp_path: Path, target: str, server: ScriptedServer
) -> None:
    code, _ = worker(tmp_path, target, server.base_url, "run", "r", "--kill-after", "4")
    assert code == -9  # after call 2's record: call 3 is left
    args = [sys.executable, str(WORKER), target, server.base_url, str(tmp_path / "effects")]
    resumes = [
        subprocess.Popen([*args, "resume", "r", "--slow", "1.5"], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in resumes]
    assert all(p.returncode == 0 for p in resumes)
    busy = [o for o in outs if "busy" in o]
    done = [o for o in outs if "busy" not in o]
    assert len(busy) == 1 and len(done) == 1  # one ran it, the other was refused
    assert done[0]["answer"] == ANSWER
    assert effects(tmp_path) == Counter({"1": 1, "2": 1, "3": 1})
    assert len(server.requests) == 4


def test_a_held_run_is_refused_in_the_same_process(target: str) -> None:
    from react_engine.store import RunBusy
    from react_engine.testing import ScriptedModel, tool_call_reply
    from react_engine.tools import tool

    async def main() -> None:
        entered, release = asyncio.Event(), asyncio.Event()

        @tool
        async def act(n: int) -> str:
            """Do step n."""
            entered.set()
            await release.wait()
            return f"done {n}"

        script = [tool_call_reply(("act", {"n": 1})), "ok"]
        agent = Agent("m", [act], client=ScriptedModel(script), store=open_store(target))
        first = asyncio.create_task(agent.arun("go", run_id="held"))
        await entered.wait()
        for store in (agent.store, open_store(target)):  # the same store, or another one
            other = Agent("m", [act], client=ScriptedModel(script), store=store)
            with pytest.raises(RunBusy, match="held"):
                await other.aresume("held")
            with pytest.raises(RunBusy):
                await other.arun("go", run_id="held")
        release.set()
        assert (await first).answer == "ok"
        again = await agent.aresume("held")  # given back when the run ended
        assert again.answer == "ok"

    asyncio.run(main())


def test_concurrent_calls_commit_their_reply_once(target: str) -> None:
    from react_engine.testing import ScriptedModel, tool_call_reply
    from react_engine.tools import ToolAnnotations, tool

    @tool(
        annotations=ToolAnnotations(read_only=True)
    )  # read-only: the reply's calls run side by side
    async def look(n: int) -> str:
        """Look at n."""
        await asyncio.sleep(0.02)
        return f"seen {n}"

    calls = [("look", {"n": n}, f"c{n}") for n in (1, 2, 3)]
    script = [tool_call_reply(*calls), "ok"]
    store = open_store(target)
    model = ScriptedModel(script)
    result = Agent("m", [look], client=model, store=store).run("go", run_id="side")
    assert result.answer == "ok"
    entries = wait(store.entries("side"))
    assert [e.key for e in entries if e.kind == "reply"] == ["0", "1"]
    assert sorted(e.key for e in entries if e.kind == "started") == ["0:c1", "0:c2", "0:c3"]
    again = Agent("m", [look], client=ScriptedModel([]), store=store).resume("side")
    assert again.answer == "ok"  # replayed whole: no request (the script is empty)
