"""An approval answers one call: the deferred call of that id awaiting approval when it is
given (its reply, id, tool and arguments), once. A later call reusing the id, even for the
same tool and arguments, gets an id of its own (``call_1-2``) and waits for its own
approval, so that an approval resent blindly raises; a denial does not carry over; an id
that awaits no approval raises; and a run id names one run. Each test runs over a SQLite
file and over a database on a real PostgreSQL server (tests/support/postgres.py), each
resume with a new agent and a new store object, as another process would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from support import postgres

from react_engine import Agent, ModelRequest, ModelResponse, ScriptedModel, tool_call_reply
from react_engine.errors import (
    ConfigurationError,
    RunExistsError,
    UnknownApprovalError,
    UserError,
)
from react_engine.store import open_store
from react_engine.tools import Tool, ToolAnnotations, tool

pg_uri, target = postgres.pg_uri, postgres.target  # the fixtures: each test, on each backend


def rm_call(path: str) -> ModelResponse:
    """A reply calling ``rm(path)`` with the id ``call_1``, as servers that number the
    calls of each reply from 1 give it again and again."""
    return tool_call_reply(("rm", {"path": path}, "call_1"))


def by_turn(*script: ModelResponse | str) -> Callable[[ModelRequest], Any]:
    """The model's reply to a request, by how many replies of its own the request holds:
    the same answers whichever agent (a first run, a resume) sends it."""

    def reply(request: ModelRequest) -> Any:
        return script[sum(1 for m in request.messages if m.role == "assistant")]

    return reply


class Rm:
    """A destructive tool that needs approval, and what it really removed."""

    def __init__(self, *, read_only: bool = False) -> None:
        self.removed: list[str] = []

        @tool(
            requires_approval=True, annotations=ToolAnnotations(read_only=read_only)
        )  # read-only: a reply's calls all run
        def rm(path: str) -> str:
            """Remove a path."""
            self.removed.append(path)
            return f"removed {path}"

        self.tool: Tool = rm


def agent(db: str, rm: Rm, script: Callable[[ModelRequest], Any], **options: Any) -> Agent:
    """An agent of a new store object on ``db`` (a file, or a database), as in a new process."""
    options.setdefault("approve", "defer")
    return Agent("m", [rm.tool], client=ScriptedModel(script), store=open_store(db), **options)


def status(db: str, run_id: str) -> str:
    return asyncio.run(open_store(db).info(run_id)).status


def entries(db: str, run_id: str) -> list[tuple[str, str]]:
    return [(e.kind, e.key) for e in asyncio.run(open_store(db).entries(run_id))]


def test_an_approval_runs_its_call_and_not_a_later_one_reusing_its_id(target: str) -> None:
    rm = Rm()
    script = by_turn(rm_call("/srv/a"), rm_call("/etc"), "done")
    waiting = agent(target, rm, script).run("clean up")
    run_id = waiting.run_id or ""
    assert waiting.stop_reason == "awaiting_approval" and rm.removed == []
    assert [(c.id, c.arguments) for c in waiting.pending] == [("call_1", {"path": "/srv/a"})]

    again = agent(target, rm, script).resume(run_id, approvals={"call_1": True})
    assert rm.removed == ["/srv/a"]  # not "/etc": the later call_1 waits for its own
    assert again.stop_reason == "awaiting_approval" and again.answer is None
    assert [(c.id, c.arguments) for c in again.pending] == [("call_1-2", {"path": "/etc"})]
    assert status(target, run_id) == "awaiting_approval"

    done = agent(target, rm, script).resume(run_id, approvals={"call_1-2": False})
    assert done.answer == "done" and rm.removed == ["/srv/a"]
    assert [(c.arguments, c.status) for c in done.tool_calls] == [
        ({"path": "/srv/a"}, "ok"),
        ({"path": "/etc"}, "denied"),
    ]


def test_an_identical_later_call_waits_for_its_own_approval(target: str) -> None:
    rm = Rm()
    script = by_turn(rm_call("/tmp/x"), rm_call("/tmp/x"), "done")
    waiting = agent(target, rm, script).run("clean up")
    again = agent(target, rm, script).resume(waiting.run_id or "", approvals={"call_1": True})
    assert rm.removed == ["/tmp/x"]  # same id, tool and arguments, but another reply
    assert again.stop_reason == "awaiting_approval"
    assert [(c.id, c.arguments) for c in again.pending] == [("call_1-2", {"path": "/tmp/x"})]


def test_a_denial_does_not_carry_over(target: str) -> None:
    rm = Rm()
    script = by_turn(rm_call("/srv/a"), rm_call("/etc"), "done")
    waiting = agent(target, rm, script).run("clean up")
    again = agent(target, rm, script).resume(waiting.run_id or "", approvals={"call_1": False})
    assert rm.removed == []
    assert [c.status for c in again.tool_calls] == ["denied"]  # /srv/a; /etc is not denied:
    assert again.stop_reason == "awaiting_approval"  # it waits
    assert [(c.id, c.arguments) for c in again.pending] == [("call_1-2", {"path": "/etc"})]


def test_an_approval_resent_blindly_does_not_reach_a_later_call_reusing_its_id(
    target: str,
) -> None:
    """The caller approves ``call_1`` again without reading ``pending``: the model's next
    call, ``rm("/etc")``, came under ``call_1`` too, and must not run on that approval."""
    rm = Rm()
    script = by_turn(rm_call("/srv/a"), rm_call("/etc"), "done")
    run_id = agent(target, rm, script).run("clean up").run_id or ""
    again = agent(target, rm, script).resume(run_id, approvals={"call_1": True})
    assert rm.removed == ["/srv/a"] and again.stop_reason == "awaiting_approval"
    stored = entries(target, run_id)
    with pytest.raises(UnknownApprovalError) as caught:
        agent(target, rm, script).resume(run_id, approvals={"call_1": True})
    assert caught.value.unknown == ("call_1",) and caught.value.pending == ("call_1-2",)
    assert rm.removed == ["/srv/a"] and entries(target, run_id) == stored  # nothing run
    assert status(target, run_id) == "awaiting_approval"
    done = agent(target, rm, script).resume(run_id, approvals={"call_1-2": True})
    assert done.answer == "done" and rm.removed == ["/srv/a", "/etc"]
    assert [c.id for c in done.tool_calls] == ["call_1", "call_1-2"]


def test_resuming_three_times_with_one_approval_runs_the_call_once(target: str) -> None:
    rm = Rm()
    script = by_turn(rm_call("/srv/a"), "done")
    run_id = agent(target, rm, script).run("clean up").run_id or ""
    first = agent(target, rm, script).resume(run_id, approvals={"call_1": True})
    assert first.answer == "done" and rm.removed == ["/srv/a"]
    stored = entries(target, run_id)
    for _ in range(2):
        with pytest.raises(UnknownApprovalError) as caught:
            agent(target, rm, script).resume(run_id, approvals={"call_1": True})
        assert caught.value.unknown == ("call_1",) and caught.value.pending == ()
    assert rm.removed == ["/srv/a"]
    assert entries(target, run_id) == stored  # nothing recorded
    assert agent(target, rm, script).resume(run_id).answer == "done"  # and nothing run
    assert rm.removed == ["/srv/a"]


def test_an_approval_for_a_call_not_awaiting_one_raises(target: str) -> None:
    rm = Rm(read_only=True)
    script = by_turn(tool_call_reply(("rm", {"path": "/a"}), ("rm", {"path": "/b"})), "done")
    run_id = agent(target, rm, script).run("clean up").run_id or ""
    stored = entries(target, run_id)
    with pytest.raises(UnknownApprovalError, match="call_999") as caught:
        agent(target, rm, script).resume(run_id, approvals={"call_1": True, "call_999": True})
    error = caught.value
    assert isinstance(error, UserError) and isinstance(error, ValueError)
    assert error.run_id == run_id and error.unknown == ("call_999",)
    assert error.pending == ("call_1", "call_2")
    assert "'call_1', 'call_2'" in str(error)
    assert rm.removed == [] and entries(target, run_id) == stored  # not even call_1
    for wrong in ({"call_1": "yes"}, ["call_1"]):  # a verdict is True or False, in a mapping
        with pytest.raises(ConfigurationError):
            agent(target, rm, script).resume(run_id, approvals=wrong)  # type: ignore[arg-type]
    assert rm.removed == [] and entries(target, run_id) == stored
    assert status(target, run_id) == "awaiting_approval"
    done = agent(target, rm, script).resume(run_id, approvals={"call_1": True, "call_2": False})
    assert done.answer == "done" and rm.removed == ["/a"]


def test_a_call_left_unanswered_keeps_waiting(target: str) -> None:
    rm = Rm(read_only=True)
    script = by_turn(tool_call_reply(("rm", {"path": "/a"}), ("rm", {"path": "/b"})), "done")
    run_id = agent(target, rm, script).run("clean up").run_id or ""
    # Answered in part, by an agent with no approver: the other call is not denied for it.
    partly = agent(target, rm, script, approve=None).resume(run_id, approvals={"call_2": True})
    assert rm.removed == ["/b"] and partly.stop_reason == "awaiting_approval"
    assert [c.id for c in partly.pending] == ["call_1"]
    assert agent(target, rm, script, approve=None).resume(run_id).pending == partly.pending
    done = agent(target, rm, script).resume(run_id, approvals={"call_1": True})
    assert done.answer == "done" and rm.removed == ["/b", "/a"]


def test_a_new_run_with_a_stored_runs_id_is_refused(target: str) -> None:
    rm = Rm()
    first = agent(target, rm, by_turn("first answer")).run("first question", run_id="r1")
    assert first.answer == "first answer"
    stored = entries(target, "r1")
    with pytest.raises(RunExistsError, match="r1") as caught:
        agent(target, rm, by_turn("second answer")).run("second question", run_id="r1")
    assert isinstance(caught.value, UserError) and isinstance(caught.value, ValueError)
    assert caught.value.run_id == "r1"
    info = asyncio.run(open_store(target).info("r1"))
    assert (info.question, info.status) == ("first question", "final_answer")
    assert entries(target, "r1") == stored  # the two runs' journals are not merged
    assert agent(target, rm, by_turn("unused")).resume("r1").answer == "first answer"
