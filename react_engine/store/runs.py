"""Resumable runs: each step committed as it completes, and a run replayed from its journal.

With a :class:`RunStore` (``Agent(store=...)``), a run writes, as it goes:

* ``reply``: each model reply, with the ids its calls were given, once the protocol has
  read it and before any of its calls runs;
* ``started``: a call about to run (after its approval), before its tool is invoked;
* ``done``: the call's record (arguments, status, observation) once it has run;
* ``step``: each step of the transcript, written with the next commit (the next reply, or
  the run's result): a run resumes from its replies and calls, so a crash that loses the
  latest step loses nothing it needs, and a step costs no commit of its own;
* ``approval``: a verdict given to :meth:`Agent.resume <react_engine.Agent.resume>`.

:meth:`Agent.resume <react_engine.Agent.resume>` runs the run again from its question
with a :class:`RunJournal` in front of the model and the tools: the loop is deterministic
given the replies, so it takes the same turns, each committed reply served from the
journal (no request), each finished call's record served from it (the tool is not run),
until it reaches the point where the process died, and goes on live from there. A call
that had started and not finished is run again only if its tool says calling it again
changes nothing more (MCP ``idempotentHint``, or read-only); otherwise the model is told it
may or may not have happened. A model reply received but not yet committed when the
process died is asked for again: that request is the only one a crash can repeat.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..types import ActionRecord, HistoryItem, ModelResponse, RunResult, Step
from .codec import (
    VERSION,
    StoreError,
    dump_item,
    dump_record,
    dump_reply,
    dumps,
    load_item,
    load_record,
    load_reply,
)
from .sqlite import SQLiteDB

if TYPE_CHECKING:
    import os

    from ..protocols.base import Decision
    from ..tools.base import Tool

__all__ = ["RunInfo", "RunJournal", "RunStore", "idempotent"]


@dataclass(slots=True, frozen=True)
class RunInfo:
    """One stored run, as ``react-engine runs list`` shows it."""

    id: str
    status: str
    """``running`` (or its process died), ``awaiting_approval``, or the stop reason."""
    question: str
    model: str
    protocol: str
    created: float
    updated: float


@dataclass(slots=True)
class Entry:
    kind: str
    key: str
    body: dict[str, Any]


class RunStore:
    """Runs in a SQLite file (the same file as :class:`~react_engine.store.SQLiteSession`'s
    sessions by default: ``$REACT_ENGINE_STORE``, else
    ``~/.local/state/react-engine/store.db``)."""

    def __init__(self, path: str | os.PathLike[str] | SQLiteDB | None = None) -> None:
        self.db = SQLiteDB.shared(path)

    def __repr__(self) -> str:
        return f"RunStore({str(self.db.path)!r})"

    def begin(
        self,
        run_id: str,
        *,
        question: str,
        model: str,
        protocol: str,
        history: Sequence[HistoryItem],
    ) -> None:
        header = {"v": VERSION, "history": [dump_item(i) for i in history]}
        now = time.time()
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO runs (id, status, question, model, protocol, header, created, "
                "updated) VALUES (?, 'running', ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
                "SET status = 'running', updated = excluded.updated",
                (run_id, question, model, protocol, dumps(header), now, now),
            )

    def add(self, run_id: str, kind: str, key: str, body: Mapping[str, Any]) -> None:
        """Commit one entry of the run's journal."""
        self.add_many(run_id, [(kind, key, body)])

    def add_many(self, run_id: str, entries: Sequence[tuple[str, str, Mapping[str, Any]]]) -> None:
        """Commit entries of the run's journal, in one transaction."""
        rows = [(kind, key, dumps(dict(body))) for kind, key, body in entries]
        now = time.time()
        with self.db.write() as conn:
            self._insert(conn, run_id, rows, now)

    @staticmethod
    def _insert(
        conn: sqlite3.Connection, run_id: str, rows: list[tuple[str, str, str]], now: float
    ) -> None:
        if not rows:
            return
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM run_entries WHERE run = ?", (run_id,)
        ).fetchone()
        conn.executemany(
            "INSERT INTO run_entries (run, seq, kind, key, body, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, last + i, *row, now) for i, row in enumerate(rows, 1)],
        )

    def finish(
        self,
        run_id: str,
        result: RunResult,
        entries: Sequence[tuple[str, str, Mapping[str, Any]]] = (),
    ) -> None:
        """Write the run's outcome, with its last ``entries``, in one transaction."""
        record = {
            "v": VERSION,
            "answer": result.answer,
            "stop_reason": result.stop_reason,
            "error": result.error,
            "pending": [dump_record(a) for a in result.pending],
        }
        rows = [(kind, key, dumps(dict(body))) for kind, key, body in entries]
        now = time.time()
        with self.db.write() as conn:
            self._insert(conn, run_id, rows, now)
            conn.execute(
                "UPDATE runs SET status = ?, result = ?, updated = ? WHERE id = ?",
                (result.stop_reason, dumps(record), now, run_id),
            )

    def failed(
        self,
        run_id: str,
        error: BaseException,
        entries: Sequence[tuple[str, str, Mapping[str, Any]]] = (),
    ) -> None:
        record = {"v": VERSION, "error": f"{type(error).__name__}: {error}"}
        rows = [(kind, key, dumps(dict(body))) for kind, key, body in entries]
        with self.db.write() as conn:
            self._insert(conn, run_id, rows, time.time())
            conn.execute(
                "UPDATE runs SET status = 'failed', result = ?, updated = ? WHERE id = ?",
                (dumps(record), time.time(), run_id),
            )

    # --- reading -----------------------------------------------------------------------------

    def runs(self, limit: int = 50) -> list[RunInfo]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, status, question, model, protocol, created, updated FROM runs "
                "ORDER BY updated DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [RunInfo(*row) for row in rows]

    def info(self, run_id: str) -> RunInfo:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT id, status, question, model, protocol, created, updated FROM runs "
                "WHERE id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            raise StoreError(f"no run {run_id!r} in {self.db.path}")
        return RunInfo(*row)

    def history(self, run_id: str) -> list[HistoryItem]:
        """The history the run started with (a conversation's earlier turns)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT header FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run {run_id!r} in {self.db.path}")
        return [load_item(i) for i in json.loads(row[0]).get("history", ())]

    def result(self, run_id: str) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT result FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None or row[0] is None else dict(json.loads(row[0]))

    def entries(self, run_id: str) -> list[Entry]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT kind, key, body FROM run_entries WHERE run = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [Entry(kind, key, json.loads(body)) for kind, key, body in rows]

    def steps(self, run_id: str) -> list[Step]:
        """The run's steps committed so far."""
        out: list[Step] = []
        for entry in self.entries(run_id):
            if entry.kind == "step":
                item = load_item(entry.body)
                if isinstance(item, Step):
                    out.append(item)
        return out


