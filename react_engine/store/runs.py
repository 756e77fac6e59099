"""Resumable runs: each step committed as it completes, and a run replayed from its journal.

A run journals ``reply`` (each model reply and its calls' ids), ``started`` and ``done``
(each call), ``step``, ``deferred`` (an approval put off) and ``approval`` (a verdict:
:mod:`react_engine.store.approvals`). :meth:`Agent.resume <react_engine.Agent.resume>`
runs the run again from its question with a :class:`RunJournal` serving the committed
replies and finished calls, and goes on live from where the process died
(docs/sessions.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import RunExistsError
from ..types import ActionRecord, HistoryItem, ModelResponse, RunResult, Step
from .approvals import bind, call_digest, deferred_entry, waiting
from .codec import (
    VERSION,
    RunBusy,
    StoreError,
    dump_item,
    dump_record,
    dump_reply,
    dumps,
    load_item,
    load_record,
    load_reply,
    storable,
)
from .session import Execute, Session, SQLSession
from .sqlite import SQLiteDB

if TYPE_CHECKING:
    from ..protocols.base import Protocol
    from ..protocols.decision import Decision
    from ..run.state import RunState

__all__ = ["RunBusy", "RunInfo", "RunJournal", "RunStore", "SQLRunStore", "SQLiteRunStore"]


@dataclass(slots=True, frozen=True)
class RunInfo:
    """One stored run, as ``react-engine runs list`` shows it."""

    id: str
    status: str
    """``running`` (or its process died), ``awaiting_approval``, or the stop reason."""
    question: str
    """As a store's column holds it: a lone surrogate or a NUL escaped (``\\ud800``,
    ``\\x00``); :meth:`RunStore.question` is the question as it was asked."""
    model: str
    protocol: str
    created: float
    updated: float


@dataclass(slots=True)
class Entry:
    kind: str
    key: str
    body: dict[str, Any]


Entries = Sequence[tuple[str, str, Mapping[str, Any] | str]]
"""Journal entries: their kind, key and body (a JSON object, or its text)."""


class RunStore(ABC):
    """Where runs are journalled (``Agent(store=...)``): the contract of every backend.

    :func:`~react_engine.store.open_store` opens the store a target names (a path to a
    SQLite file, :class:`SQLiteRunStore`; a ``postgresql://`` URI,
    :class:`~react_engine.store.postgres.PostgresRunStore`; a scheme some backend
    registered with :func:`~react_engine.store.register_store`). A backend implements the
    abstract methods below; the others are written with them.

    A run is written by one worker at a time: :meth:`hold` is its lease, taken before the
    run is begun or resumed and given back when it ends (or when its process dies), so
    that two workers resuming one run cannot both run it (the second gets
    :class:`RunBusy`). The methods are coroutines; the SQLite ones do not wait (a write
    takes microseconds on a local disk). A backend raises :class:`StoreError` (never its
    driver's errors) for a store that cannot be read or written."""

    @abstractmethod
    def hold(self, run_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The run's lease, for the ``async with`` block: :class:`RunBusy` if another
        worker holds it. It ends with the block, or with the process."""

    @abstractmethod
    async def begin(
        self,
        run_id: str,
        *,
        question: str,
        model: str,
        protocol: str,
        history: Sequence[HistoryItem],
        new: bool = True,
    ) -> None:
        """Record a ``new`` run (:class:`~react_engine.errors.RunExistsError` if the store
        holds a run of that id already), or mark a stored one running again."""

    @abstractmethod
    async def add_many(self, run_id: str, entries: Entries) -> None:
        """Commit entries of the run's journal, in one transaction."""

    @abstractmethod
    async def finish(self, run_id: str, result: RunResult, entries: Entries = ()) -> None:
        """Write the run's outcome, with its last ``entries``, in one transaction."""

    @abstractmethod
    async def failed(self, run_id: str, error: BaseException, entries: Entries = ()) -> None:
        """Write that the run raised ``error``, with its last ``entries``."""

    @abstractmethod
    async def runs(self, limit: int = 50) -> list[RunInfo]:
        """The latest runs, the last updated first."""

    @abstractmethod
    async def info(self, run_id: str) -> RunInfo:
        """One run (:class:`StoreError` for an unknown one)."""

    @abstractmethod
    async def header(self, run_id: str) -> str | None:
        """The run's header as :meth:`begin` wrote it (JSON text), or None for an unknown
        run."""

    @abstractmethod
    async def result(self, run_id: str) -> dict[str, Any] | None:
        """The run's outcome as written by :meth:`finish` or :meth:`failed` (None before)."""

    @abstractmethod
    async def entries(self, run_id: str) -> list[Entry]:
        """The run's journal, in commit order."""

    def journal(self, run_id: str | None = None) -> RunJournal:
        """The journal of run ``run_id`` (a new id when None): what ``Agent(store=...)``
        asks of a store (:class:`react_engine.run.journal.JournalStore`)."""
        return RunJournal(self, run_id or uuid.uuid4().hex[:16])

    def session(self, name: str) -> Session:
        """The conversation ``name`` kept in this store (``chat --session NAME``); a
        backend that keeps runs only raises :class:`StoreError`."""
        raise StoreError(f"{self} keeps no sessions")

    async def history(self, run_id: str) -> list[HistoryItem]:
        """The history the run started with (a conversation's earlier turns)."""
        return [load_item(i) for i in (await self._header_of(run_id)).get("history", ())]

    async def question(self, run_id: str) -> str:
        """The run's question as it was asked (:attr:`RunInfo.question` has what a listing
        shows: a lone surrogate or a NUL there is escaped, as a store's column takes it)."""
        question = (await self._header_of(run_id)).get("question")
        return question if isinstance(question, str) else (await self.info(run_id)).question

    async def _header_of(self, run_id: str) -> dict[str, Any]:
        header = await self.header(run_id)
        if header is None:
            raise StoreError(f"no run {run_id!r} in {self}")
        try:
            return dict(json.loads(header))
        except (ValueError, TypeError) as exc:
            raise StoreError(f"run {run_id!r} in {self}: its header is not JSON") from exc

    async def steps(self, run_id: str) -> list[Step]:
        """The run's steps committed so far."""
        items = [load_item(e.body) for e in await self.entries(run_id) if e.kind == "step"]
        return [item for item in items if isinstance(item, Step)]


def header_json(question: str, history: Sequence[HistoryItem]) -> str:
    return dumps({"v": VERSION, "question": question, "history": [dump_item(i) for i in history]})


def result_json(result: RunResult) -> str:
    return dumps(
        {
            "v": VERSION,
            "answer": result.answer,
            "stop_reason": result.stop_reason,
            "error": result.error,
            "pending": [dump_record(a) for a in result.pending],
        }
    )


def error_json(error: BaseException) -> str:
    return dumps({"v": VERSION, "error": f"{type(error).__name__}: {error}"})


def rows_of(entries: Entries) -> list[tuple[str, str, str]]:
    """The entries with their bodies as JSON (a body given as a str is JSON already)."""
    return [
        (kind, key, body if isinstance(body, str) else dumps(dict(body)))
        for kind, key, body in entries
    ]


def lock_key(run_id: str) -> int:
    """A run's lock: 62 bits of a hash of its id (a signed 64-bit integer's range)."""
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=8).digest()) >> 2


