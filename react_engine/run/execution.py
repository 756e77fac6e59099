"""Running the calls of one reply: approval, timeouts, loop detection, observations.

Every way a call can go wrong ends in an observation; :meth:`ToolRunner.run` returns the
records in a :class:`Ran`, and the loop alone acts on what it says."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..runtime import DeadlinePassed, ThreadsExhausted, stuck_threads
from ..text import valid_unicode
from ..tools.base import Tool, ToolArgumentsError, arguments_dict
from ..types import ActionRecord, PendingCall, Step
from ..wording import Notice, NoticeCode, error_observation, skipped_observation
from .events import ToolFinished, ToolStarted
from .observations import render_observation
from .state import RunState, call_user

__all__ = ["ApprovalCallback", "CallCallback", "Ran", "StepCallback", "ToolRunner", "skipped"]

log = logging.getLogger("react_engine")

ApprovalCallback = Callable[[ActionRecord], "bool | str | Awaitable[bool | str]"]
"""Returns True to run the call; ``"defer"`` (with a store) ends the run awaiting it."""
CallCallback = Callable[[ActionRecord], "Awaitable[None] | None"]
StepCallback = Callable[[Step], "Awaitable[None] | None"]


@dataclass(slots=True)
class Ran:
    """One reply's call records, and what the loop alone acts on."""

    actions: list[ActionRecord] = field(default_factory=list)
    deferred: list[ActionRecord] = field(default_factory=list)
    """Calls whose approval was deferred (``approve="defer"``): the run stops until given."""
    abort: BaseException | None = None
    """A ``BaseException`` from a tool or the approver: the run ends once the step is recorded."""
    repeated: bool = False
    """A call was made more than ``loop_limit`` times: ask for the final answer."""


