"""The agent loop: one loop for every protocol.

Each turn checks the run's budgets, sends one request (:meth:`Agent._send`, with network
retries and the reaction to a server that rejects a parameter), lets the protocol read the
reply into a :data:`~react_engine.protocol.Decision`, and acts on it
(:meth:`Agent._decide`): run the calls (:class:`~react_engine.execution.ToolRunner`), take
the final answer, or send the format error back. Each turn returns one small outcome
(:class:`~react_engine.state.RunAgain`, :class:`~react_engine.state.Finish`,
:class:`~react_engine.state.Stop`), and :meth:`Agent._loop`, a ``match`` over them, is the
only place where control flow lives.

Everything that can go wrong inside a run becomes something the model can act on (an
unknown tool, arguments that are not JSON or fail validation, a tool that raises or times
out, a reply in the wrong format) until the consecutive-error budget runs out; then the run
stops with :class:`~react_engine.errors.ErrorBudgetExhausted`, which holds the transcript.

What happens is reported at one point, :meth:`RunState.emit
<react_engine.state.RunState.emit>`, as typed events (:mod:`react_engine.events`):
:meth:`Agent.iter` and :meth:`Agent.run_stream` stream them to the caller (and ask the
model for streamed replies), the OpenTelemetry tracer (:mod:`react_engine.tracing`) turns
them into spans, and a plain :meth:`Agent.arun` with no tracer has no receiver at all.

The agent knows protocols only through the :class:`~react_engine.protocol.Protocol`
interface; which one runs, and how a run adapts to a server's refusals, is decided in
:mod:`react_engine.selection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._threads import run_coroutine
from .capabilities import (
    Capabilities,
    CapabilityCache,
    CapabilityRegistry,
    classify_rejection,
    default_cache,
    default_registry,
    resolve,
)
from .config import AgentConfig, check_config, describe, tool_list
from .errors import ConfigurationError, ErrorBudgetExhausted, ModelAPIError, ModelRequestError
from .events import (
    ActionDecided,
    AnswerGiven,
    Event,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ReasoningDelta,
    ReplyDiscarded,
    RunDone,
    RunFailed,
    RunStarted,
    StepDone,
    StoppedLive,
    TextDelta,
    Thought,
)
from .execution import ApprovalCallback, CallCallback, ToolRunner, skipped
from .mcp import MCPServerHandle, check_servers, connected_tools
from .model import ChatModel, OpenAIChatModel, complete_with_retries, mask_key
from .protocol import CallTools, Decision, FinalAnswer, FormatError, Protocol, RequestContext
from .selection import ProtocolOptions, adapt, choose, protocol_names
from .state import RUN_EVENT, Finish, Outcome, RunAgain, RunState, Stop, no_final_answer
from .streaming import stream_with_retries
from .tools import Tool, as_tools
from .tracing import RunTracer, content_wanted, tracer_for
from .types import (
    HistoryItem,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    RunResult,
    Step,
    UserTurn,
)

if TYPE_CHECKING:
    import openai

__all__ = ["PROTOCOL_NAMES", "RUN_EVENT", "Agent", "AgentConfig", "Conversation"]

PROTOCOL_NAMES: tuple[str, ...] = protocol_names()
"""The names ``Agent(protocol=...)`` accepted when this module was imported (see
:func:`react_engine.selection.protocol_names` for the live list)."""

log = logging.getLogger("react_engine")

T = TypeVar("T")

FINAL_ANSWER_RETRIES = 1
"""Forced final requests sent again after a reply that is not an answer (a tool call
written as text, an empty reply): the model gets the feedback and this many more tries."""

StepCallback = Callable[[Step], "Awaitable[None] | None"]


class Agent:
    """A ReAct agent: a model, tools, and a protocol chosen per model.

    ``protocol`` is ``"auto"`` (the capability registry decides, and a server that rejects
    tools switches the run to text), ``"function_calling"``, ``"text"``, ``"structured"``
    (one JSON object per reply), or a :class:`Protocol` instance. The endpoint is
    ``client=`` (an ``openai`` client or any :class:`ChatModel`), else
    ``base_url=``/``api_key=``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Limits are
    :class:`AgentConfig` fields, given as keywords. ``mcp_servers`` (MCP server handles,
    see :mod:`react_engine.mcp`) are connected for each run and their tools added to
    ``tools``.
    """

    def __init__(
        self,
        model: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        mcp_servers: Sequence[MCPServerHandle] = (),
        protocol: str | Protocol = "auto",
        instructions: str | None = None,
        client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        template: str | None = None,
        implicit_final_answer: bool = False,
        registry: CapabilityRegistry | None = None,
        capability_cache: CapabilityCache | None = None,
        on_step: StepCallback | None = None,
        on_call: CallCallback | None = None,
        approve: ApprovalCallback | None = None,
        tracer_provider: Any = None,
        trace_content: bool | None = None,
        config: AgentConfig | None = None,
        **limits: Any,
    ) -> None:
        if model is not None and not isinstance(model, str):
            raise ConfigurationError(f"model must be a model name (a str), not {describe(model)}")
        name = model or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
        if not name:
            raise ConfigurationError(
                "no model name: pass model=..., or set REACT_ENGINE_MODEL or OPENAI_MODEL"
            )
        self.model = name
        self.tools = as_tools(tool_list(tools))
        self.mcp_servers = check_servers(mcp_servers)
        """Connected when a run starts, closed when it ends; their tools join ``tools``."""
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigurationError(f"instructions must be a str, not {describe(instructions)}")
        for option, callback in (("on_step", on_step), ("on_call", on_call), ("approve", approve)):
            if callback is not None and not callable(callback):
                raise ConfigurationError(f"{option} must be callable, not {describe(callback)}")
        if config is not None and not isinstance(config, AgentConfig):
            raise ConfigurationError(f"config must be an AgentConfig, not {describe(config)}")
        self.instructions = instructions
        self.template = template
        """Text-protocol template (name or path); ``None`` lets the registry choose."""
        self.implicit_final_answer = implicit_final_answer
        """Text protocol: take a reply with no label at all as the final answer (off: it is
        a format error). A :class:`Protocol` instance passed as ``protocol`` keeps its own."""
        self.registry = registry or default_registry()
        self.capability_cache = capability_cache or default_cache()
        self.on_step = on_step
        self.on_call = on_call
        """Called with each approved call just before its tool runs (a step's calls are
        reported again, with their observations, through ``on_step`` once they are done)."""
        self.approve = approve
        self.tracer_provider = tracer_provider
        """An OpenTelemetry ``TracerProvider`` for the runs' spans; ``None``: the global one,
        if the application set one; ``False``: no spans (see :mod:`react_engine.tracing`)."""
        self.trace_content = trace_content
        """Put prompts, replies, tool arguments and results in the spans (``None``: as the
        ``REACT_ENGINE_TRACE_CONTENT`` environment variable says)."""
        self._runner = ToolRunner(approve, on_call)
        try:
            self.config = dataclasses.replace(config or AgentConfig(), **limits)
        except TypeError as exc:
            raise ConfigurationError(f"unknown Agent option: {exc}") from None
        check_config(self.config)
        self._protocol_spec = protocol
        if not isinstance(protocol, Protocol) and protocol not in protocol_names():
            known = ", ".join(repr(n) for n in protocol_names())
            raise ConfigurationError(
                f"unknown protocol {protocol!r}: use one of {known} or a Protocol instance"
            )
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._model_sync, self._model_async = self._connect(client, base_url, self._api_key)
        self.base_url = self._model_async.base_url

    # --- construction -----------------------------------------------------------------------

    @staticmethod
    def _connect(
        client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None,
        base_url: str | None,
        api_key: str | None,
    ) -> tuple[ChatModel, ChatModel]:
        if isinstance(client, ChatModel):
            return client, client
        if client is not None and type(client).__module__.split(".")[0] == "openai":
            import openai  # only when the user passed an openai client: it is imported already

            if isinstance(client, openai.OpenAI | openai.AsyncOpenAI):
                wrapped = OpenAIChatModel(client)
                return wrapped, wrapped
        if client is not None:
            raise ConfigurationError(
                f"client must be an openai client or a ChatModel, not {type(client).__name__}"
            )
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url and not api_key:
            raise ConfigurationError(
                "no endpoint: pass client=, base_url= or api_key=, set OPENAI_BASE_URL / "
                "OPENAI_API_KEY, or start the embedded model with react_engine.local_server()"
            )
        key = api_key or "sk-no-key-required"
        return (
            OpenAIChatModel.connect(url, key, asynchronous=False),
            OpenAIChatModel.connect(url, key, asynchronous=True),
        )

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model!r}, tools={[t.name for t in self.tools]!r}, "
            f"protocol={self._protocol_spec!r}, base_url={self.base_url!r}, "
            f"api_key={mask_key(self._api_key)!r})"
        )

    # --- protocol choice -----------------------------------------------------------------------

    def capabilities(self) -> tuple[Capabilities, str]:
        """What the registry and learned decisions say about this model at this endpoint."""
        return resolve(self.registry, self.capability_cache, self.base_url, self.model)

    def _options(self, caps: Capabilities) -> ProtocolOptions:
        return ProtocolOptions(caps, self.template, self.implicit_final_answer)

    def choose_protocol(self) -> tuple[Protocol, str, Capabilities]:
        """The protocol a run starts with, why, and the capabilities it was chosen on."""
        caps, why = self.capabilities()
        protocol, reason = choose(self._protocol_spec, self._options(caps), why)
        return protocol, reason, caps

    # --- running ---------------------------------------------------------------------------

    def run(self, question: str, **options: Any) -> RunResult:
        """Answer one question (blocking). See :meth:`arun` for the options."""
        return run_coroutine(self._arun(question, self._model_sync, **options))

    async def arun(
        self,
        question: str,
        *,
        history: list[HistoryItem] | None = None,
        **options: Any,
    ) -> RunResult:
        """Answer one question. ``history`` (a conversation's items) is extended in place.

        ``options`` override :class:`AgentConfig` fields for this run (``tool_choice``,
        ``max_steps``, ``deadline``...).
        """
        return await self._arun(question, self._model_async, history=history, **options)

    async def iter(
        self,
        question: str,
        *,
        history: list[HistoryItem] | None = None,
        **options: Any,
    ) -> AsyncGenerator[Event, None]:
        """Answer one question, streaming: each reply's text as it is written, each
        action before its tool runs, each step, and last :class:`~react_engine.events.RunDone`
        with the :class:`RunResult` (see :mod:`react_engine.events`).

        The run's errors are raised from the iteration as :meth:`arun` raises them.
        Leaving the iteration early (``break``) cancels the run; wrap it in
        ``contextlib.aclosing`` for that to happen at once rather than when the generator
        is collected. Options are :meth:`arun`'s.
        """
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def run() -> RunResult:
            try:
                return await self._arun(
                    question,
                    self._model_async,
                    history=history,
                    sinks=[queue.put_nowait],
                    streaming=True,
                    **options,
                )
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(run())
        try:
            while (event := await queue.get()) is not None:
                if not isinstance(event, RunFailed):
                    yield event
            await task  # raises the run's error, if any
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            elif not task.cancelled():
                task.exception()  # retrieved: an error raised above is not "never retrieved"

    def run_stream(self, question: str, **options: Any) -> Iterator[Event]:
        """:meth:`iter` for sync code: a blocking iterator over the run's events.

        The run advances while the caller waits for the next event, on an event loop of
        the iterator's own (closed when the iteration ends, early or not); a ``break``
        cancels the run. Called from inside a running event loop it raises
        :class:`ConfigurationError`: use ``async for event in agent.iter(...)`` there.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigurationError(
                "run_stream() blocks; inside a running event loop use "
                "`async for event in agent.iter(...)`"
            )
        return _blocking_events(self.iter(question, **options))

    def conversation(self) -> Conversation:
        """A multi-turn conversation that keeps its history, tool calls included."""
        return Conversation(self)

    async def _arun(
        self,
        question: str,
        chat_model: ChatModel,
        *,
        history: list[HistoryItem] | None = None,
        sinks: Sequence[Callable[[Event], None]] = (),
        streaming: bool = False,
        **options: Any,
    ) -> RunResult:
        try:
            cfg = dataclasses.replace(self.config, **options) if options else self.config
        except TypeError as exc:
            raise ConfigurationError(f"unknown run option: {exc}") from None
        check_config(cfg)
        if not isinstance(question, str):
            raise ConfigurationError(f"the question must be a str, not {describe(question)}")
        if history is not None and not isinstance(history, list):
            raise ConfigurationError(f"history must be a list, not {describe(history)}")
        async with connected_tools(self.mcp_servers, self.tools) as tools:
            if cfg.tool_choice not in ("auto", "required", "none") and cfg.tool_choice not in {
                t.name for t in tools
            }:
                raise ConfigurationError(
                    f"tool_choice {cfg.tool_choice!r} names no tool of this agent"
                )
            protocol, reason, caps = self.choose_protocol()
            items = history if history is not None else []
            items.append(UserTurn(question))
            state = RunState(
                question=question,
                history=items,
                protocol=protocol,
                protocol_reason=reason,
                caps=caps,
                config=cfg,
                model=chat_model,
                model_name=self.model,
                tools=tools,
                sinks=list(sinks),
                streaming=streaming,
            )
            tracer = tracer_for(self.tracer_provider)
            if tracer is not None:
                state.sinks.append(RunTracer(tracer, content=content_wanted(self.trace_content)))
            if not state.sinks:
                return await self._loop(state)
            state.emit(RunStarted(question, self.model, protocol.name, reason))
            try:
                result = await self._loop(state)
            except BaseException as exc:
                state.emit(RunFailed(exc))
                raise
            state.emit(RunDone(result))
            return result

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
                case Finish(answer=answer, reason=reason):
                    return state.result(answer, reason)
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
            model=self.model,
            history=state.history,
            tools=state.tools,
            tool_choice=tool_choice,
            capabilities=state.caps,
            settings=state.settings(),
            instructions=self.instructions,
            force_final=state.force_final is not None,
            multi_action=cfg.multi_action,
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

    @staticmethod
    async def _request(state: RunState, request: ModelRequest, index: int) -> ModelResponse:
        """The reply to one request: whole, or streamed (each delta emitted as it comes)."""
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

        return await stream_with_retries(
            state.model,
            request,
            state.config.retry,
            on_delta=on_delta,
            on_discard=on_discard,
            on_stop=on_stop,
        )

    async def _decide(
        self, state: RunState, ctx: RequestContext, reply: ModelResponse, started: float
    ) -> Outcome:
        """Act on the protocol's reading of ``reply``: one :class:`Step` in the transcript."""
        decision = state.protocol.parse_reply(reply, ctx)
        step = Step(
            index=len(state.steps),
            kind="action",
            protocol=state.protocol.name,
            text=decision.text,
            thought=decision.thought,
            repairs=list(decision.repairs),
            usage=reply.usage,
            model_time_s=time.perf_counter() - started,
            events=[*state.pending_events, *reply.events, *decision.events],
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
            case FinalAnswer(answer=answer):
                step.kind, step.final_answer = "final", answer
                await self._record(state, step, started)
                return Finish(answer, state.force_final or "final_answer")
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
            step.events.append(event)
            state.note(event)
        if (stop := state.tools_spent(len(calls))) is not None:
            step.actions = [skipped(c, "the run's tool-call budget is spent") for c in calls]
            step.actions += [skipped(c, too_many) for c in excess]
            await self._record(state, step, started)
            return stop
        step.actions = await self._runner.run(state, calls)
        step.actions += [skipped(c, too_many) for c in excess]
        if state.abort is not None:
            await self._record(state, step, started)
            ToolRunner.abort(state)
        state.tool_calls += sum(1 for a in step.actions if a.status != "skipped")
        await self._record(state, step, started)
        if state.force_final == "loop":
            return RunAgain()
        if (stop := state.tokens_spent()) is not None:
            return stop
        if all(a.status != "ok" for a in step.actions):
            return state.failed_turn()
        state.consecutive_errors = 0
        return RunAgain()

    def _adapt(self, state: RunState, exc: ModelRequestError) -> bool:
        """React to a server that rejects a parameter (see
        :data:`~react_engine.selection.REACTIONS`); True when the turn should be re-sent."""
        kind = classify_rejection(exc.status_code, exc.body or str(exc))
        if kind is None or state.adaptations >= 4:
            return False
        change = adapt(
            kind,
            current=state.protocol,
            spec=self._protocol_spec,
            options=self._options(state.caps),
            model=self.model,
            url=self.base_url,
        )
        if change is None:
            return False
        state.adaptations += 1
        self.capability_cache.remember(self.base_url, self.model, **change.learned)
        state.caps = change.capabilities
        if change.protocol is not None:
            state.protocol = change.protocol
            state.protocol_reason = change.protocol_reason or state.protocol_reason
        log.warning("%s (HTTP %s)", change.event, exc.status_code, extra=RUN_EVENT)
        state.note(change.event, adaptation=True)
        state.usage.requests += 1
        return True

    async def _record(self, state: RunState, step: Step, started: float) -> None:
        step.duration_s = time.perf_counter() - started
        state.steps.append(step)
        state.history.append(step)
        state.emit(StepDone(step))
        if self.on_step is not None:
            outcome = self.on_step(step)
            if inspect.isawaitable(outcome):
                await outcome


def _blocking_events(events: AsyncGenerator[Event, None]) -> Iterator[Event]:
    with asyncio.Runner() as runner:
        try:
            while True:
                try:
                    yield runner.run(anext(events))
                except StopAsyncIteration:
                    return
        finally:
            runner.run(events.aclose())


# --- conversations ---------------------------------------------------------------------------


class Conversation:
    """A multi-turn conversation with an agent: each question sees the earlier turns,
    their tool calls and results included. Interrupting a turn keeps what it did."""

    def __init__(self, agent: Agent, history: list[HistoryItem] | None = None) -> None:
        self.agent = agent
        self.history: list[HistoryItem] = history if history is not None else []

    def ask(self, question: str, **options: Any) -> RunResult:
        return run_coroutine(
            self.agent._arun(question, self.agent._model_sync, history=self.history, **options)
        )

    async def aask(self, question: str, **options: Any) -> RunResult:
        return await self.agent.arun(question, history=self.history, **options)

    @property
    def steps(self) -> list[Step]:
        return [item for item in self.history if isinstance(item, Step)]
