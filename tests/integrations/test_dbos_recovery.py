"""A run on DBOS whose worker process dies by SIGKILL, during a model request or inside a
tool, is finished by a second worker process (DBOS's recovery of the dead executor's
workflows), on a SQLite system database and on a real PostgreSQL.

The loopback model calls ``act(1)``, ``act(2)``, ``act(3)`` and then answers with what it
was shown; ``act`` appends one line per call to a file. Each check: the recovered run's
transcript equals an uninterrupted run's; no model request that had an answer is sent
again (the server counts them); a tool that is not idempotent never runs twice, and a call
of it that was running at the crash is reported to the model as maybe done.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.parts import require_module

require_module("dbos", "the dbos extra", "pip install -e '.[dbos]'")

from integrations.dbos_support import (  # noqa: E402
    effects,
    finish,
    pg_uri,
    start,
    sysdb,
    three_calls,
    three_written_calls,
    without_ids,
)
from react_engine.testing import ScriptedServer  # noqa: E402
from react_engine.wording import Notice, NoticeCode  # noqa: E402

__all__ = ["pg_uri", "sysdb"]  # the fixtures
MAYBE_RAN = Notice(NoticeCode.MAYBE_RAN)  # a call in flight at the crash, not idempotent

pytestmark = pytest.mark.slow  # worker processes killed and recovered

ANSWER = "done 1; done 2; done 3"


class Killer:
    """The model's loopback server, which kills the worker when request ``at`` arrives
    (before it is answered: the worker dies during the request)."""

    def __init__(self, at: int | None = None, script: Any = three_calls) -> None:
        self.at = at
        self.script = script
        self.pid: int | None = None
        self.ready = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.count = getattr(self, "count", 0) + 1
        if self.count == self.at:
            self.ready.wait(30)
            assert self.pid is not None
            os.kill(self.pid, signal.SIGKILL)
        return dict(self.script(body))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An uninterrupted run's transcript (its own server and system database)."""
    plain = tmp_path_factory.mktemp("plain")
    with ScriptedServer(default=three_calls) as server:
        db = f"sqlite:///{plain / 'dbos.db'}"
        code, out = finish(start(db, server.base_url, plain, "run", "plain"))
        assert code == 0 and out is not None and len(server.requests) == 4
    assert out["answer"] == ANSWER
    yield without_ids(out)


def test_the_blocking_run_called_where_an_event_loop_runs_gives_the_same_run(
    tmp_path: Path, baseline: dict[str, Any]
) -> None:
    db = f"sqlite:///{tmp_path / 'dbos.db'}"
    with ScriptedServer(default=three_calls) as server:
        code, out = finish(start(db, server.base_url, tmp_path, "run", "b", "--blocking"))
        assert code == 0 and out is not None and len(server.requests) == 4
    assert without_ids(out) == baseline
    assert effects(tmp_path) == {"b:1": 1, "b:2": 1, "b:3": 1}


@pytest.mark.parametrize("at", [2, 4])
def test_killed_during_a_model_request_the_run_is_finished_by_another_worker(
    tmp_path: Path, sysdb: str, baseline: dict[str, Any], at: int
) -> None:
    killer = Killer(at)
    with ScriptedServer(default=killer) as server:
        proc = start(sysdb, server.base_url, tmp_path, "run", "r")
        killer.pid = proc.pid
        killer.ready.set()
        code, _ = finish(proc)
        assert code == -9 and len(server.requests) == at
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "r"))
        assert code == 0 and out is not None
        # The request that died unanswered is sent again, and no other one.
        assert len(server.requests) == 5
        assert server.requests[at] == server.requests[at - 1]
    assert without_ids(out) == baseline
    assert effects(tmp_path) == {"r:1": 1, "r:2": 1, "r:3": 1}


def test_killed_inside_a_tool_that_is_not_idempotent_the_call_is_not_run_again(
    tmp_path: Path, sysdb: str, baseline: dict[str, Any]
) -> None:
    with ScriptedServer(default=three_calls) as server:
        code, _ = finish(start(sysdb, server.base_url, tmp_path, "run", "r", "--kill-in-tool", "2"))
        assert code == -9 and effects(tmp_path) == {"r:1": 1, "r:2": 1}
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "r"))
        assert code == 0 and out is not None
        assert len(server.requests) == 4  # every reply was recorded: none asked for again
    assert effects(tmp_path) == {"r:1": 1, "r:2": 1, "r:3": 1}  # act(2) ran once
    maybe = f"Error: {MAYBE_RAN}"
    assert out["steps"][1]["actions"][0][3:] == ["error", maybe]
    expected = without_ids(out)
    expected["steps"][1]["actions"][0][2:] = ["ok", "done 2"]
    expected["answer"] = expected["steps"][3]["text"] = expected["steps"][3]["final_answer"] = (
        ANSWER
    )
    assert expected == baseline  # the rest as in the uninterrupted run


