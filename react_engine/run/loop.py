"""The loop: one loop for every protocol, and the only place where control flow lives.

Each turn checks the run's budgets (:class:`~react_engine.run.state.RunState`), sends one
request (:meth:`Loop._send`, with network retries, streamed when the caller streams, and
the reaction to a server that rejects a parameter), lets the protocol read the reply into
a :data:`~react_engine.protocols.base.Decision`, and acts on it (:meth:`Loop._decide`): run the
calls (:class:`~react_engine.run.execution.ToolRunner`), take the final answer, or send the
format error back. Each turn returns one small outcome (``RunAgain``, ``Finish``,
``Stop``), and :meth:`Loop.run` is a ``match`` over them.

Everything that can go wrong inside a run becomes something the model can act on (an
unknown tool, arguments that are not JSON or fail validation, a tool that raises or times
out, a reply in the wrong format) until the consecutive-error budget runs out; then the run
stops with :class:`~react_engine.errors.ErrorBudgetExhausted`, which holds the transcript.
What happens is reported at one point, :meth:`RunState.emit
<react_engine.run.state.RunState.emit>`, as typed events (:mod:`react_engine.run.events`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..errors import (
    ContextWindowExceeded,
    ErrorBudgetExhausted,
    ModelAPIError,
    ModelRequestError,
)
from ..protocols.base import (
    CallTools,
    Decision,
    FinalAnswer,
    FormatError,
    PendingCall,
    RequestContext,
)
from ..protocols.output import output_spec
from ..protocols.registry import adapt
from ..transport.base import ChatModel
from ..transport.capabilities import RejectedParam
from ..transport.rejections import classify_rejection
from ..transport.retries import complete_with_retries, stream_with_retries
from ..transport.streaming import EmptyStream, Unstreamed
from ..types import ModelDelta, ModelRequest, ModelResponse, RunResult, Step
from ._threads import run_blocking
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
from .execution import ToolRunner, skipped
from .observations import SHORTENED_LIMIT, shorten_observations
from .state import RUN_EVENT, Finish, Outcome, RunAgain, RunState, Stop, no_final_answer

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["FINAL_ANSWER_RETRIES", "Loop"]

log = logging.getLogger("react_engine")

OFF_LOOP_CHARS = 32_000
"""Replies longer than this are read on a worker thread: reading a megabyte of tool-call
markup takes up to a few seconds of Python, which would otherwise stall every other task
on the event loop (the thread yields the interpreter every few milliseconds)."""

FINAL_ANSWER_RETRIES = 1
"""Forced final requests sent again after a reply that is not an answer (a tool call
written as text, an empty reply): the model gets the feedback and this many more tries."""


class Loop:
    """Runs one :class:`RunState` to its result for an agent (its model name, tools,
    instructions, protocol choice, capability cache and callbacks)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def run(self, state: RunState) -> RunResult:
        return await self._loop(state)

    async def _loop(self, state: RunState) -> RunResult:
        while True:
            try:
                outcome = await self._turn(state)
            except ModelAPIError as exc:
                exc.result = state.result(None, "error", error=str(exc))
                raise
            match outcome:
                case RunAgain():
                    continue
                case Finish(answer=answer, reason=reason, output=output):
                    return state.result(answer, reason, output=output)
                case Stop(reason="error_budget", message=message):
                    raise ErrorBudgetExhausted(
                        message,
                        result=state.result(None, "error_budget", error=message),
                        attempts=state.consecutive_errors,
                        last_reply=state.last_reply,
                    )
                case Stop(reason=reason, message=message):
                    return state.result(None, reason, error=message)

    async def _turn(self, state: RunState) -> Outcome:
        if (stop := state.spent()) is not None:
            return stop
        if state.force_final is None and state.action_turns >= state.config.max_steps:
            state.force_final = "max_steps"
        if state.journal is not None:
            state.journal.before_turn(state)  # a resumed run: each reply read as it was
        ctx = self._context(state)
        started = time.perf_counter()
        sent = await self._send(state, ctx)
        if not isinstance(sent, ModelResponse):
            return sent
        return await self._decide(state, ctx, sent, started)

    def _context(self, state: RunState) -> RequestContext:
        cfg = state.config
        tool_choice = cfg.tool_choice
        if cfg.reset_tool_choice and state.tool_calls > 0 and tool_choice != "none":
            tool_choice = "auto"
        return RequestContext(
            model=self.agent.model,
            history=state.history,
            tools=state.tools,
            tool_choice=tool_choice,
            capabilities=state.caps,
            settings=state.settings(),
            instructions=self.agent.instructions,
            force_final=state.force_final is not None,
            multi_action=cfg.multi_action,
            output=output_spec(cfg.output_type),
            memo=state.memo,
        )

    async def _send(self, state: RunState, ctx: RequestContext) -> ModelResponse | Outcome:
        """One request, with network retries; a server's refusal of a parameter the run can
        do without adapts the run and asks for the turn again."""
        request = state.protocol.build_request(ctx)
        index = len(state.steps)
        if state.sinks:
            state.emit(ModelCallStarted(index, request, state.protocol.name))
        started = time.perf_counter()
        try:
            reply = await state.with_deadline(self._request(state, request, index))
        except TimeoutError as exc:
            state.emit(ModelCallFailed(index, exc))
            return state.deadline_stop()
        except ContextWindowExceeded as exc:
            state.emit(ModelCallFailed(index, exc))
            return self._make_room(state, exc)
        except ModelRequestError as exc:
            state.emit(ModelCallFailed(index, exc))
            if self._adapt(state, exc):
                return RunAgain()
            raise
        except ModelAPIError as exc:
            state.emit(ModelCallFailed(index, exc))
            raise
        if state.sinks:
            state.emit(ModelCallFinished(index, reply, time.perf_counter() - started))
        state.usage.add(reply.usage)
        state.last_reply = reply
        return reply

    async def _request(self, state: RunState, request: ModelRequest, index: int) -> ModelResponse:
        """The reply to one request: whole, or streamed (each delta emitted as it comes).

        A server that cannot stream this request (HTTP 200, no chunk) is asked again without
        streaming, and its reply passed on as one delta; with tools, that is learned."""
        if state.journal is not None and (saved := state.journal.saved_reply()) is not None:
            return saved  # a resumed run: this reply was committed before the crash
        if not state.streaming:
            return await complete_with_retries(state.model, request, state.config.retry)

        def on_delta(delta: ModelDelta) -> None:
            if delta.reasoning:
                state.emit(ReasoningDelta(index, delta.reasoning))
            if delta.content:
                state.emit(TextDelta(index, delta.content))

        def on_discard(reason: str) -> None:
            state.emit(ReplyDiscarded(index, reason))

        def on_stop(label: str, chunks: int) -> None:
            state.emit(StoppedLive(index, label, chunks))

        def streamed(model: ChatModel) -> Awaitable[ModelResponse]:
            return stream_with_retries(
                model,
                request,
                state.config.retry,
                on_delta=on_delta,
                on_discard=on_discard,
                on_stop=on_stop,
            )

        if request.tools and not state.caps.stream_tools:
            return await streamed(Unstreamed(state.model))
        try:
            return await streamed(state.model)
        except EmptyStream:
            self._cannot_stream(state, request)
        return await streamed(Unstreamed(state.model))

    def _cannot_stream(self, state: RunState, request: ModelRequest) -> None:
        """The server sent an empty stream: with tools in the request, learn that it cannot
        stream those (``stream_tools``); without, just say so. The request is sent again."""
        if request.tools and self._learn(state, "stream_tools", "HTTP 200, no chunk"):
            return
        event = "the server sent an empty stream; the request was sent again without streaming"
        log.warning("%s", event, extra=RUN_EVENT)
        state.note(event, adaptation=True)
        state.usage.requests += 1

    async def _decide(
        self, state: RunState, ctx: RequestContext, reply: ModelResponse, started: float
    ) -> Outcome:
        """Act on the protocol's reading of ``reply``: one :class:`Step` in the transcript."""
        if len(reply.content or "") > OFF_LOOP_CHARS:  # a long reading must not stall the loop
            decision = await run_blocking(state.protocol.parse_reply, reply, ctx)
        else:
            decision = state.protocol.parse_reply(reply, ctx)
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
                    RunNotice(len(state.steps), e, "reply")
                    for e in [*reply.events, *decision.events]
                ),
            ],
        )
        state.pending_events.clear()
        if state.sinks:
            self._announce(state, step.index, decision)
        match decision:
            case FormatError(feedback=feedback):
                step.kind, step.feedback = "format_error", feedback
                await self._record(state, step, started)
                if state.force_final is None:
                    return state.failed_turn()
                # One more forced request, with the feedback; then the run ends unanswered.
                if state.final_retries < FINAL_ANSWER_RETRIES:
                    state.final_retries += 1
                    return RunAgain()
                return Stop(state.force_final, no_final_answer(state.force_final, decision))
            case FinalAnswer(answer=answer, output=output):
                step.kind, step.final_answer = "final", answer
                await self._record(state, step, started)
                return Finish(answer, state.force_final or "final_answer", output)
            case CallTools():
                return await self._run_calls(state, step, decision, started)

    @staticmethod
    def _announce(state: RunState, index: int, decision: Decision) -> None:
        if decision.thought:
            state.emit(Thought(index, decision.thought))
        match decision:
            case CallTools(calls=calls):
                state.emit(ActionDecided(index, tuple(calls)))
            case FinalAnswer(answer=answer):
                state.emit(AnswerGiven(index, answer))
            case FormatError():
                pass

    async def _run_calls(
        self, state: RunState, step: Step, decision: CallTools, started: float
    ) -> Outcome:
        cfg = state.config
        state.action_turns += 1
        limit = cfg.max_calls_per_step
        calls, excess = decision.calls[:limit], decision.calls[limit:]
        too_many = (
            f"the reply made {len(decision.calls)} tool calls and at most {limit} run per "
            "reply; call it again in a later step if you still need it"
        )
        if excess:
            event = (
                f"{len(decision.calls)} tool calls in one reply: the first {limit} ran, "
                f"{len(excess)} were not run (max_calls_per_step)"
            )
            log.warning("%s", event, extra=RUN_EVENT)
            step.notices.append(state.note(event))
        # The run's tool-call budget: the first calls within it run (a call the policy
        # holds back does not count), the rest are reported as not run, and once it is
        # spent the model is asked for its final answer.
        room = state.tools_left()
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
            log.warning("%s", event, extra=RUN_EVENT)
            step.notices.append(state.note(event))
        spent = "the run's tool-call budget is spent: give your final answer now"
        step.actions = await self.agent._runner.run(state, calls) if calls else []
        if state.deferred:  # the step goes on when the approvals come (agent.resume)
            return Stop("awaiting_approval", f"{len(state.deferred)} call(s) await approval")
        step.actions += [skipped(c, spent) for c in over]
        step.actions += [skipped(c, too_many) for c in excess]
        if state.abort is not None:
            await self._record(state, step, started)
            ToolRunner.abort(state)
        state.tool_calls += sum(1 for a in step.actions if a.status != "skipped")
        await self._record(state, step, started)
        if state.force_final is None and state.tools_left() == 0:
            state.force_final = "tool_budget"
        if state.force_final in ("loop", "tool_budget"):
            return RunAgain()
        if (stop := state.tokens_spent()) is not None:
            return stop
        if all(a.status != "ok" for a in step.actions):
            return state.failed_turn()
        state.consecutive_errors = 0
        return RunAgain()

    @staticmethod
    def _make_room(state: RunState, exc: ContextWindowExceeded) -> Outcome:
        """The request did not fit the model's context window: shorten the observations the
        model has already read (earlier steps' first, then the latest step's) and ask
        again; when nothing is left to shorten, the run ends (``context_window``)."""
        for keep_latest in (True, False):
            shortened = shorten_observations(state.history, keep_latest=keep_latest)
            if shortened:
                event = (
                    "the request did not fit the model's context window: "
                    f"{shortened} observation(s) shortened to {SHORTENED_LIMIT} characters"
                )
                log.warning("%s", event, extra=RUN_EVENT)
                state.note(event, adaptation=True)
                return RunAgain()
        return Stop(
            "context_window",
            "the request does not fit the model's context window, even with every "
            f"observation shortened: {exc.body or exc}",
        )

    def _adapt(self, state: RunState, exc: ModelRequestError) -> bool:
        """React to a server that rejects a parameter (see
        :data:`~react_engine.transport.rejections.REACTIONS`); True when the turn should be
        re-sent."""
        kind = classify_rejection(exc.status_code, exc.body or str(exc))
        return kind is not None and self._learn(state, kind, f"HTTP {exc.status_code}")

    def _learn(self, state: RunState, kind: RejectedParam, cause: str) -> bool:
        """Adapt the run to what the server refused, and remember it for this model at this
        endpoint; False when nothing is left to adapt (the refusal then stands)."""
        if state.adaptations >= 4:
            return False
        change = adapt(
            kind,
            current=state.protocol,
            spec=self.agent._protocol_spec,
            options=self.agent._options(state.caps),
            model=self.agent.model,
            url=self.agent.base_url,
        )
        if change is None:
            return False
        state.adaptations += 1
        self.agent.capability_cache.remember(
            self.agent.base_url, self.agent.model, **change.learned
        )
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
        if self.agent.on_step is not None and not await state.callback(self.agent.on_step, step):
            log.warning("on_step did not return before the run's deadline", extra=RUN_EVENT)
            state.note("on_step did not return before the run's deadline")