def idempotent(tool: Tool) -> bool:
    """Whether calling ``tool`` again changes nothing more: MCP's ``idempotentHint``, or
    ``readOnlyHint``, in the tool's :class:`~react_engine.tools.ToolAnnotations`."""
    return tool.annotations.idempotent or tool.annotations.read_only


MAYBE_RAN = (
    "the process running this call stopped while it ran: it may or may not have "
    "happened (check before calling it again)"
)


@dataclass(slots=True)
class RunJournal:
    """One run's journal: what it commits as it goes, and, when it is resumed, what it
    already did (served again instead of asking the model or running the tool)."""

    store: RunStore
    run_id: str
    replies: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, tuple[str, ActionRecord]] = field(default_factory=dict)
    approvals: dict[str, bool] = field(default_factory=dict)
    steps_stored: int = 0
    protocol: str | None = None
    """The protocol the run began with (a resumed run reads its replies with it)."""
    reply_no: int = 0
    replayed_replies: int = 0
    replayed_calls: int = 0
    unwritten: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """A step, written with the journal's next commit: a run resumes from its replies and
    calls, so a step lost in a crash costs nothing (and a step saves a commit of its own)."""

    @classmethod
    def new(cls, store: RunStore, run_id: str | None = None) -> RunJournal:
        return cls(store, run_id or uuid.uuid4().hex[:16])

    @classmethod
    def load(
        cls, store: RunStore, run_id: str, approvals: Mapping[str, bool] | None = None
    ) -> RunJournal:
        """The journal of a stored run, with ``approvals`` committed into it first."""
        info = store.info(run_id)  # raises for an unknown run
        for call_id, verdict in (approvals or {}).items():
            if not isinstance(verdict, bool):
                raise StoreError(f"approval for {call_id!r} must be True or False")
            store.add(run_id, "approval", call_id, {"v": VERSION, "approved": verdict})
        journal = cls(store, run_id, protocol=info.protocol)
        for entry in store.entries(run_id):
            if entry.kind == "reply":
                journal.replies.append(entry.body)
            elif entry.kind == "started":
                journal.calls.setdefault(entry.key, ("started", load_record(entry.body)))
            elif entry.kind == "done":
                journal.calls[entry.key] = ("done", load_record(entry.body))
            elif entry.kind == "approval":
                journal.approvals[entry.key] = bool(entry.body["approved"])
            elif entry.kind == "step":
                journal.steps_stored += 1
        return journal

    # --- model replies -----------------------------------------------------------------------

    def saved_reply(self) -> ModelResponse | None:
        """The committed reply for the run's next model call, if it has one."""
        if self.reply_no < len(self.replies):
            self.replayed_replies += 1
            return load_reply(self.replies[self.reply_no]["reply"])
        return None

    def decided(self, reply: ModelResponse, decision: Decision) -> None:
        """After the protocol read ``reply``: commit it (a live reply), or give the calls
        the ids they had (a replayed one: ids made up for text replies are random)."""
        from ..protocols.base import CallTools

        calls = decision.calls if isinstance(decision, CallTools) else []
        if self.reply_no < len(self.replies):
            ids = self.replies[self.reply_no].get("ids") or []
            for call, call_id in zip(calls, ids, strict=False):
                call.id = call_id
        else:
            body = {"v": VERSION, "reply": dump_reply(reply), "ids": [c.id for c in calls]}
            self._commit("reply", str(self.reply_no), body)
            self.replies.append(body)
        self.reply_no += 1

    # --- tool calls --------------------------------------------------------------------------

    def _key(self, record: ActionRecord) -> str:
        return f"{self.reply_no - 1}:{record.id}"

    def finished(self, record: ActionRecord) -> ActionRecord | None:
        """The record of this call if it ran to its end before."""
        kept = self.calls.get(self._key(record))
        if kept is not None and kept[0] == "done":
            self.replayed_calls += 1
            return kept[1]
        return None

    def in_flight(self, record: ActionRecord) -> bool:
        """Whether this call had started, and not finished, when the process died."""
        kept = self.calls.get(self._key(record))
        return kept is not None and kept[0] == "started"

    def started(self, record: ActionRecord) -> None:
        key = self._key(record)
        if key not in self.calls:
            self._commit("started", key, dump_record(record))
            self.calls[key] = ("started", record)

    def done(self, record: ActionRecord) -> None:
        key = self._key(record)
        self._commit("done", key, dump_record(record))
        self.calls[key] = ("done", record)

    def approval(self, call_id: str) -> bool | None:
        return self.approvals.get(call_id)

    # --- steps -------------------------------------------------------------------------------

    def step(self, step: Step) -> None:
        if step.index < self.steps_stored:
            return  # replayed: stored already
        self.unwritten.append(("step", str(step.index), dump_item(step)))
        self.steps_stored = step.index + 1

    def _commit(self, kind: str, key: str, body: dict[str, Any]) -> None:
        self.store.add_many(self.run_id, [*self.unwritten, (kind, key, body)])
        self.unwritten.clear()

    def finish(self, result: RunResult) -> None:
        """The run's outcome, with what is still unwritten."""
        self.store.finish(self.run_id, result, self.unwritten)
        self.unwritten.clear()

    def failed(self, error: BaseException) -> None:
        self.store.failed(self.run_id, error, self.unwritten)
        self.unwritten.clear()