def test_killed_inside_an_idempotent_tool_the_call_runs_again(
    tmp_path: Path, sysdb: str, baseline: dict[str, Any]
) -> None:
    with ScriptedServer(default=three_calls) as server:
        args = ("--idempotent",)
        code, _ = finish(
            start(sysdb, server.base_url, tmp_path, "run", "r", "--kill-in-tool", "3", *args)
        )
        assert code == -9
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "r", *args))
        assert code == 0 and out is not None
        assert len(server.requests) == 4
    assert effects(tmp_path) == {"r:1": 1, "r:2": 1, "r:3": 2}  # only the interrupted one again
    assert without_ids(out) == baseline


def typed_in_a_session(body: dict[str, Any]) -> dict[str, Any]:
    """``act(1..3)`` for the question "go", then the typed answer (``final_result``); for
    any other question, the plain answer with no call."""
    from react_engine.testing import completion, tool_calls_completion

    questions = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if questions[-1] != "go":
        return completion("noted")
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if len(results) < 3:
        return tool_calls_completion(("act", {"n": len(results) + 1}))
    return tool_calls_completion(("final_result", {"summary": "; ".join(results)}))


def test_a_typed_run_in_a_session_killed_during_its_last_request_gives_its_output(
    tmp_path: Path,
) -> None:
    from react_engine.store import open_store
    from react_engine.types import UserTurn

    sysdb = f"sqlite:///{tmp_path / 'dbos.db'}"
    session = ("--session", "s", "--sessions", str(tmp_path / "sessions.db"))
    killer = Killer(5, typed_in_a_session)  # the 2nd run's last request: the typed answer
    with ScriptedServer(default=killer) as server:
        first = start(
            sysdb, server.base_url, tmp_path, "run", "t1", "--question", "hello", *session
        )
        code, out = finish(first)
        assert code == 0 and out is not None and out["answer"] == "noted"
        proc = start(sysdb, server.base_url, tmp_path, "run", "t2", "--typed", *session)
        killer.pid = proc.pid
        killer.ready.set()
        assert finish(proc) == (-9, None)
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "t2", *session))
        assert code == 0 and out is not None
        assert len(server.requests) == 6 and server.requests[5] == server.requests[4]
        assert server.requests[1]["messages"][1:3] == [  # the session's earlier turn
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "noted"},
        ]
    assert out["output"] == {"summary": ANSWER}
    assert effects(tmp_path) == {"t2:1": 1, "t2:2": 1, "t2:3": 1}
    history = asyncio.run(open_store(tmp_path / "sessions.db").session("s").load())
    assert [i.content for i in history if isinstance(i, UserTurn)] == ["hello", "go"]  # once each


def test_a_text_protocol_run_killed_inside_a_tool_does_not_run_the_call_again(
    tmp_path: Path,
) -> None:
    """Calls written as text: the recovered run knows the one that was running by its
    place in the reply (the ids of written calls are made up: test_dbos_approval.py)."""
    sysdb = f"sqlite:///{tmp_path / 'dbos.db'}"
    text = ("--protocol", "text")
    with ScriptedServer(default=three_written_calls) as server:
        code, _ = finish(
            start(sysdb, server.base_url, tmp_path, "run", "w", "--kill-in-tool", "2", *text)
        )
        assert code == -9
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "w", *text))
        assert code == 0 and out is not None
        assert len(server.requests) == 4
    assert effects(tmp_path) == {"w:1": 1, "w:2": 1, "w:3": 1}
    calls = [s["actions"][0] for s in out["steps"][:3]]
    assert [c[3:] for c in calls] == [
        ["ok", "done 1"],
        ["error", f"Error: {MAYBE_RAN}"],
        ["ok", "done 3"],
    ]
    assert len({c[0] for c in calls}) == 3 and out["answer"] == "3 calls made"


def test_a_recovered_run_reads_the_timeouts_and_errors_its_tools_gave(tmp_path: Path) -> None:
    """A call that overran its timeout and one that raised are recorded as such: the
    recovered run's model is shown what the first execution's was, word for word."""
    sysdb = f"sqlite:///{tmp_path / 'dbos.db'}"
    faults = ("--slow-in-tool", "1", "--fail-in-tool", "2", "--idempotent")
    with ScriptedServer(default=three_calls) as server:
        code, plain = finish(start(sysdb, server.base_url, tmp_path, "run", "p", *faults))
        assert code == 0 and plain is not None
        args = (*faults, "--kill-in-tool", "3")
        code, _ = finish(start(sysdb, server.base_url, tmp_path, "run", "r", *args))
        assert code == -9
        code, out = finish(start(sysdb, server.base_url, tmp_path, "recover", "r", *faults))
        assert code == 0 and out is not None
    calls = [s["actions"][0][3:] for s in plain["steps"][:2]]
    assert calls[0][0] == "timeout" and calls[1] == [
        "error",
        "Error: act failed: ValueError: no luck with 2",
    ]
    assert without_ids(out) == without_ids(plain)
    assert effects(tmp_path) == {"p:1": 1, "p:2": 1, "p:3": 1, "r:1": 1, "r:2": 1, "r:3": 2}
