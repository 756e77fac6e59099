"""The agent loop: one loop for every protocol.

Each turn asks the protocol for a request, sends it (with network retries), asks the
protocol to read the reply, runs the calls it found, and returns one small outcome:
:class:`RunAgain`, :class:`Finish` or :class:`Stop`. :meth:`Agent._loop` is a ``match``
over those outcomes and the only place where control flow lives.

Everything that can go wrong inside a run becomes something the model can act on (an
unknown tool, arguments that are not JSON or fail validation, a tool that raises or times
out, a reply in the wrong format) until the consecutive-error budget runs out; then the run
stops with :class:`~react_engine.errors.ErrorBudgetExhausted`, which holds the transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import openai

from .capabilities import (
    Capabilities,
    CapabilityCache,
    CapabilityRegistry,
    classify_rejection,
    default_cache,
    default_registry,
    resolve,
)
from .errors import (
    ConfigurationError,
    ErrorBudgetExhausted,
    ModelAPIError,
    ModelRequestError,
)
from .model import ChatModel, OpenAIChatModel, RetryPolicy, complete_with_retries, mask_key
from .observations import render_observation, valid_unicode
from .protocol import Decision, PendingCall, Protocol, RequestContext
from .protocols.function_calling import FunctionCallingProtocol
from .protocols.structured import StructuredOutputProtocol
from .protocols.text import TextReActProtocol
from .tools import Tool, ToolArgumentsError, as_tools
from .types import (
    ActionRecord,
    HistoryItem,
    ModelResponse,
    ModelSettings,
    RunResult,
    Step,
    StopReason,
    ToolChoice,
    Usage,
    UserTurn,
)

__all__ = ["PROTOCOL_NAMES", "Agent", "AgentConfig", "Conversation"]

PROTOCOL_NAMES: tuple[str, ...] = ("auto", "function_calling", "text", "structured")
"""What ``Agent(protocol=...)`` accepts as a name."""

log = logging.getLogger("react_engine")

T = TypeVar("T")

FINAL_ANSWER_RETRIES = 1
"""Forced final requests sent again after a reply that is not an answer (a tool call
written as text, an empty reply): the model gets the feedback and this many more tries."""

ApprovalCallback = Callable[[ActionRecord], "bool | Awaitable[bool]"]
StepCallback = Callable[[Step], "Awaitable[None] | None"]
CallCallback = Callable[[ActionRecord], "Awaitable[None] | None"]


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Limits and behaviour of a run. Every field can be overridden per run."""

    max_steps: int = 10
    """Model turns that may call tools. When they are spent, one last request asks for a
    final answer with tools switched off, so a run that ran long still answers. A reply to
    it that is no answer (a tool call written as text, an empty reply) is fed back once;
    after a second one the run ends with ``answer=None`` and ``error`` saying why."""
    max_tool_calls: int | None = None
    """Tool calls per run, all steps together; past it the run stops (``tool_budget``)."""
    max_total_tokens: int | None = None
    """A cost ceiling: total tokens per run; past it the run stops (``token_budget``)."""
    deadline: float | None = None
    """Wall-clock seconds for the whole run; past it the run stops (``deadline``)."""
    max_consecutive_errors: int = 3
    """Consecutive failed turns (format errors, failing calls) fed back to the model before
    the run gives up with :class:`ErrorBudgetExhausted`. Separate from network retries."""
    loop_limit: int = 3
    """The same tool with the same arguments this many times earns a warning; once more and
    the run is asked for its final answer (``loop``)."""
    max_observation_chars: int | None = 4000
    """Longer observations are truncated with a visible marker (tools can override)."""
    tool_timeout: float | None = 120.0
    """Seconds a tool call may take unless the tool sets its own ``timeout``."""
    tool_choice: ToolChoice = "auto"
    """``"auto"``, ``"required"``, ``"none"`` or a tool name (emulated by the text protocol)."""
    reset_tool_choice: bool = True
    """Once a tool has run, a ``"required"`` or named ``tool_choice`` becomes ``"auto"``, so
    the model can answer with what it got instead of being made to call tools until the
    step budget is spent. ``False`` keeps the choice for the whole run."""
    multi_action: bool = True
    """Text protocol: run every action of a reply (like parallel calls), or only the first."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """Temperature, seed, max_tokens, timeout, extra_body."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Network retries of transient API errors."""