class ToolRunner:
    def __init__(
        self,
        approve: ApprovalCallback | Literal["defer"] | None = None,
        on_call: CallCallback | None = None,
    ) -> None:
        self.approve = approve
        self.on_call = on_call

    async def run(self, state: RunState, calls: Sequence[PendingCall]) -> Ran:
        """Run ``calls`` (in parallel when there are several)."""
        batch = Ran()
        by_name = {t.name: t for t in state.tools}
        language = state.protocol.language
        prepared: list[tuple[ActionRecord, Tool | None, Any]] = []
        warn: set[int] = set()  # the records of calls repeated up to the limit: warned
        for call in calls:
            record = call.record()
            tool = by_name.get(call.tool)
            validated: Any = None
            if call.error is not None:  # the protocol's verdict first (``final_result``...)
                _fail(record, "invalid_arguments", call.error, language)
            elif tool is None:
                valid = ", ".join(sorted(by_name)) or "(none)"
                unknown = Notice(NoticeCode.UNKNOWN_TOOL, tool=repr(call.tool), valid=valid)
                _fail(record, "unknown_tool", unknown, language)
            else:
                try:
                    validated = tool.check(call.arguments)
                    if isinstance(call.arguments, str):
                        record.arguments = arguments_dict(validated)
                except ToolArgumentsError as exc:
                    _fail(record, "invalid_arguments", exc.notice, language)
            if record.status == "ok" and call.skip is not None:  # held back by the policy
                prepared.append((skipped(call.record(), call.skip, language), None, None))
                continue
            if record.status == "ok":
                key = _call_key(record)
                state.seen[key] += 1
                seen = state.seen[key]
                if seen > state.config.loop_limit:
                    record.status = "skipped"
                    earlier = state.results.get(key)
                    if earlier is not None:  # the same result again, marked as not re-run
                        record.observation = earlier
                        record.error = Notice(NoticeCode.GIVEN_AGAIN)
                    else:
                        again = Notice(
                            NoticeCode.NOT_RUN_AGAIN, tool=call.tool, times=str(seen - 1)
                        )
                        record.observation, record.error = again.text(language), again
                    batch.repeated = True
                elif seen == state.config.loop_limit and seen > 1:
                    warn.add(id(record))
            prepared.append((record, tool, validated))

        runnable = [(r, t, v) for r, t, v in prepared if t is not None and r.status == "ok"]
        if len(runnable) == 1:
            await self._call(state, batch, *runnable[0])
        elif runnable:
            await asyncio.gather(*(self._call(state, batch, r, t, v) for r, t, v in runnable))
        for record, _, _ in prepared:
            if record.status == "ok":
                state.results[_call_key(record)] = record.observation
            if id(record) in warn and record.status == "ok":
                warning = Notice(
                    NoticeCode.REPEAT_WARNING,
                    tool=record.tool,
                    times=str(state.config.loop_limit),
                )
                record.observation += "\n" + warning.text(language)
                record.error = warning
        batch.actions = [r for r, _, _ in prepared]
        return batch

    async def _call(
        self, state: RunState, batch: Ran, record: ActionRecord, tool: Tool, validated: Any
    ) -> None:
        """Run one call; a ``BaseException`` from the tool or the approver (but the run's own
        cancellation) becomes the batch's ``abort``."""
        journal, language = state.journal, state.protocol.language
        try:
            if journal is not None and await self._replayed(state, record, tool):
                return
            if not await self._approved(state, batch, record, tool):
                if journal is not None and record.status == "denied":
                    await journal.done(record)
                return
            if self.on_call is not None:
                try:
                    await call_user(self.on_call, record, deadline=state.deadline_at())
                except DeadlinePassed:
                    late = Notice(NoticeCode.DEADLINE_BEFORE_CALL)
                    _fail(record, "error", late, language)
                    return
                except ThreadsExhausted as exc:
                    state.note(f"on_call was not called: {exc}")
            if state.sinks:
                state.emit(ToolStarted(len(state.steps), record))
            if journal is not None:
                await journal.started(record)  # before the tool: a crash inside it is known
            try:
                await self._invoke(state, record, tool, validated)
                if journal is not None:
                    await journal.done(record)
            finally:
                if state.sinks:
                    state.emit(ToolFinished(len(state.steps), record))
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:  # the run's, not the tool's own
                if record.status == "ok" and not record.observation:
                    interrupted = Notice(NoticeCode.INTERRUPTED, tool=tool.name)
                    _fail(record, "error", interrupted, language)
                raise
            _note_abort(batch, record, tool, exc, language)
        except BaseException as exc:
            if isinstance(exc, Exception):
                raise  # a tool's exceptions are observations already (_invoke); not this one
            _note_abort(batch, record, tool, exc, language)  # raised again by the loop

    @staticmethod
    async def _replayed(state: RunState, record: ActionRecord, tool: Tool) -> bool:
        """A resumed run: a finished call gets its record; one that was running is run again
        only if its tool is idempotent."""
        assert state.journal is not None
        kept = state.journal.finished(record)
        if kept is not None:
            for name in ("arguments", "observation", "status", "error", "duration_s", "exact"):
                setattr(record, name, getattr(kept, name))
            return True
        hints = tool.annotations
        if state.journal.in_flight(record) and not (hints.idempotent or hints.read_only):
            _fail(record, "error", Notice(NoticeCode.MAYBE_RAN), state.protocol.language)
            await state.journal.done(record)
            return True
        return False

    @staticmethod
    def _defer(state: RunState, batch: Ran, record: ActionRecord) -> bool:
        language = state.protocol.language
        if state.journal is None:
            _fail(record, "denied", Notice(NoticeCode.DEFER_NEEDS_STORE), language)
            return False
        skipped(record, Notice(NoticeCode.AWAITING_APPROVAL), language)
        state.journal.defer(record)
        batch.deferred.append(record)
        return False

    async def _approved(
        self, state: RunState, batch: Ran, record: ActionRecord, tool: Tool
    ) -> bool:
        if not tool.requires_approval:
            return True
        language = state.protocol.language
        approve = self.approve
        journal = state.journal
        # A verdict given to agent.resume answers this very call only (store/approvals.py).
        given = journal.approval(record) if journal is not None else None
        if given is not None:
            if not given:
                _fail(record, "denied", Notice(NoticeCode.NOT_APPROVED), language)
            return given
        waited = journal is not None and journal.waited(record)
        if approve == "defer" or (approve is None and waited):
            return self._defer(state, batch, record)  # a call put off waits for its verdict
        if approve is None:
            _fail(record, "denied", Notice(NoticeCode.NO_APPROVER), language)
            return False
        try:
            verdict = await call_user(approve, record, deadline=state.deadline_at())
        except DeadlinePassed as exc:
            late = NoticeCode.APPROVAL_TOO_LATE  # the approver was not asked
            if exc.started:
                log.warning("no approval for %s before the run's deadline", tool.name)
                late = NoticeCode.APPROVAL_TIMED_OUT
            denied = Notice(late)
        except ThreadsExhausted as exc:
            denied = Notice(NoticeCode.APPROVAL_UNASKED, detail=str(exc))
        except Exception as exc:  # a failing approver approves nothing
            log.warning("the approval callback failed for %s: %r", tool.name, exc)
            denied = Notice(NoticeCode.APPROVAL_FAILED, kind=type(exc).__name__)
        else:
            if verdict == "defer":
                return self._defer(state, batch, record)
            if verdict is True:
                return True
            denied = Notice(NoticeCode.NOT_APPROVED)
        _fail(record, "denied", denied, language)
        return False

    async def _invoke(
        self, state: RunState, record: ActionRecord, tool: Tool, validated: Any
    ) -> None:
        cfg = state.config
        timeout = tool.timeout if tool.timeout is not None else cfg.tool_timeout
        if (left := state.remaining()) is not None:
            timeout = max(left if timeout is None else min(timeout, left), 0.001)
        started = time.perf_counter()
        language = state.protocol.language
        try:
            value = await tool.ainvoke(validated, timeout)
            limit = tool.max_observation_chars or cfg.max_observation_chars
            record.observation = render_observation(value, limit=limit, summarize=tool.summarize)
        except DeadlinePassed as exc:
            # Only the engine's own limit: a TimeoutError the tool raised is its own error.
            code, words = NoticeCode.TIMEOUT, {"tool": tool.name, "seconds": f"{timeout:g}"}
            if not exc.started:
                code, words["stuck"] = NoticeCode.NEVER_STARTED, str(stuck_threads())
            elif not tool.is_async:
                code = NoticeCode.TIMEOUT_STILL_RUNNING
                event = (
                    f"{tool.name} overran its {timeout:g}s timeout and was left running "
                    f"({stuck_threads()} sync calls stuck)"
                )
                state.note(event, warn=True)
            _fail(record, "timeout", Notice(code, **words), language)
        except ThreadsExhausted as exc:
            message = Notice(NoticeCode.NO_THREAD, tool=tool.name, detail=str(exc))
            state.note(str(message), warn=True)
            _fail(record, "error", message, language)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            failed = Notice(NoticeCode.TOOL_FAILED, tool=tool.name, error=error)
            _fail(record, "error", failed, language)
        finally:
            record.duration_s = time.perf_counter() - started


def _note_abort(
    batch: Ran, record: ActionRecord, tool: Tool, exc: BaseException, language: str
) -> None:
    aborted = Notice(NoticeCode.ABORTED, tool=tool.name, kind=type(exc).__name__)
    _fail(record, "error", aborted, language)
    if batch.abort is None:
        batch.abort = exc


def _fail(record: ActionRecord, status: Any, message: Notice, language: str) -> None:
    record.status, record.error = status, message
    # an exception's text can hold lone surrogates
    record.observation = valid_unicode(error_observation(message, language))


def skipped(record: ActionRecord, why: Notice, language: str) -> ActionRecord:
    """``record`` as a call held back (not run, and not the model's fault)."""
    record.status, record.error = "skipped", why
    record.observation = skipped_observation(why, language)
    return record


_KEY_JSON: Final = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def _call_key(record: ActionRecord) -> str:
    args = record.arguments
    body = _KEY_JSON.encode(args) if isinstance(args, dict) else args
    return f"{record.tool}\x00{body}"
