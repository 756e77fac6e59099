"""The loop: one loop for every protocol, and the only place where control flow lives.

Where a run goes next (budgets, a forced final answer, failed turns) is :class:`Control`,
written here only. Whatever goes wrong inside a run becomes feedback the model can act on
until the consecutive-error budget runs out (:class:`~react_engine.errors.ErrorBudgetExhausted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Literal

from ..errors import (
    ContextWindowExceeded,
    ErrorBudgetExhausted,
    ModelAPIError,
    ModelRequestError,
    RunAborted,
    StoreError,
)
from ..protocols.base import Protocol, RequestContext
from ..protocols.decision import CallTools, FinalAnswer, FormatError
from ..protocols.limits import READ_ON_LOOP
from ..protocols.output import OutputSpec, output_spec
from ..protocols.policy import decide
from ..protocols.registry import ProtocolOptions, adapt
from ..runtime import DeadlinePassed, ThreadsExhausted, run_blocking
from ..transport.capabilities import RejectedParam
from ..transport.learned import CapabilityCache
from ..transport.rejections import classify_rejection
from ..transport.retries import with_retries
from ..transport.streaming import EmptyStream, Unstreamed, stream_once
from ..transport.wire import mask_url
from ..types import (
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    PendingCall,
    RunResult,
    Step,
)
from ..wording import Notice, NoticeCode
from .events import (
    ActionDecided,
    AnswerGiven,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ReasoningDelta,
    ReplyDiscarded,
    RunNotice,
    StepDone,
    StoppedLive,
    TextDelta,
    Thought,
)
from .execution import Ran, StepCallback, ToolRunner, skipped
from .observations import SHORTENED_LIMIT, shorten_observations
from .state import RUN_EVENT, RunState, call_user

__all__ = ["FINAL_ANSWER_RETRIES", "Control", "Loop", "LoopDeps"]


log = logging.getLogger("react_engine")

FINAL_ANSWER_RETRIES = 1
"""Forced final requests sent again, with feedback, after a reply that is not an answer."""


ForcedBy = Literal["max_steps", "loop", "tool_budget"]
_FORCED_BY: dict[ForcedBy, str] = {
    "max_steps": "after the step budget",
    "loop": "after a loop was detected",
    "tool_budget": "after the tool-call budget was spent",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDeps:
    """What the loop needs from whoever runs it (an Agent, or a test)."""

    runner: ToolRunner = field(default_factory=ToolRunner)
    instructions: str | None = None
    on_step: StepCallback | None = None
    protocol_spec: str | Protocol = "auto"
    """What the user asked for, so that an adaptation chooses among the right protocols."""
    template: str | None = None
    implicit_final_answer: bool = False
    capability_cache: CapabilityCache | None = None


@dataclass(slots=True)
class Control:
    """Where a run goes next: written by the loop only, one per run."""

    output: OutputSpec | None
    action_turns: int = 0
    tool_calls: int = 0
    consecutive_errors: int = 0
    adaptations: int = 0
    force_final: ForcedBy | None = None
    final_retries: int = 0


class Loop:
    """Runs one :class:`RunState` to its result."""

    def __init__(self, deps: LoopDeps) -> None:
        self.deps = deps

    async def run(self, state: RunState) -> RunResult:
        ctl = Control(output_spec(state.config.output_type))
        while True:
            try:
                outcome = await self._turn(state, ctl)
            except (ModelAPIError, StoreError) as exc:  # a store: a commit that failed
                exc.result = state.result(None, "error", error=str(exc))
                raise
            except asyncio.CancelledError as exc:  # the run so far rides on it (Ctrl-C)
                exc.result = state.result(None, "cancelled", error="the run was cancelled")  # type: ignore[attr-defined]
                raise
            if outcome is not None:
                return outcome

    async def _turn(self, state: RunState, ctl: Control) -> RunResult | None:
        """The run's result once it ends; None: ask the model again."""
        cfg = state.config
        left = state.remaining()
        if left is not None and left <= 0:
            return _deadline_stop(state)
        if (stop := _tokens_spent(state)) is not None:
            return stop
        if ctl.force_final is None and ctl.action_turns >= cfg.max_steps:
            ctl.force_final = "max_steps"
        if state.journal is not None:
            state.journal.before_turn(state)  # a resumed run: each reply read as it was
        tool_choice = cfg.tool_choice
        if cfg.reset_tool_choice and ctl.tool_calls > 0 and tool_choice != "none":
            tool_choice = "auto"
        ctx = RequestContext(
            model=state.model_name,
            history=state.history,
            tools=state.tools,
            tool_choice=tool_choice,
            capabilities=state.caps,
            settings=_settings(state, left),
            instructions=self.deps.instructions,
            force_final=ctl.force_final is not None,
            multi_action=cfg.multi_action,
            output=ctl.output,
            memo=state.memo,
        )
        started = time.perf_counter()
        sent = await self._send(state, ctl, ctx)
        if not isinstance(sent, ModelResponse):
            return sent
        return await self._decide(state, ctl, ctx, sent, started)

    async def _send(
        self, state: RunState, ctl: Control, ctx: RequestContext
    ) -> ModelResponse | RunResult | None:
        """One request, with network retries; a refused parameter adapts the run."""
        request = state.protocol.build_request(ctx)
        index = len(state.steps)
        if state.sinks:
            state.emit(ModelCallStarted(index, request, state.protocol.name))
        started = time.perf_counter()
        left = state.remaining()
        scope = asyncio.timeout(None if left is None else max(left, 0.001))  # no task of its own
        try:
            async with scope:
                reply = await self._request(state, ctl, request, index)
        except (TimeoutError, ModelAPIError) as exc:
            if isinstance(exc, TimeoutError) and not scope.expired():
                raise
            state.emit(ModelCallFailed(index, exc))
            if isinstance(exc, TimeoutError):
                return _deadline_stop(state)
            if isinstance(exc, ContextWindowExceeded):
                return self._make_room(state, exc)
            if isinstance(exc, ModelRequestError):  # a parameter the server refused
                kind = classify_rejection(exc.status_code, exc.body or str(exc))
                if kind is not None and self._learn(state, ctl, kind, f"HTTP {exc.status_code}"):
                    return None
            raise
        if state.sinks:
            state.emit(ModelCallFinished(index, reply, time.perf_counter() - started))
        state.usage.add(reply.usage)
        state.last_reply = reply
        return reply

    async def _request(
        self, state: RunState, ctl: Control, request: ModelRequest, index: int
    ) -> ModelResponse:
        """The reply to one request: whole, or streamed (an empty stream: asked again whole)."""
        if state.journal is not None and (saved := state.journal.saved_reply()) is not None:
            return saved  # a resumed run: this reply was committed before the crash
        retry = state.config.retry
        if not state.streaming:
            return await with_retries(retry, state.model.complete, request)

        def on_delta(delta: ModelDelta) -> None:
            if delta.reasoning:
                state.emit(ReasoningDelta(index, delta.reasoning))
            if delta.content:
                state.emit(TextDelta(index, delta.content))

        hooks = (
            on_delta,
            lambda label, chunks: state.emit(StoppedLive(index, label, chunks)),
            lambda reason: state.emit(ReplyDiscarded(index, reason)),
        )
        if not request.tools or state.caps.stream_tools:
            try:
                return await with_retries(retry, stream_once, state.model, request, *hooks)
            except EmptyStream:  # with tools, learn that the server cannot stream those
                cause = "HTTP 200, no chunk"
                if not (request.tools and self._learn(state, ctl, "stream_tools", cause)):
                    event = "the server sent an empty stream; the request was sent again"
                    state.note(f"{event} without streaming", adaptation=True, warn=True)
                    state.usage.requests += 1
        return await with_retries(retry, stream_once, Unstreamed(state.model), request, *hooks)

    async def _decide(
        self,
        state: RunState,
        ctl: Control,
        ctx: RequestContext,
        reply: ModelResponse,
        started: float,
    ) -> RunResult | None:
        # bounded at the edge (protocols.limits); a long reply is read off the event loop
        size = len(reply.content or "") + sum(len(c.arguments) for c in reply.tool_calls)
        decision = (
            decide(state.protocol, reply, ctx)
            if size <= READ_ON_LOOP
            else await run_blocking(decide, state.protocol, reply, ctx)
        )
        if state.journal is not None:
            await state.journal.decided(reply, decision, state.protocol.name)
        step = Step(
            index=len(state.steps),
            kind="action",
            protocol=state.protocol.name,
            text=decision.text,
            thought=decision.thought,
            reasoning=reply.reasoning,
            repairs=list(decision.repairs),
            usage=reply.usage,
            model_time_s=time.perf_counter() - started,
            notices=[
                *state.pending_events,
                *(
                    RunNotice(len(state.steps), e.text(), "reply")
                    for e in [*reply.events, *decision.events]
                ),
            ],
        )
        state.pending_events.clear()
        if state.sinks and decision.thought:
            state.emit(Thought(step.index, decision.thought))
        match decision:
            case FormatError(feedback=feedback):
                step.kind, step.feedback = "format_error", feedback
                await self._record(state, step, started)
                if ctl.force_final is None:
                    _failed_turn(state, ctl)
                    return None
                # One more forced request, with the feedback; then the run ends unanswered.
                if ctl.final_retries < FINAL_ANSWER_RETRIES:
                    ctl.final_retries += 1
                    return None
                when = _FORCED_BY[ctl.force_final]
                message = f"the model did not give a final answer in words {when}"
                if decision.problem:
                    message += f": its last reply was {decision.problem}"
                return state.result(None, ctl.force_final, error=message)
            case FinalAnswer(answer=answer, output=output):
                if state.sinks:
                    state.emit(AnswerGiven(step.index, answer))
                step.kind, step.final_answer = "final", answer
                await self._record(state, step, started)
                return state.result(answer, ctl.force_final or "final_answer", output=output)
            case CallTools(calls=calls):
                if state.sinks:
                    state.emit(ActionDecided(step.index, tuple(calls)))
                return await self._run_calls(state, ctl, step, decision, started)

    async def _run_calls(
        self, state: RunState, ctl: Control, step: Step, decision: CallTools, started: float
    ) -> RunResult | None:
        cfg = state.config
        ctl.action_turns += 1
        limit = cfg.max_calls_per_step
        made = len(decision.calls)
        calls, excess = decision.calls[:limit], decision.calls[limit:]
        if made > limit:
            event = (
                f"{made} tool calls in one reply: the first {limit} ran, "
                f"{made - limit} were not run (max_calls_per_step)"
            )
            step.notices.append(state.note(event, warn=True))
        # The tool-call budget: the first calls within it run (a held-back call is free).
        room = _tools_left(state, ctl)
        over: list[PendingCall] = []
        if room is not None:
            kept: list[PendingCall] = []
            for call in calls:
                if call.skip is not None or room > 0:
                    room -= call.skip is None
                    kept.append(call)
                else:
                    over.append(call)
            calls = kept
        if over:
            event = (
                f"{len(calls) + len(over)} tool calls in one reply: {len(over)} were not run "
                f"(the tool-call budget of {cfg.max_tool_calls} is spent)"
            )
            step.notices.append(state.note(event, warn=True))
        language = state.protocol.language
        ran = await self.deps.runner.run(state, calls) if calls else Ran()
        step.actions = ran.actions
        if ran.deferred:  # the step goes on when the approvals come
            state.deferred = list(ran.deferred)
            waiting = f"{len(ran.deferred)} call(s) await approval"
            return state.result(None, "awaiting_approval", error=waiting)
        if over:  # the notices are worded only for a step that has calls left out
            spent = Notice(NoticeCode.BUDGET_SPENT)
            step.actions += [skipped(c.record(), spent, language) for c in over]
        if excess:
            too_many = Notice(NoticeCode.TOO_MANY, count=str(made), limit=str(limit))
            step.actions += [skipped(c.record(), too_many, language) for c in excess]
        if ran.abort is not None:
            await self._record(state, step, started)
            _abort(state, ran.abort)
        if ran.repeated:
            ctl.force_final = "loop"
        ctl.tool_calls += sum(1 for a in step.actions if a.status != "skipped")
        await self._record(state, step, started)
        if ctl.force_final is None and _tools_left(state, ctl) == 0:
            ctl.force_final = "tool_budget"
        if ctl.force_final in ("loop", "tool_budget"):
            return None
        if (stop := _tokens_spent(state)) is not None:
            return stop
        if all(a.status != "ok" for a in step.actions):
            _failed_turn(state, ctl)
        else:
            ctl.consecutive_errors = 0
        return None

    @staticmethod
    def _make_room(state: RunState, exc: ContextWindowExceeded) -> RunResult | None:
        """The request did not fit the context window: shorten the observations (earlier
        steps' first) and ask again."""
        for keep_latest in (True, False):
            shortened = shorten_observations(state.history, keep_latest=keep_latest)
            if shortened:
                event = (
                    "the request did not fit the model's context window: "
                    f"{shortened} observation(s) shortened to {SHORTENED_LIMIT} characters"
                )
                state.note(event, adaptation=True, warn=True)
                return None
        return state.result(
            None,
            "context_window",
            error="the request does not fit the model's context window, even with every "
            f"observation shortened: {exc.body or exc}",
        )

    def _learn(self, state: RunState, ctl: Control, kind: RejectedParam, cause: str) -> bool:
        """Adapt the run to what the server refused, and remember it; False when nothing is
        left to adapt."""
        if ctl.adaptations >= 4:
            return False
        deps = self.deps
        change = adapt(
            kind,
            current=state.protocol,
            spec=deps.protocol_spec,
            options=ProtocolOptions(state.caps, deps.template, deps.implicit_final_answer),
            model=state.model_name,
            url=mask_url(state.model.base_url),  # the event goes into the trace and the store
        )
        if change is None:
            return False
        ctl.adaptations += 1
        if deps.capability_cache is not None:
            deps.capability_cache.remember(state.model.base_url, state.model_name, **change.learned)
        state.caps = change.capabilities
        if change.protocol is not None:
            state.protocol = change.protocol
            state.protocol_reason = change.protocol_reason or state.protocol_reason
        log.warning("%s (%s)", change.event, cause, extra=RUN_EVENT)
        state.note(change.event, adaptation=True)
        state.usage.requests += 1
        return True

    async def _record(self, state: RunState, step: Step, started: float) -> None:
        step.duration_s = time.perf_counter() - started
        state.steps.append(step)
        state.history.append(step)
        if state.journal is not None:
            await state.journal.step(step)
        if state.sinks:
            state.emit(StepDone(step))
        if self.deps.on_step is not None:
            try:
                await call_user(self.deps.on_step, step, deadline=state.deadline_at())
            except DeadlinePassed:
                state.note("on_step did not return before the run's deadline", warn=True)
            except ThreadsExhausted as exc:
                state.note(f"on_step was not called: {exc}")