class Agent:
    """A ReAct agent: a model, tools, and a protocol chosen per model.

    ``protocol`` is ``"auto"`` (the capability registry decides, and a server that rejects
    tools switches the run to text), ``"function_calling"``, ``"text"``, ``"structured"``
    (one JSON object per reply), or a :class:`Protocol` instance. The endpoint is
    ``client=`` (an ``openai`` client or any :class:`ChatModel`), else
    ``base_url=``/``api_key=``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Limits are
    :class:`AgentConfig` fields, given as keywords.
    """

    def __init__(
        self,
        model: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        protocol: str | Protocol = "auto",
        instructions: str | None = None,
        client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        template: str | None = None,
        text_model: str | None = None,
        implicit_final_answer: bool = False,
        registry: CapabilityRegistry | None = None,
        capability_cache: CapabilityCache | None = None,
        on_step: StepCallback | None = None,
        on_call: CallCallback | None = None,
        approve: ApprovalCallback | None = None,
        config: AgentConfig | None = None,
        **limits: Any,
    ) -> None:
        name = model or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
        if not name:
            raise ConfigurationError(
                "no model name: pass model=..., or set REACT_ENGINE_MODEL or OPENAI_MODEL"
            )
        self.model = name
        self.tools = as_tools(tools)
        self.instructions = instructions
        self.template = template
        """Text-protocol template (name or path); ``None`` lets the registry choose."""
        self.text_model = text_model
        """The model name to send while the text protocol runs, for endpoints that serve the
        same weights twice: behind a tool-calling template and behind a plain one (the
        embedded local server does). ``None`` sends ``model`` for both protocols."""
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
        try:
            self.config = dataclasses.replace(config or AgentConfig(), **limits)
        except TypeError as exc:
            raise ConfigurationError(f"unknown Agent option: {exc}") from None
        self._check_config(self.config)
        self._protocol_spec = protocol
        if isinstance(protocol, str) and protocol not in PROTOCOL_NAMES:
            raise ConfigurationError(
                f"unknown protocol {protocol!r}: use 'auto', 'function_calling', 'text', "
                "'structured' or a Protocol instance"
            )
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._model_sync, self._model_async = self._connect(client, base_url, self._api_key)
        self.base_url = self._model_async.base_url

    # --- construction -----------------------------------------------------------------------

    @staticmethod
    def _check_config(cfg: AgentConfig) -> None:
        if cfg.max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        if cfg.max_consecutive_errors < 0 or cfg.loop_limit < 1:
            raise ConfigurationError("max_consecutive_errors must be >= 0 and loop_limit >= 1")
        for name in ("max_tool_calls", "max_total_tokens", "deadline"):
            value = getattr(cfg, name)
            if value is not None and value <= 0:
                raise ConfigurationError(f"{name} must be positive")

    @staticmethod
    def _connect(
        client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None,
        base_url: str | None,
        api_key: str | None,
    ) -> tuple[ChatModel, ChatModel]:
        if isinstance(client, ChatModel):
            return client, client
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

    def _text_protocol(self, caps: Capabilities) -> TextReActProtocol:
        return TextReActProtocol(
            template=self.template or caps.text_template,
            implicit_final_answer=self.implicit_final_answer,
        )

    def choose_protocol(self) -> tuple[Protocol, str, Capabilities]:
        caps, why = self.capabilities()
        spec = self._protocol_spec
        if isinstance(spec, Protocol):
            return spec, "explicit", caps
        if spec == "function_calling":
            return FunctionCallingProtocol(), "explicit", caps
        if spec == "text":
            return self._text_protocol(caps), "explicit", caps
        if spec == "structured":
            return StructuredOutputProtocol(), "explicit", caps
        if caps.function_calling:
            return FunctionCallingProtocol(), why, caps
        return self._text_protocol(caps), why, caps

    # --- running ---------------------------------------------------------------------------

    def run(self, question: str, **options: Any) -> RunResult:
        """Answer one question (blocking). See :meth:`arun` for the options."""
        return _run_blocking(self._arun(question, self._model_sync, **options))

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
        self._check_config(cfg)
        if cfg.tool_choice not in ("auto", "required", "none") and cfg.tool_choice not in {
            t.name for t in self.tools
        }:
            raise ConfigurationError(f"tool_choice {cfg.tool_choice!r} names no tool of this agent")
        protocol, reason, caps = self.choose_protocol()
        items = history if history is not None else []
        items.append(UserTurn(question))
        state = _RunState(
            question=question,
            history=items,
            protocol=protocol,
            protocol_reason=reason,
            caps=caps,
            config=cfg,
            model=chat_model,
            model_name=self.model,
        )
        return await self._loop(state)

    async def _loop(self, state: _RunState) -> RunResult:
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
                case Stop(reason=reason, message=message):
                    result = state.result(None, reason, error=message)
                    if reason == "error_budget":
                        raise ErrorBudgetExhausted(
                            message,
                            result=result,
                            attempts=state.consecutive_errors,
                            last_reply=state.last_reply,
                        )
                    return result

    async def _turn(self, state: _RunState) -> Outcome:
        cfg = state.config
        if state.deadline_passed():
            return Stop("deadline", f"the run's deadline of {cfg.deadline}s has passed")
        if cfg.max_total_tokens is not None and state.usage.total_tokens >= cfg.max_total_tokens:
            return Stop("token_budget", f"the token budget of {cfg.max_total_tokens} is spent")
        if state.force_final is None and state.action_turns >= cfg.max_steps:
            state.force_final = "max_steps"

        text_alias = self.text_model if isinstance(state.protocol, TextReActProtocol) else None
        tool_choice = cfg.tool_choice
        if cfg.reset_tool_choice and state.tool_calls > 0 and tool_choice != "none":
            tool_choice = "auto"
        ctx = RequestContext(
            model=text_alias or self.model,
            history=state.history,
            tools=self.tools,
            tool_choice=tool_choice,
            capabilities=state.caps,
            settings=_within_deadline(cfg.settings, state.remaining()),
            instructions=self.instructions,
            force_final=state.force_final is not None,
            multi_action=cfg.multi_action,
        )
        request = state.protocol.build_request(ctx)
        started = time.perf_counter()
        try:
            reply = await state.with_deadline(
                complete_with_retries(state.model, request, cfg.retry)
            )
        except TimeoutError:
            return Stop("deadline", f"the run's deadline of {cfg.deadline}s has passed")
        except ModelRequestError as exc:
            if self._adapt(state, exc):
                return RunAgain()
            raise
        model_time = time.perf_counter() - started
        state.usage.add(reply.usage)
        state.last_reply = reply
        decision = state.protocol.parse_reply(reply, ctx)
        step = Step(
            index=len(state.steps),
            kind="action",
            protocol=state.protocol.name,
            text=decision.text,
            thought=decision.thought,
            repairs=list(decision.repairs),
            usage=reply.usage,
            model_time_s=model_time,
            events=[*state.pending_events, *reply.events, *decision.events],
        )
        state.pending_events.clear()

        if decision.format_error is not None:
            step.kind = "format_error"
            step.feedback = decision.format_error
            await self._record(state, step, started)
            if state.force_final is not None:
                # One more forced request, with the feedback; then the run ends unanswered.
                if state.final_retries < FINAL_ANSWER_RETRIES:
                    state.final_retries += 1
                    return RunAgain()
                return Stop(state.force_final, _no_final_answer(state.force_final, decision))
            return self._count_error(state)

        if decision.final_answer is not None and not decision.calls:
            step.kind = "final"
            step.final_answer = decision.final_answer
            await self._record(state, step, started)
            return Finish(decision.final_answer, state.force_final or "final_answer")

        if state.force_final is not None:
            # The model called tools even though it was told not to: nothing runs.
            step.kind = "format_error"
            step.feedback = "no tool may be called now"
            await self._record(state, step, started)
            return Stop(state.force_final, "the model kept calling tools after the step budget")

        state.action_turns += 1
        if (
            cfg.max_tool_calls is not None
            and state.tool_calls + len(decision.calls) > cfg.max_tool_calls
        ):
            step.actions = [
                _skipped(c, "the run's tool-call budget is spent") for c in decision.calls
            ]
            await self._record(state, step, started)
            return Stop("tool_budget", f"the tool-call budget of {cfg.max_tool_calls} is spent")
        step.actions = await self._execute(state, decision)
        state.tool_calls += sum(1 for a in step.actions if a.status != "skipped")
        await self._record(state, step, started)
        if state.force_final == "loop":
            return RunAgain()
        if cfg.max_total_tokens is not None and state.usage.total_tokens >= cfg.max_total_tokens:
            return Stop("token_budget", f"the token budget of {cfg.max_total_tokens} is spent")
        if all(a.status != "ok" for a in step.actions):
            return self._count_error(state)
        state.consecutive_errors = 0
        return RunAgain()

    def _count_error(self, state: _RunState) -> Outcome:
        state.consecutive_errors += 1
        if state.consecutive_errors > state.config.max_consecutive_errors:
            return Stop(
                "error_budget",
                f"{state.consecutive_errors} consecutive failed turns "
                f"(budget {state.config.max_consecutive_errors})",
            )
        return RunAgain()

    def _adapt(self, state: _RunState, exc: ModelRequestError) -> bool:
        """React to a server that rejects a parameter; True when the turn should be re-sent."""
        kind = classify_rejection(exc.status_code, exc.body or str(exc))
        if kind is None or state.adaptations >= 4:
            return False
        state.adaptations += 1
        cache, url, model = self.capability_cache, self.base_url, self.model
        if kind == "tools":
            if (
                not isinstance(state.protocol, FunctionCallingProtocol)
                or self._protocol_spec != "auto"
            ):
                return False
            cache.remember(url, model, function_calling=False)
            state.caps = dataclasses.replace(state.caps, function_calling=False)
            state.protocol = self._text_protocol(state.caps)
            state.protocol_reason = "fallback: the server rejected tools"
            event = f"fallback: {model} at {url} rejected tools; switched to the text protocol"
        elif kind == "stop":
            if not state.caps.stop:
                return False
            cache.remember(url, model, stop=False)
            state.caps = dataclasses.replace(state.caps, stop=False)
            event = "stop sequences rejected; cutting replies client-side"
        elif kind == "constrained_decoding":
            if not state.caps.constrained_decoding:
                return False
            cache.remember(url, model, constrained_decoding=False)
            state.caps = dataclasses.replace(state.caps, constrained_decoding=False)
            event = (
                f"constrained decoding rejected by {model} at {url}; "
                "sending requests without a grammar or schema"
            )
        elif kind == "tool_choice":
            if not state.caps.tool_choice_required:
                return False
            cache.remember(url, model, tool_choice_required=False)
            state.caps = dataclasses.replace(state.caps, tool_choice_required=False)
            event = "tool_choice rejected; enforcing it client-side"
        else:
            if not state.caps.parallel_tool_calls:
                return False
            cache.remember(url, model, parallel_tool_calls=False)
            state.caps = dataclasses.replace(state.caps, parallel_tool_calls=False)
            event = "parallel_tool_calls rejected"
        log.warning("%s (HTTP %s)", event, exc.status_code)
        state.pending_events.append(event)
        state.events.append(event)
        state.usage.requests += 1
        return True

    async def _record(self, state: _RunState, step: Step, started: float) -> None:
        step.duration_s = time.perf_counter() - started
        state.steps.append(step)
        state.history.append(step)
        if self.on_step is not None:
            outcome = self.on_step(step)
            if inspect.isawaitable(outcome):
                await outcome

    # --- tools ------------------------------------------------------------------------------

    async def _execute(self, state: _RunState, decision: Decision) -> list[ActionRecord]:
        by_name = {t.name: t for t in self.tools}
        prepared: list[tuple[ActionRecord, Tool | None, Any]] = []
        for call in decision.calls:
            record = ActionRecord(
                id=call.id,
                tool=call.tool,
                arguments=call.arguments,
                raw_arguments=call.raw_arguments,
                salvaged=call.salvaged,
            )
            tool = by_name.get(call.tool)
            validated: Any = None
            if tool is None:
                valid = ", ".join(sorted(by_name)) or "(none)"
                _fail(record, "unknown_tool", f"unknown tool {call.tool!r}. Valid tools: {valid}.")
            elif call.error is not None:
                _fail(record, "invalid_arguments", call.error)
            else:
                try:
                    validated = tool.validate(call.arguments)
                    if isinstance(call.arguments, str):
                        record.arguments = validated.model_dump(mode="json", exclude_unset=True)
                except ToolArgumentsError as exc:
                    _fail(record, "invalid_arguments", exc.message)
            if record.status == "ok":
                key = _call_key(record)
                state.repeats[key] += 1
                seen = state.repeats[key]
                if seen > state.config.loop_limit:
                    record.status = "skipped"
                    earlier = state.results.get(key)
                    record.observation = (
                        f"Not run again: {call.tool} was already called {seen - 1} times with "
                        "these arguments."
                        + (f" Its result was: {earlier}\n" if earlier else " ")
                        + "Give your final answer now."
                    )
                    state.force_final = "loop"
                    tool = None
                elif seen == state.config.loop_limit and seen > 1:
                    record.error = "repeated"
            prepared.append((record, tool, validated))

        runnable = [(r, t, v) for r, t, v in prepared if t is not None and r.status == "ok"]
        if len(runnable) == 1:
            await self._call(state, *runnable[0], inline=True)
        elif runnable:
            await asyncio.gather(
                *(self._call(state, r, t, v, inline=False) for r, t, v in runnable)
            )
        for record, _, _ in prepared:
            if record.status == "ok":
                state.results[_call_key(record)] = record.observation
            if record.error == "repeated" and record.status == "ok":
                record.error = None
                record.observation += (
                    f"\n[Warning: you have called {record.tool} with these same arguments "
                    f"{state.config.loop_limit} times. Do not repeat it: use what you have or "
                    "give your final answer.]"
                )
        return [r for r, _, _ in prepared]

    async def _call(
        self, state: _RunState, record: ActionRecord, tool: Tool, validated: Any, *, inline: bool
    ) -> None:
        cfg = state.config
        if tool.requires_approval:
            if self.approve is None:
                _fail(record, "denied", "this tool needs approval and no approver is configured")
                return
            try:
                verdict = self.approve(record)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:  # a failing approver approves nothing
                log.warning("the approval callback failed for %s: %r", tool.name, exc)
                _fail(
                    record,
                    "denied",
                    f"the approval check failed ({type(exc).__name__}), so this call was not run",
                )
                return
            if verdict is not True:
                _fail(record, "denied", "the user did not approve this call")
                return
        if self.on_call is not None:
            announced = self.on_call(record)
            if inspect.isawaitable(announced):
                await announced
        timeout = tool.timeout if tool.timeout is not None else cfg.tool_timeout
        remaining = state.remaining()
        if remaining is not None:
            timeout = remaining if timeout is None else min(timeout, remaining)
        started = time.perf_counter()
        try:
            if inline and not tool.is_async and tool.timeout is None and remaining is None:
                value = tool.invoke_sync(validated)
            elif timeout is not None:
                value = await asyncio.wait_for(tool.ainvoke(validated), timeout)
            else:
                value = await tool.ainvoke(validated)
            limit = tool.max_observation_chars or cfg.max_observation_chars
            record.observation = render_observation(value, limit=limit, summarize=tool.summarize)
        except TimeoutError:
            _fail(record, "timeout", f"{tool.name} did not finish within {timeout:g}s")
        except Exception as exc:
            _fail(record, "error", f"{tool.name} failed: {type(exc).__name__}: {exc}")
        finally:
            record.duration_s = time.perf_counter() - started


