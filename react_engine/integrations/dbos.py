"""Runs as DBOS workflows (the ``dbos`` extra; docs/dbos.md): each run a workflow, each
model request, made-up call ids and each tool call a step (a call to a tool neither
read-only nor idempotent records a "started" step first), so that a run whose process dies
is finished by another. A reply's calls have their step numbers reserved when it is read.
Deferred approvals wait on :data:`APPROVAL_TOPIC` (:func:`approve`), the calls awaiting
them published as :data:`PENDING_EVENT`; :func:`agent_queue` declares a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import dataclasses
import logging
import pickle
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, cast

from dbos import (
    DBOS,
    DBOSClient,
    Queue,
    SetEnqueueOptions,
    SetWorkflowID,
    StepReservation,
    WorkflowHandleAsync,
)

from ..errors import ConfigurationError
from ..protocols.decision import CallTools, Decision
from ..run.agent import Agent
from ..runtime import DeadlinePassed, run_coroutine
from ..store.approvals import Waiting, bind, call_digest
from ..store.codec import dump_item, dump_reply, load_item, load_reply
from ..store.runs import RunJournal, RunStore
from ..tools.base import Tool
from ..transport.base import ChatModel
from ..types import (
    ActionRecord,
    HistoryItem,
    ModelRequest,
    ModelResponse,
    OutputT,
    RunResult,
    Step,
    check_type,
    to_jsonable,
)

__all__ = [
    "APPROVAL_TOPIC",
    "PENDING_EVENT",
    "STEPS_STREAM",
    "DBOSAgent",
    "agent_queue",
    "approve",
    "steps",
]

APPROVAL_TOPIC = "react_engine.approval"
"""The topic of the messages :func:`approve` sends: ``{call_id: bool}``."""
PENDING_EVENT = "react_engine.pending"
"""The workflow event that lists the calls awaiting approval (their records, as dicts)."""
STEPS_STREAM = "react_engine.steps"
"""The workflow's stream of its steps, each written as it is done (:func:`steps`)."""
WEEK = 7 * 24 * 3600.0
log = logging.getLogger(__name__)


def agent_queue(
    name: str,
    *,
    concurrency: int | None = None,
    limiter: Mapping[str, float] | None = None,
    worker_concurrency: int | None = None,
    polling_interval: float = 1.0,
    per_provider: bool = False,
) -> Queue:
    """A DBOS queue for runs (:meth:`DBOSAgent.enqueue`) or for model requests
    (``DBOSAgent(requests=...)``): at most ``concurrency`` running at once across every
    process, ``worker_concurrency`` in each, ``limiter={"limit": N, "period": seconds}``,
    polled every ``polling_interval`` seconds; ``per_provider=True``: the bounds hold per
    base URL. Registered in DBOS's system database: call it once DBOS is launched."""
    if limiter is not None:
        limit, period = limiter.get("limit"), limiter.get("period")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ConfigurationError(f"limiter['limit'] must be an int >= 1, not {limit!r}")
        if not isinstance(period, int | float) or isinstance(period, bool) or period <= 0:
            raise ConfigurationError(f"limiter['period'] must be seconds > 0, not {period!r}")
    where = "partition_" if per_provider else ""
    bounds: Any = {
        "partition_concurrency" if per_provider else "global_concurrency": concurrency,
        f"{where}limiter": limiter,
    }
    return DBOS.register_queue(
        name,
        worker_concurrency=worker_concurrency,
        polling_interval_sec=polling_interval,
        on_conflict="always_update",
        **bounds,
    )


def _verdicts(verdicts: Mapping[str, bool]) -> dict[str, bool]:
    out = dict(verdicts)
    for call_id, verdict in out.items():
        if not isinstance(call_id, str) or not isinstance(verdict, bool):
            raise ConfigurationError(
                f"approvals map call ids to True or False, not {call_id!r}: {verdict!r}"
            )
    return out