class SQLRunStore(RunStore):
    """The run store of every SQL backend: a row per run in :attr:`runs_table`, the journals
    in :attr:`entries_table`. A backend gives its placeholder (:attr:`mark`), its lease
    (:meth:`hold`, :meth:`holds`) and its statements (:meth:`connection`).

    While a run is held, this process numbers its entries itself: one ``INSERT`` per
    commit, no read of the last number."""

    runs_table = "runs"
    entries_table = "run_entries"
    sessions_table = "session_items"
    mark = "?"
    now = "(julianday('now') - 2440587.5) * 86400.0"  # seconds since 1970
    """The time, as SQL (a session item's ``created``)."""
    session_lock = ""
    """The statement that makes the writers of one session (its name) take turns."""
    where = "the store"
    """The store, as an error names it."""

    def __init__(self) -> None:
        self._seq: dict[str, int] = {}
        """The last entry number of each run this process holds."""

    @abstractmethod
    def connection(
        self, run_id: str | None = None, *, transaction: bool = False
    ) -> contextlib.AbstractAsyncContextManager[Execute]:
        """Statements on the connection of run ``run_id`` if it is held here (else one of
        their own), in one transaction if ``transaction``."""

    @abstractmethod
    def holds(self, run_id: str) -> bool:
        """Whether this process holds the run (:meth:`hold`)."""

    def session(self, name: str) -> SQLSession:
        return SQLSession(name, self)

    async def begin(
        self,
        run_id: str,
        *,
        question: str,
        model: str,
        protocol: str,
        history: Sequence[HistoryItem],
        new: bool = True,
    ) -> None:
        header = header_json(question, history)
        now, m = time.time(), self.mark
        # a new run's row is left as it is (and the run refused); a stored one runs again
        again = "NOTHING" if new else "UPDATE SET status = 'running', updated = excluded.updated"
        async with self.connection(run_id, transaction=True) as execute:
            _, added = await execute(
                f"INSERT INTO {self.runs_table} (id, status, question, model, protocol, header, "
                f"created, updated) VALUES ({m}, 'running', {m}, {m}, {m}, {m}, {m}, {m}) "
                f"ON CONFLICT (id) DO {again}",
                [run_id, *map(storable, (question, model, protocol)), header, now, now],
            )
            if new and added == 0:
                raise RunExistsError(run_id, self.where)
            if self.holds(run_id):
                self._seq[run_id] = await self._last(execute, run_id)

    async def _last(self, execute: Execute, run_id: str) -> int:
        sql = f"SELECT COALESCE(MAX(seq), 0) FROM {self.entries_table} WHERE run = {self.mark}"
        rows, _ = await execute(sql, [run_id])
        return int(rows[0][0])

    async def _insert(self, execute: Execute, run_id: str, entries: Entries, now: float) -> None:
        rows = rows_of(entries)
        last = self._seq.get(run_id)
        if last is None:
            last = await self._last(execute, run_id)
        else:
            self._seq[run_id] = last + len(rows)
        params = [v for i, row in enumerate(rows, last + 1) for v in (run_id, i, *row, now)]
        values = ", ".join([f"({', '.join([self.mark] * 6)})"] * len(rows))
        await execute(
            f"INSERT INTO {self.entries_table} (run, seq, kind, key, body, created) "
            f"VALUES {values}",
            params,
        )

    async def add_many(self, run_id: str, entries: Entries) -> None:
        if entries:  # held: one statement, its own transaction
            async with self.connection(run_id, transaction=run_id not in self._seq) as execute:
                await self._insert(execute, run_id, entries, time.time())

    async def finish(self, run_id: str, result: RunResult, entries: Entries = ()) -> None:
        await self._end(run_id, result.stop_reason, result_json(result), entries)

    async def failed(self, run_id: str, error: BaseException, entries: Entries = ()) -> None:
        await self._end(run_id, "failed", error_json(error), entries)

    async def _end(self, run_id: str, status: str, record: str, entries: Entries) -> None:
        now, m = time.time(), self.mark
        async with self.connection(run_id, transaction=True) as execute:
            if entries:
                await self._insert(execute, run_id, entries, now)
            await execute(
                f"UPDATE {self.runs_table} SET status = {m}, result = {m}, updated = {m} "
                f"WHERE id = {m}",
                [status, record, now, run_id],
            )

    async def _select(self, sql: str, *params: Any, run_id: str | None = None) -> list[Any]:
        async with self.connection(run_id) as execute:
            sql = sql.format(runs=self.runs_table, entries=self.entries_table, m=self.mark)
            rows, _ = await execute(sql, params)
        return rows

    async def runs(self, limit: int = 50) -> list[RunInfo]:
        rows = await self._select(_INFO + " ORDER BY updated DESC LIMIT {m}", limit)
        return [RunInfo(*row) for row in rows]

    async def info(self, run_id: str) -> RunInfo:
        for row in await self._select(_INFO + " WHERE id = {m}", run_id, run_id=run_id):
            return RunInfo(*row)
        raise StoreError(f"no run {run_id!r} in {self.where}")

    async def header(self, run_id: str) -> str | None:
        sql = "SELECT header FROM {runs} WHERE id = {m}"
        rows = await self._select(sql, run_id, run_id=run_id)
        return str(rows[0][0]) if rows else None

    async def result(self, run_id: str) -> dict[str, Any] | None:
        sql = "SELECT result FROM {runs} WHERE id = {m}"
        rows = await self._select(sql, run_id, run_id=run_id)
        return dict(json.loads(rows[0][0])) if rows and rows[0][0] is not None else None

    async def entries(self, run_id: str) -> list[Entry]:
        sql = "SELECT kind, key, body FROM {entries} WHERE run = {m} ORDER BY seq"
        rows = await self._select(sql, run_id, run_id=run_id)
        return [Entry(kind, key, json.loads(body)) for kind, key, body in rows]