# --- outcomes of a turn ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunAgain:
    """Ask the model again (after tool results, a format error or an adaptation)."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The model gave its final answer."""

    answer: str
    reason: StopReason


@dataclass(frozen=True, slots=True)
class Stop:
    """A budget or limit ended the run without a final answer."""

    reason: StopReason
    message: str


Outcome = RunAgain | Finish | Stop


@dataclass(slots=True)
class _RunState:
    question: str
    history: list[HistoryItem]
    protocol: Protocol
    protocol_reason: str
    caps: Capabilities
    config: AgentConfig
    model: ChatModel
    model_name: str
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)
    action_turns: int = 0
    tool_calls: int = 0
    consecutive_errors: int = 0
    adaptations: int = 0
    force_final: Literal["max_steps", "loop"] | None = None
    final_retries: int = 0
    repeats: Counter[str] = field(default_factory=Counter)
    results: dict[str, str] = field(default_factory=dict)
    """The latest observation per (tool, arguments), quoted back when a call repeats."""
    events: list[str] = field(default_factory=list)
    pending_events: list[str] = field(default_factory=list)
    last_reply: ModelResponse | None = None

    def remaining(self) -> float | None:
        if self.config.deadline is None:
            return None
        return self.config.deadline - (time.perf_counter() - self.started)

    def deadline_passed(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    async def with_deadline(self, coro: Coroutine[Any, Any, T]) -> T:
        left = self.remaining()
        if left is None:
            return await coro
        return await asyncio.wait_for(coro, max(left, 0.001))

    def result(self, answer: str | None, reason: StopReason, error: str | None = None) -> RunResult:
        return RunResult(
            question=self.question,
            answer=answer,
            steps=list(self.steps),
            usage=dataclasses.replace(self.usage),
            protocol=self.protocol.name,
            protocol_reason=self.protocol_reason,
            stop_reason=reason,
            model=self.model_name,
            duration_s=time.perf_counter() - self.started,
            error=error,
            events=list(self.events),
        )


def _within_deadline(settings: ModelSettings, left: float | None) -> ModelSettings:
    """Settings whose request timeout ends with the run's deadline.

    A blocking client's request runs in a worker thread that cancelling cannot stop, and
    ``asyncio.run`` waits for that thread: without this bound, ``agent.run(deadline=5)``
    against a server that hangs would return only when the HTTP timeout (600 s by default)
    fires.
    """
    if left is None or (settings.timeout is not None and settings.timeout <= left):
        return settings
    return dataclasses.replace(settings, timeout=max(left, 0.001))


def _no_final_answer(why: Literal["max_steps", "loop"], decision: Decision) -> str:
    """The run's error when the forced final answer never came."""
    when = "after the step budget" if why == "max_steps" else "after a loop was detected"
    message = f"the model did not give a final answer in words {when}"
    return f"{message}: its last reply was {decision.problem}" if decision.problem else message


def _fail(record: ActionRecord, status: Any, message: str) -> None:
    message = valid_unicode(message)  # an exception's text can hold lone surrogates
    record.status = status
    record.error = message
    record.observation = f"Error: {message}"


def _skipped(call: PendingCall, why: str) -> ActionRecord:
    return ActionRecord(
        id=call.id,
        tool=call.tool,
        arguments=call.arguments,
        raw_arguments=call.raw_arguments,
        observation=f"Skipped: {why}.",
        status="skipped",
        error=why,
        salvaged=call.salvaged,
    )


def _call_key(record: ActionRecord) -> str:
    args = record.arguments
    body = json.dumps(args, sort_keys=True, ensure_ascii=False) if isinstance(args, dict) else args
    return f"{record.tool}\x00{body}"


# --- conversations ---------------------------------------------------------------------------


class Conversation:
    """A multi-turn conversation with an agent: each question sees the earlier turns,
    their tool calls and results included. Interrupting a turn keeps what it did."""

    def __init__(self, agent: Agent, history: list[HistoryItem] | None = None) -> None:
        self.agent = agent
        self.history: list[HistoryItem] = history if history is not None else []

    def ask(self, question: str, **options: Any) -> RunResult:
        return _run_blocking(
            self.agent._arun(question, self.agent._model_sync, history=self.history, **options)
        )

    async def aask(self, question: str, **options: Any) -> RunResult:
        return await self.agent.arun(question, history=self.history, **options)

    @property
    def steps(self) -> list[Step]:
        return [item for item in self.history if isinstance(item, Step)]


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block: a run's error gets no RuntimeError context
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="react-engine-run")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