def approve(
    workflow_id: str, verdicts: Mapping[str, bool], *, client: DBOSClient | None = None
) -> None:
    """Give verdicts (``{call_id: True or False}``) to the run ``workflow_id``, which waits
    for them: from a process where DBOS is launched, or through ``client`` (a
    ``DBOSClient(system_database_url=...)``: a process that runs no workflows)."""
    checked = _verdicts(verdicts)
    if client is not None:
        client.send(workflow_id, checked, APPROVAL_TOPIC)
    else:
        DBOS.send(workflow_id, checked, topic=APPROVAL_TOPIC)


def steps(workflow_id: str, *, client: DBOSClient | None = None) -> Iterator[Step]:
    """A run's steps as they are done, from any process (where DBOS is launched, or through
    ``client``), until the run ends (each step once, a recovered run's too)."""
    source = client.read_stream if client is not None else DBOS.read_stream
    for record in source(workflow_id, STEPS_STREAM):
        item = load_item(record)
        if isinstance(item, Step):
            yield item


_TOOL_STEP: contextvars.ContextVar[StepReservation | None] = contextvars.ContextVar(
    "react_engine_dbos_tool_step", default=None
)
"""The step number drawn for the call this task is running (set by the journal when the
call starts, taken by :meth:`DurableTool.ainvoke`)."""


class DurableModel(ChatModel):
    """A chat model whose requests are DBOS steps (or, with a queue, child workflows on it)."""

    def __init__(self, inner: ChatModel, request: Any = None, queue: str | None = None):
        self.inner = inner
        self.base_url = inner.base_url
        self._request = request
        self._queue = queue

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._queue is not None:
            with SetEnqueueOptions(queue_partition_key=self.base_url or "default"):
                handle = await DBOS.enqueue_workflow_async(self._queue, self._request, request)
            # polled: DBOS's default wait (1 s) would double a request's time
            return load_reply(await handle.get_result(polling_interval_sec=0.05))
        return load_reply(await self.ask(request))

    async def ask(self, request: ModelRequest) -> dict[str, Any]:
        """The request as a step: its output is the reply, encoded."""

        async def send() -> dict[str, Any]:
            return dump_reply(await self.inner.complete(request))

        return await DBOS.run_step_async({"name": "react_engine.model_request"}, send)


class DurableTool(Tool):
    """A tool whose calls are DBOS steps: their results are recorded, and a recovered run is
    given them instead of running the tool again."""

    @classmethod
    def of(cls, tool: Tool) -> DurableTool:
        if isinstance(tool, DurableTool):
            return tool
        fields = {f.name: getattr(tool, f.name) for f in dataclasses.fields(tool) if f.init}
        return cls(**fields)

    async def ainvoke(
        self, validated: Any, timeout: float | None = None
    ) -> Any:  # the step's output: the tool's value (pickled by DBOS)
        reserved = _TOOL_STEP.get()
        if reserved is None:  # not in a run of a DBOSAgent
            return await super().ainvoke(validated, timeout)
        _TOOL_STEP.set(None)

        raised: list[Exception] = []

        async def call() -> Any:
            try:
                return _recordable(await Tool.ainvoke(self, validated, timeout))
            except Exception as exc:  # recorded as the step's output, read back below
                raised.append(exc)
                return Raised.of(exc, timeout)

        value = await reserved.run_async({"name": f"react_engine.tool {self.name}"}, call)
        if isinstance(value, Raised):
            raise raised[0] if raised else value.exception()
        return value