_INFO = "SELECT id, status, question, model, protocol, created, updated FROM {runs}"


class SQLiteRunStore(SQLRunStore):
    """Runs in a SQLite file (see :mod:`react_engine.store.sqlite`).

    The lease is a POSIX lock on one byte of a file beside the database (``FILE-runs.lock``,
    at an offset drawn from the run's id): the system drops it when the process dies, so a
    killed worker's run can be resumed at once. (Where ``fcntl`` does not exist, on
    Windows, the lease is kept within the process only.)"""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.db = SQLiteDB.shared(path)
        self.where = str(self.db.path)

    def __repr__(self) -> str:
        return f"SQLiteRunStore({str(self.db.path)!r})"

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        with self.db.leases.hold(run_id, lock_key(run_id)):
            try:
                yield
            finally:
                self._seq.pop(run_id, None)

    def holds(self, run_id: str) -> bool:
        return run_id in self.db.leases.held

    def connection(
        self, run_id: str | None = None, *, transaction: bool = False
    ) -> contextlib.AbstractAsyncContextManager[Execute]:
        return self.db.statements(transaction=transaction)


@dataclass(slots=True)
class RunJournal:
    """One run's journal: what it commits as it goes, and, when it is resumed, what it
    already did (served again instead of asking the model or running the tool)."""

    store: RunStore
    run_id: str
    replies: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, tuple[str, ActionRecord]] = field(default_factory=dict)
    approvals: dict[str, tuple[bool, str]] = field(default_factory=dict)
    """The verdicts given to the run, by call key: approved or not, and the call's digest."""
    deferrals: dict[str, str] = field(default_factory=dict)
    """The calls whose approval was put off before, by key: their digest."""
    resumed: bool = False
    """Read from the store (:meth:`load`): the run exists, and goes on."""
    steps_stored: int = 0
    protocol: str | None = None
    """The protocol the run began with (a resumed run reads its replies with it)."""
    reply_no: int = 0
    unwritten: list[tuple[str, str, Mapping[str, Any] | str]] = field(default_factory=list)
    """A step, written with the journal's next commit: a run resumes from its replies and
    calls, so a step lost in a crash costs nothing (and a step saves a commit of its own)."""
    header: dict[str, Any] = field(default_factory=dict)
    """What :meth:`open` records: the question, model, protocol and earlier history."""
    holding: bool = False
    eager: bool = False
    """Commit each reply as soon as it is read. Otherwise (the default) a reply is committed
    with its first call's start (before the tool runs), or with its step (before the next
    request), or with the run's result: one transaction fewer per model call, and the same
    guarantee, as nothing runs in between. The agent makes it eager when code of the user's
    runs in between (``approve``, ``on_call``, ``on_step``: a human may take hours)."""
    live: tuple[Protocol, str] | None = None
    """A resumed run's protocol once its committed replies are spent (and the reason)."""
    readers: dict[str, Protocol] = field(default_factory=dict)
    """The protocols that read the committed replies again, by name."""
    make_reader: Callable[[str], Protocol] | None = None

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[RunJournal]:
        """The run's lease (:meth:`RunStore.hold`) for the block; within a block that holds
        it already, nothing more."""
        if self.holding:
            yield self
            return
        async with self.store.hold(self.run_id):
            self.holding = True
            try:
                yield self
            finally:
                self.holding = False

    async def load(self, approvals: Mapping[str, bool] | None = None) -> RunJournal:
        """Read the stored run's journal (held), with ``approvals`` of the calls awaiting
        approval committed into it (:func:`~react_engine.store.approvals.bind`)."""
        info = await self.store.info(self.run_id)  # raises for an unknown run
        entries = await self.store.entries(self.run_id)
        if approvals is not None:
            verdicts = bind(self.run_id, waiting(info.status, entries), approvals)
            if verdicts:
                await self.store.add_many(self.run_id, verdicts)
                entries += [Entry(kind, key, body) for kind, key, body in verdicts]
        self.protocol, self.resumed = info.protocol, True
        for entry in entries:
            if entry.kind == "reply":
                self.replies.append(entry.body)
            elif entry.kind == "started":
                self.calls.setdefault(entry.key, ("started", load_record(entry.body)))
            elif entry.kind == "done":
                self.calls[entry.key] = ("done", load_record(entry.body))
            elif entry.kind == "approval" and "digest" in entry.body:
                self.approvals[entry.key] = (entry.body["approved"] is True, entry.body["digest"])
            elif entry.kind == "deferred":
                self.deferrals[entry.key] = entry.body["digest"]
            elif entry.kind == "step":
                self.steps_stored += 1
        return self

    async def open(self) -> None:
        """Record the run as running (under its lease)."""
        await self.store.begin(self.run_id, **self.header, new=not self.resumed)

    @property
    def replaying(self) -> bool:
        """Whether the next model call's reply is a committed one."""
        return self.reply_no < len(self.replies)

    def last_protocol(self) -> str | None:
        """The protocol that read the run's latest committed reply."""
        if not self.replies:
            return self.protocol
        return str(self.replies[-1].get("protocol") or self.protocol)

    def resume_on(
        self, live: tuple[Protocol, str], make_reader: Callable[[str], Protocol]
    ) -> tuple[Protocol, str]:
        """A resumed run goes on under ``live`` (the resuming agent's protocol, which may
        not be the one the run began with). Each committed reply is read again by the
        protocol that read it first (``make_reader`` builds it from its name), so that the
        run takes the same turns; then ``live`` takes over (:meth:`before_turn`). The
        history is protocol-neutral: ``live`` renders the replayed steps as it renders any
        history, call ids made fit for it. Returns the protocol of the run's first turn."""
        self.live, self.make_reader = live, make_reader
        if not self.replaying:
            self.live = None
            return live
        return self._reader(0), "resumed"

    def _reader(self, reply_no: int) -> Protocol:
        assert self.live is not None and self.make_reader is not None
        name = str(self.replies[reply_no].get("protocol") or self.protocol)
        if name == self.live[0].name:
            return self.live[0]
        if name not in self.readers:
            self.readers[name] = self.make_reader(name)
        return self.readers[name]

    def before_turn(self, state: RunState) -> None:
        """Before each model call of a resumed run: the protocol that reads its reply."""
        if self.live is None:
            return
        if self.replaying:
            state.protocol = self._reader(self.reply_no)
            return
        state.protocol, state.protocol_reason = self.live  # the replay is over: once
        self.live = None

    # --- model replies -----------------------------------------------------------------------

    def saved_reply(self) -> ModelResponse | None:
        """The committed reply for the run's next model call, if it has one."""
        if self.reply_no < len(self.replies):
            return load_reply(self.replies[self.reply_no]["reply"])
        return None

    async def decided(
        self, reply: ModelResponse, decision: Decision, protocol: str | None = None
    ) -> None:
        """After the protocol read ``reply``: commit it (a live reply), or give the calls
        the ids they had (a replayed one: ids made up for text replies are random)."""
        from ..protocols.decision import CallTools

        calls = decision.calls if isinstance(decision, CallTools) else []
        if self.reply_no < len(self.replies):
            ids = self.replies[self.reply_no].get("ids") or []
            for call, call_id in zip(calls, ids, strict=False):
                call.id = call_id
        else:
            body = {"v": VERSION, "reply": dump_reply(reply), "ids": [c.id for c in calls]}
            if protocol is not None:
                body["protocol"] = protocol  # the protocol that reads it again on a resume
            self.replies.append(body)
            if self.eager:
                await self._commit("reply", str(self.reply_no), body)
            else:  # with the reply's first call, its step, or the run's result
                self.unwritten.append(("reply", str(self.reply_no), dumps(body)))
        self.reply_no += 1

    # --- tool calls --------------------------------------------------------------------------

    def _key(self, record: ActionRecord) -> str:
        return f"{self.reply_no - 1}:{record.id}"

    def finished(self, record: ActionRecord) -> ActionRecord | None:
        """The record of this call if it ran to its end before."""
        kept = self.calls.get(self._key(record))
        if kept is not None and kept[0] == "done":
            return kept[1]
        return None

    def in_flight(self, record: ActionRecord) -> bool:
        """Whether this call had started, and not finished, when the process died."""
        kept = self.calls.get(self._key(record))
        return kept is not None and kept[0] == "started"

    async def started(self, record: ActionRecord) -> None:
        key = self._key(record)
        if key not in self.calls:
            await self._commit("started", key, dump_record(record))
            self.calls[key] = ("started", record)

    async def done(self, record: ActionRecord) -> None:
        key = self._key(record)
        await self._commit("done", key, dump_record(record))
        self.calls[key] = ("done", record)

    def approval(self, record: ActionRecord) -> bool | None:
        """The verdict given for this very call (its reply, id, tool and arguments), if any."""
        given = self.approvals.get(self._key(record))
        if given is None or given[1] != call_digest(record):
            return None
        return given[0]

    def waited(self, record: ActionRecord) -> bool:
        """Whether this very call's approval was put off before (it still waits for one)."""
        return self.deferrals.get(self._key(record)) == call_digest(record)

    def defer(self, record: ActionRecord) -> None:
        """This call's approval is put off: journalled with the run's result."""
        self.unwritten.append(deferred_entry(self._key(record), record))

    # --- steps -------------------------------------------------------------------------------

    async def step(self, step: Step) -> None:
        if step.index < self.steps_stored:
            return  # replayed: stored already
        # Encoded now: the step may change later (an observation shortened to fit).
        self.unwritten.append(("step", str(step.index), dumps(dump_item(step))))
        self.steps_stored = step.index + 1
        if step.kind != "final" and any(kind == "reply" for kind, _, _ in self.unwritten):
            await self.flush()  # its reply started no call: committed before the next request

    async def flush(self) -> None:
        """Commit what is unwritten."""
        if self.unwritten:
            await self.store.add_many(self.run_id, self._take())

    def _take(self) -> list[tuple[str, str, Mapping[str, Any] | str]]:
        """What is unwritten, taken before the commit awaits: the run's concurrent calls
        commit side by side, and none may write it a second time."""
        taken = list(self.unwritten)
        self.unwritten.clear()
        return taken

    async def _commit(self, kind: str, key: str, body: dict[str, Any]) -> None:
        await self.store.add_many(self.run_id, [*self._take(), (kind, key, body)])

    async def finish(self, result: RunResult) -> None:
        """The run's outcome, with what is still unwritten."""
        await self.store.finish(self.run_id, result, self._take())

    async def failed(self, error: BaseException) -> None:
        await self.store.failed(self.run_id, error, self._take())
