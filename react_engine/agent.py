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

The agent knows protocols only through the :class:`~react_engine.protocol.Protocol`
interface; which one runs, and how a run adapts to a server's refusals, is decided in
:mod:`react_engine.selection`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
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
from .execution import ApprovalCallback, CallCallback, ToolRunner, skipped
from .mcp import MCPServerHandle, check_servers, connected_tools
from .model import ChatModel, OpenAIChatModel, complete_with_retries, mask_key
from .output import FINAL_RESULT, output_spec
from .protocol import CallTools, FinalAnswer, FormatError, Protocol, RequestContext
from .selection import ProtocolOptions, adapt, choose, protocol_names
from .state import RUN_EVENT, Finish, Outcome, RunAgain, RunState, Stop, no_final_answer
from .tools import Tool, as_tools
from .types import HistoryItem, ModelResponse, RunResult, Step, UserTurn

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
    :class:`AgentConfig` fields, given as keywords; ``output_type`` (one of them) makes the
    final answer typed: ``result.output`` is then the validated value (a pydantic model
    instance, a list...). ``mcp_servers`` (MCP server handles, see :mod:`react_engine.mcp`)
    are connected for each run and their tools added to ``tools``.
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
        ``max_steps``, ``deadline``, ``output_type``...).
        """
        return await self._arun(question, self._model_async, history=history, **options)

    def conversation(self) -> Conversation:
        """A multi-turn conversation that keeps its history, tool calls included."""
        return Conversation(self)

    async def _arun(
        self,
        question: str,
        chat_model: ChatModel,
        *,
        history: list[HistoryItem] | None = None,
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
            if output_spec(cfg.output_type) is not None and FINAL_RESULT in {t.name for t in tools}:
                raise ConfigurationError(
                    f"a tool is named {FINAL_RESULT!r}, the name of the tool that gives a "
                    "typed final answer (output_type): rename it"
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
            )
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
            output=output_spec(cfg.output_type),
        )

    async def _send(self, state: RunState, ctx: RequestContext) -> ModelResponse | Outcome:
        """One request, with network retries; a server's refusal of a parameter the run can
        do without adapts the run and asks for the turn again."""
        request = state.protocol.build_request(ctx)
        try:
            reply = await state.with_deadline(
                complete_with_retries(state.model, request, state.config.retry)
            )
        except TimeoutError:
            return state.deadline_stop()
        except ModelRequestError as exc:
            if self._adapt(state, exc):
                return RunAgain()
            raise
        state.usage.add(reply.usage)
        state.last_reply = reply
        return reply

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
            state.events.append(event)
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
        state.pending_events.append(change.event)
        state.events.append(change.event)
        state.usage.requests += 1
        return True

    async def _record(self, state: RunState, step: Step, started: float) -> None:
        step.duration_s = time.perf_counter() - started
        state.steps.append(step)
        state.history.append(step)
        if self.on_step is not None:
            outcome = self.on_step(step)
            if inspect.isawaitable(outcome):
                await outcome


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