@dataclass(frozen=True, slots=True)
class Raised:
    """A tool's exception as its step records it: itself when pickle gives it back, else its
    kind and text (the engine's timeout rebuilt from its fields)."""

    error: Exception | None
    kind: str
    text: str
    deadline: tuple[float, bool] | None = None

    @classmethod
    def of(cls, exc: Exception, timeout: float | None) -> Raised:
        if isinstance(exc, DeadlinePassed):
            return cls(None, type(exc).__name__, str(exc), (timeout or 0.0, exc.started))
        try:
            kept: Exception | None = pickle.loads(pickle.dumps(exc))
        except Exception:
            kept = None
        return cls(kept, type(exc).__name__, str(exc))

    def exception(self) -> Exception:
        if self.deadline is not None:
            return DeadlinePassed(self.deadline[0], started=self.deadline[1])
        if self.error is not None:
            return self.error
        # one of the same name and text: all the model is shown of it
        kind: type[Exception] = type(self.kind, (Exception,), {})
        return kind(self.text)


def _recordable(value: Any) -> Any:
    """``value`` if DBOS can record it (pickle), else its JSON-ready form."""
    try:
        pickle.dumps(value)
    except Exception:
        return to_jsonable(value)
    return value


async def _given(ids: list[str]) -> list[str]:
    return ids


async def _nothing() -> None:
    return None


@dataclass(slots=True)
class DBOSJournal(RunJournal):
    """The run's journal inside a workflow: DBOS records the steps, so this one commits
    nothing (it overrides each method that would). It reserves each call's step numbers
    when the reply is read, tells from the steps recorded before which call was in flight,
    and keeps replies and calls in memory, replayed as the run store's are after an
    approval."""

    recorded: frozenset[int] = frozenset()
    """The step numbers recorded before this execution (an earlier process's)."""
    tools: dict[str, Tool] = field(default_factory=dict)
    deferring: bool = False
    reserved: dict[str, tuple[StepReservation, StepReservation]] = field(default_factory=dict)
    published: int = 0
    """The steps written to the workflow's stream so far."""
    waiting: dict[str, Waiting] = field(default_factory=dict)
    """The calls awaiting a verdict, by key."""

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[RunJournal]:
        yield self  # DBOS runs a workflow in one process at a time

    async def open(self) -> None:
        pass

    async def decided(
        self, reply: ModelResponse, decision: Decision, protocol: str | None = None
    ) -> None:
        if self.replaying:  # replayed from memory (after an approval)
            await RunJournal.decided(self, reply, decision, protocol)
            return
        calls = decision.calls if isinstance(decision, CallTools) else []
        given = {c.id for c in reply.tool_calls}
        if any(c.id not in given for c in calls):  # ids made up: the first execution's
            ids = await DBOS.run_step_async(
                {"name": "react_engine.call_ids"}, _given, [c.id or "" for c in calls]
            )
            for call, call_id in zip(calls, ids, strict=False):
                call.id = call_id
        for call in calls:
            key = f"{self.reply_no}:{call.id}"
            self.reserved[key] = (DBOS.reserve_step(), DBOS.reserve_step())
        body: dict[str, Any] = {"reply": dump_reply(reply), "ids": [c.id for c in calls]}
        if protocol is not None:
            body["protocol"] = protocol
        self.replies.append(body)
        self.reply_no += 1

    def in_flight(self, record: Any) -> bool:
        """Started by an earlier execution and not finished: its "started" step is recorded
        and its tool step is not (and it was past its approval)."""
        steps = self.reserved.get(self._key(record))
        if steps is None:
            return False
        tool = self.tools.get(record.tool)
        if (
            tool is not None
            and tool.requires_approval
            and self.deferring
            and self.approval(record) is None
        ):
            return False  # it waited for its approval then, and does now
        started, finished = steps[0].step_id, steps[1].step_id
        return started in self.recorded and finished not in self.recorded

    async def started(self, record: Any) -> None:
        key = self._key(record)
        steps = self.reserved.get(key)
        _TOOL_STEP.set(None if steps is None else steps[1])
        if steps is None:
            return
        tool = self.tools.get(record.tool)
        if tool is not None and not (tool.annotations.idempotent or tool.annotations.read_only):
            await steps[0].run_async({"name": f"react_engine.call_started {record.tool}"}, _nothing)
        self.calls[key] = ("started", record)

    async def done(self, record: Any) -> None:
        self.calls[self._key(record)] = ("done", record)

    async def step(self, step: Step) -> None:
        """Write the step to the workflow's stream (once each)."""
        if step.index < self.published:
            return
        self.published = step.index + 1
        await DBOS.write_stream_async(STEPS_STREAM, dump_item(step))

    async def flush(self) -> None:
        pass

    async def finish(self, result: RunResult) -> None:
        pass

    async def failed(self, error: BaseException) -> None:
        pass

    def defer(self, record: ActionRecord) -> None:
        """This call waits for its verdict (:meth:`rewind` binds one to it)."""
        key = self._key(record)
        self.waiting[key] = Waiting(key, call_digest(record), record)

    def rewind(self, verdicts: Mapping[str, bool]) -> None:
        """Before the run is taken again from its question with ``verdicts``, each bound to
        the waiting call of its id (one naming none is logged and left out)."""
        known = {
            k: v for k, v in verdicts.items() if k in {w.call.id for w in self.waiting.values()}
        }
        if len(known) < len(verdicts):
            log.warning(
                "run %s: no call awaits approval under %s",
                self.run_id,
                ", ".join(repr(k) for k in verdicts if k not in known),
            )
        for _, key, body in bind(self.run_id, list(self.waiting.values()), known):
            self.approvals[key] = (body["approved"] is True, body["digest"])
            del self.waiting[key]
        self.protocol = str(self.header.get("protocol") or self.protocol or "")
        self.reply_no = 0
        self.live = None
        self.readers = {}