# --- budgets: what ends a run, and what its requests are sent with ---------------------------


def _deadline_stop(state: RunState) -> RunResult:
    passed = f"the run's deadline of {state.config.deadline}s has passed"
    return state.result(None, "deadline", error=passed)


def _tokens_spent(state: RunState) -> RunResult | None:
    limit = state.config.max_total_tokens
    if limit is not None and state.usage.total_tokens >= limit:
        return state.result(None, "token_budget", error=f"the token budget of {limit} is spent")
    return None


def _tools_left(state: RunState, ctl: Control) -> int | None:
    limit = state.config.max_tool_calls
    return None if limit is None else max(limit - ctl.tool_calls, 0)


def _failed_turn(state: RunState, ctl: Control) -> None:
    """Count a failed turn: past the budget, the run ends (:class:`ErrorBudgetExhausted`)."""
    ctl.consecutive_errors += 1
    budget = state.config.max_consecutive_errors
    if ctl.consecutive_errors > budget:
        message = f"{ctl.consecutive_errors} consecutive failed turns (budget {budget})"
        raise ErrorBudgetExhausted(
            message,
            result=state.result(None, "error_budget", error=message),
            attempts=ctl.consecutive_errors,
            last_reply=state.last_reply,
        )


def _settings(state: RunState, left: float | None) -> ModelSettings:
    """The request settings, shaped to the model; the request's timeout ends with the
    deadline, as a blocking client's request cannot be cancelled."""
    settings = state.config.settings
    if not state.caps.sampling and (settings.temperature, settings.top_p) != (None, None):
        settings = dataclasses.replace(settings, temperature=None, top_p=None)
    if left is None or (settings.timeout is not None and settings.timeout <= left):
        return settings
    return dataclasses.replace(settings, timeout=max(left, 0.001))


def _abort(state: RunState, exc: BaseException) -> None:
    """End the run after a tool raised a ``BaseException``: ``SystemExit``, ``GeneratorExit``
    and a tool's own ``CancelledError`` become :class:`RunAborted` (a tool has no business
    ending the caller's program); any other is raised as it is, ``exc.result`` on it."""
    message = f"a tool raised {type(exc).__name__}; the run was aborted"
    result = state.result(None, "error", error=message)
    if isinstance(exc, SystemExit | GeneratorExit | asyncio.CancelledError):
        raise RunAborted(message, result=result) from exc
    with contextlib.suppress(AttributeError, TypeError):  # an exception with __slots__
        exc.result = result  # type: ignore[attr-defined]
    raise exc