class DBOSAgent(Generic[OutputT]):
    """An agent whose runs are DBOS workflows (docs/dbos.md).

    ``name`` names the workflow (``react_engine.<name>``: build the wrapper in every
    process, before ``DBOS.launch()``); ``sessions`` makes a session from its id;
    ``requests`` names a queue each model request is put on; ``approval_timeout``: seconds
    a run waits for :func:`approve` before it ends awaiting approval.
    """

    def __init__(
        self,
        agent: Agent[OutputT],
        *,
        name: str,
        sessions: Any = None,
        requests: str | None = None,
        approval_timeout: float = WEEK,
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"DBOSAgent wraps an Agent, not {type(agent).__name__}")
        self.agent = agent
        self.name = name
        self.approval_timeout = approval_timeout
        self._sessions = sessions  # a session from its id; loaded and appended as steps
        inner = copy.copy(agent)
        inner.tools = [DurableTool.of(t) for t in agent.tools]
        inner.store = None
        if not callable(agent.approve):
            inner.approve = "defer"
        self._inner = inner

        async def request(req: ModelRequest) -> dict[str, Any]:
            return await self.model.ask(req)  # the request as a step of its own workflow

        request_workflow = DBOS.workflow(name=f"react_engine.{name}.request")(request)
        self.model = inner._model = DurableModel(agent._model, request_workflow, requests)

        async def run(
            question: str,
            history: list[dict[str, Any]],
            options: dict[str, Any],
            session_id: str | None,
        ) -> RunResult[Any]:
            return await self._execute(question, history, options, session_id)

        self.workflow = DBOS.workflow(name=f"react_engine.{name}")(run)

    async def start(
        self,
        question: str,
        *,
        workflow_id: str | None = None,
        history: Sequence[HistoryItem] = (),
        session_id: str | None = None,
        **options: Any,
    ) -> WorkflowHandleAsync[RunResult[OutputT]]:
        """Start a run in this process; its handle (``await handle.get_result()``)."""
        return await self._launch(None, question, workflow_id, history, session_id, options)

    async def enqueue(
        self,
        queue: Queue | str,
        question: str,
        *,
        workflow_id: str | None = None,
        history: Sequence[HistoryItem] = (),
        session_id: str | None = None,
        **options: Any,
    ) -> WorkflowHandleAsync[RunResult[OutputT]]:
        """Put a run on ``queue`` (a queue of :func:`agent_queue`, or its name): a process
        that listens to it runs it."""
        name = queue if isinstance(queue, str) else queue.name
        return await self._launch(name, question, workflow_id, history, session_id, options)

    async def arun(self, question: str, **options: Any) -> RunResult[OutputT]:
        """Run to the end (a workflow in this process) and give the result."""
        handle = await self.start(question, **options)
        return await handle.get_result()

    def run(self, question: str, **options: Any) -> RunResult[OutputT]:
        """:meth:`arun`, blocking."""
        return run_coroutine(self.arun(question, **options))

    async def _launch(
        self,
        queue: str | None,
        question: str,
        workflow_id: str | None,
        history: Sequence[HistoryItem],
        session_id: str | None,
        options: dict[str, Any],
    ) -> WorkflowHandleAsync[RunResult[OutputT]]:
        check_type(question, str, "the question", "a str", optional=False)  # as Agent.run does
        for option in ("session", "run_id"):
            if option in options:
                raise ConfigurationError(
                    f"{option}= is not for a DBOS run: use session_id= (with sessions=) "
                    "and workflow_id="
                )
        args = (question, [dump_item(i) for i in history], options, session_id)
        named = contextlib.nullcontext() if workflow_id is None else SetWorkflowID(workflow_id)
        with named:
            if queue is None:
                handle = await DBOS.start_workflow_async(self.workflow, *args)
            else:
                handle = await DBOS.enqueue_workflow_async(queue, self.workflow, *args)
        return cast("WorkflowHandleAsync[RunResult[OutputT]]", handle)

    async def _execute(
        self,
        question: str,
        history: list[dict[str, Any]],
        options: dict[str, Any],
        session_id: str | None,
    ) -> RunResult[Any]:
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None
        steps = await _recorded_steps(workflow_id)
        journal = DBOSJournal(
            cast(RunStore, None),
            workflow_id,
            recorded=frozenset(s["function_id"] for s in steps),
            tools={t.name: t for t in self._inner.tools},
            deferring=self._inner.approve == "defer",
        )
        base, sessions = [load_item(i) for i in history], self._sessions
        if session_id is not None:
            if sessions is None:
                raise ConfigurationError("session_id= needs DBOSAgent(..., sessions=...)")

            async def read() -> list[dict[str, Any]]:
                return [dump_item(i) for i in await sessions(session_id).load()]

            records = await DBOS.run_step_async({"name": "react_engine.session_load"}, read)
            base = [load_item(r) for r in records]
        run = list(base)
        arun = self._inner._arun
        result = await arun(question, history=run, _journal=journal, **options)
        published = False
        while result.stop_reason == "awaiting_approval":
            pending = [dataclasses.asdict(r) for r in result.pending]
            await DBOS.set_event_async(PENDING_EVENT, pending)
            published = True
            verdicts = await DBOS.recv_async(APPROVAL_TOPIC, timeout_seconds=self.approval_timeout)
            if verdicts is None:
                break  # no verdict in time: the run ends awaiting it
            journal.rewind(_verdicts(verdicts))
            run = list(base)
            result = await arun(question, history=run, _journal=journal, **options)
        if published and result.stop_reason != "awaiting_approval":
            await DBOS.set_event_async(PENDING_EVENT, [])
        await DBOS.close_stream_async(STEPS_STREAM)
        if session_id is not None:
            added = run[len(base) :]

            async def write() -> None:
                await sessions(session_id).append(added)

            await DBOS.run_step_async({"name": "react_engine.session_append"}, write)
        return result


async def _recorded_steps(workflow_id: str) -> list[Any]:
    """The workflow's steps recorded so far, read outside the workflow's context (inside
    it, the listing would be a step itself)."""

    def read() -> list[Any]:
        return list(DBOS.list_workflow_steps(workflow_id, load_output=False))

    # run_in_executor, unlike asyncio.to_thread, does not carry the workflow's context over
    return await asyncio.get_running_loop().run_in_executor(None, read)
