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
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import openai

from ._threads import ThreadsExhausted, run_sync_call, stuck_threads
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
    RunAborted,
)
from .mcp import MCPServerHandle, check_servers, connected_tools
from .model import ChatModel, OpenAIChatModel, RetryPolicy, complete_with_retries, mask_key
from .observations import render_observation, valid_unicode
from .protocol import Decision, PendingCall, Protocol, RequestContext
from .protocols.function_calling import FunctionCallingProtocol
from .protocols.structured import StructuredOutputProtocol
from .protocols.text import TextReActProtocol
from .tools import Tool, ToolArgumentsError, as_tools, within
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

RUN_EVENT: Mapping[str, Any] = {"run_event": True}
"""``extra=`` of a warning that is also one of the run's ``events`` (``RunResult.events``):
a program that shows the events (the CLI prints them with the steps and the result) leaves
these log records out, not to say the same thing twice."""

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
    max_calls_per_step: int = 16
    """Tool calls run from one reply; the ones beyond it are not run, and each gets an
    observation saying so (a reply with 10,000 parallel calls runs 16)."""
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
        if model is not None and not isinstance(model, str):
            raise ConfigurationError(f"model must be a model name (a str), not {_describe(model)}")
        name = model or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
        if not name:
            raise ConfigurationError(
                "no model name: pass model=..., or set REACT_ENGINE_MODEL or OPENAI_MODEL"
            )
        self.model = name
        self.tools = as_tools(_tool_list(tools))
        self.mcp_servers = check_servers(mcp_servers)
        """Connected when a run starts, closed when it ends; their tools join ``tools``."""
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigurationError(f"instructions must be a str, not {_describe(instructions)}")
        for option, callback in (("on_step", on_step), ("on_call", on_call), ("approve", approve)):
            if callback is not None and not callable(callback):
                raise ConfigurationError(f"{option} must be callable, not {_describe(callback)}")
        if config is not None and not isinstance(config, AgentConfig):
            raise ConfigurationError(f"config must be an AgentConfig, not {_describe(config)}")
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
        if not isinstance(protocol, Protocol) and protocol not in PROTOCOL_NAMES:
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
        """Every option's type and range, so a wrong one fails here with a clear message
        rather than as a foreign ``TypeError`` deep inside a run (or not at all)."""
        _check_int(cfg.max_steps, "max_steps", minimum=1)
        _check_int(cfg.max_consecutive_errors, "max_consecutive_errors", minimum=0)
        _check_int(cfg.loop_limit, "loop_limit", minimum=1)
        _check_int(cfg.max_calls_per_step, "max_calls_per_step", minimum=1)
        for name in ("max_tool_calls", "max_total_tokens", "max_observation_chars"):
            _check_int(getattr(cfg, name), name, minimum=1, optional=True)
        for name in ("deadline", "tool_timeout"):
            _check_seconds(getattr(cfg, name), name)
        if not isinstance(cfg.tool_choice, str):
            raise ConfigurationError(
                f"tool_choice must be 'auto', 'required', 'none' or a tool name, "
                f"not {_describe(cfg.tool_choice)}"
            )
        for name in ("reset_tool_choice", "multi_action"):
            if not isinstance(getattr(cfg, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, not {_describe(getattr(cfg, name))}"
                )
        if not isinstance(cfg.settings, ModelSettings):
            raise ConfigurationError(
                f"settings must be a ModelSettings, not {_describe(cfg.settings)}"
            )
        _check_seconds(cfg.settings.timeout, "settings.timeout")
        if not isinstance(cfg.retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, not {_describe(cfg.retry)}")

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
        if not isinstance(question, str):
            raise ConfigurationError(f"the question must be a str, not {_describe(question)}")
        if history is not None and not isinstance(history, list):
            raise ConfigurationError(f"history must be a list, not {_describe(history)}")
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
            state = _RunState(
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
            tools=state.tools,
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
        calls, excess = decision.calls, []
        if len(calls) > cfg.max_calls_per_step:
            calls, excess = calls[: cfg.max_calls_per_step], calls[cfg.max_calls_per_step :]
            event = (
                f"{len(decision.calls)} tool calls in one reply: the first "
                f"{cfg.max_calls_per_step} ran, {len(excess)} were not run (max_calls_per_step)"
            )
            log.warning("%s", event, extra=RUN_EVENT)
            step.events.append(event)
            state.events.append(event)
        too_many = (
            f"the reply made {len(decision.calls)} tool calls and at most "
            f"{cfg.max_calls_per_step} run per reply; call it again in a later step if you "
            "still need it"
        )
        if cfg.max_tool_calls is not None and state.tool_calls + len(calls) > cfg.max_tool_calls:
            step.actions = [_skipped(c, "the run's tool-call budget is spent") for c in calls]
            step.actions += [_skipped(c, too_many) for c in excess]
            await self._record(state, step, started)
            return Stop("tool_budget", f"the tool-call budget of {cfg.max_tool_calls} is spent")
        if excess:
            decision = dataclasses.replace(decision, calls=calls)
        step.actions = await self._execute(state, decision)
        step.actions += [_skipped(c, too_many) for c in excess]
        if state.abort is not None:
            await self._record(state, step, started)
            self._abort(state)
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
        log.warning("%s (HTTP %s)", event, exc.status_code, extra=RUN_EVENT)
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
        by_name = {t.name: t for t in state.tools}
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
                    if earlier is not None:
                        # The model asked for what it already has: give it the same result
                        # again (the trace says it was not re-run), then ask for the answer.
                        record.observation = earlier
                        record.error = "repeated call: given the earlier identical call's result"
                    else:
                        record.observation = (
                            f"Not run again: {call.tool} was already called {seen - 1} times "
                            "with these arguments. Give your final answer now."
                        )
                    state.force_final = "loop"
                    tool = None
                elif seen == state.config.loop_limit and seen > 1:
                    record.error = "repeated"
            prepared.append((record, tool, validated))

        runnable = [(r, t, v) for r, t, v in prepared if t is not None and r.status == "ok"]
        if len(runnable) == 1:
            await self._call(state, *runnable[0])
        elif runnable:
            await asyncio.gather(*(self._call(state, r, t, v) for r, t, v in runnable))
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
        self, state: _RunState, record: ActionRecord, tool: Tool, validated: Any
    ) -> None:
        """Run one approved call; every way it can go wrong ends in its observation.

        A ``BaseException`` from the tool or the approver (``SystemExit``,
        ``KeyboardInterrupt``, a ``CancelledError`` that is not the run's own cancellation)
        is recorded on the call and kept in ``state.abort``; the turn records its step and
        then ends the run (see :meth:`_abort`)."""
        try:
            if not await self._approved(state, record, tool):
                return
            if self.on_call is not None:
                announced = self.on_call(record)
                if inspect.isawaitable(announced):
                    await announced
            await self._invoke(state, record, tool, validated)
        except asyncio.CancelledError as exc:
            if _being_cancelled():
                if record.status == "ok" and not record.observation:
                    _fail(record, "error", f"{tool.name} was interrupted: the run was cancelled")
                raise
            self._note_abort(state, record, tool, exc)
        except (KeyboardInterrupt, SystemExit, GeneratorExit) as exc:
            self._note_abort(state, record, tool, exc)

    async def _approved(self, state: _RunState, record: ActionRecord, tool: Tool) -> bool:
        """Ask the approver, within the run's deadline. A sync approver runs on a worker
        thread, so a slow one (a person at a prompt) neither stalls the event loop nor
        outlives the deadline."""
        if not tool.requires_approval:
            return True
        approve = self.approve
        if approve is None:
            _fail(record, "denied", "this tool needs approval and no approver is configured")
            return False
        remaining = state.remaining()
        if remaining is not None and remaining <= 0:
            _fail(record, "denied", "the run's deadline passed before the approval was asked")
            return False
        try:
            if inspect.iscoroutinefunction(approve) or inspect.iscoroutinefunction(
                getattr(approve, "__call__", None)  # noqa: B004 - objects with async __call__
            ):
                verdict: Any = approve(record)
            else:
                verdict = await run_sync_call(approve, record, timeout=remaining)
            if inspect.isawaitable(verdict):
                left = state.remaining()
                if left is None:
                    verdict = await verdict
                else:
                    verdict = await within(verdict, max(left, 0.001))
        except TimeoutError:
            log.warning("no approval for %s before the run's deadline", tool.name)
            _fail(
                record,
                "denied",
                "the approval did not come before the run's deadline, so this call was not run",
            )
            return False
        except ThreadsExhausted as exc:
            _fail(record, "denied", f"the approval could not be asked: {exc}")
            return False
        except Exception as exc:  # a failing approver approves nothing
            log.warning("the approval callback failed for %s: %r", tool.name, exc)
            _fail(
                record,
                "denied",
                f"the approval check failed ({type(exc).__name__}), so this call was not run",
            )
            return False
        if verdict is not True:
            _fail(record, "denied", "the user did not approve this call")
            return False
        return True

    async def _invoke(
        self, state: _RunState, record: ActionRecord, tool: Tool, validated: Any
    ) -> None:
        cfg = state.config
        timeout = tool.timeout if tool.timeout is not None else cfg.tool_timeout
        remaining = state.remaining()
        if remaining is not None:
            timeout = max(remaining, 0.001) if timeout is None else min(timeout, remaining)
            timeout = max(timeout, 0.001)
        started = time.perf_counter()
        try:
            value = await tool.ainvoke(validated, timeout)
            limit = tool.max_observation_chars or cfg.max_observation_chars
            record.observation = render_observation(value, limit=limit, summarize=tool.summarize)
        except TimeoutError:
            message = f"{tool.name} did not finish within {timeout:g}s"
            if not tool.is_async:
                message += " (it is still running on its thread: a sync function cannot be stopped)"
                event = (
                    f"{tool.name} overran its {timeout:g}s timeout and was left running "
                    f"({stuck_threads()} sync calls stuck)"
                )
                log.warning("%s", event, extra=RUN_EVENT)
                state.events.append(event)
            _fail(record, "timeout", message)
        except ThreadsExhausted as exc:
            message = (
                f"{tool.name} was not run: {exc}; sync tools will run again once some of them end"
            )
            log.warning("%s", message, extra=RUN_EVENT)
            state.events.append(message)
            _fail(record, "error", message)
        except Exception as exc:
            _fail(record, "error", f"{tool.name} failed: {type(exc).__name__}: {exc}")
        finally:
            record.duration_s = time.perf_counter() - started

    @staticmethod
    def _note_abort(state: _RunState, record: ActionRecord, tool: Tool, exc: BaseException) -> None:
        _fail(record, "error", f"{tool.name} raised {type(exc).__name__}: the run was aborted")
        if state.abort is None:
            state.abort = exc

    @staticmethod
    def _abort(state: _RunState) -> None:
        """End the run after a tool raised a ``BaseException`` (its step is recorded).

        ``KeyboardInterrupt`` is re-raised as it is, so that Ctrl-C still stops the program
        (turning it into an ``Exception`` would let ``except Exception`` swallow it); the
        result so far rides on it as ``exc.result`` (a conversation's history keeps the step
        anyway). Everything else (``SystemExit``, a ``CancelledError`` the tool raised
        itself, ``GeneratorExit``) becomes :class:`RunAborted`, with the original as its
        ``__cause__``: a tool has no business ending the caller's program or task.
        """
        exc = state.abort
        assert exc is not None
        message = f"a tool raised {type(exc).__name__}; the run was aborted"
        result = state.result(None, "error", error=message)
        if isinstance(exc, KeyboardInterrupt):
            exc.result = result  # type: ignore[attr-defined]
            raise exc
        raise RunAborted(message, result=result) from exc


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
    tools: list[Tool]
    """The agent's tools and those of its MCP servers, connected for this run."""
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
    abort: BaseException | None = None
    """A ``BaseException`` a tool raised: the run ends once its step is recorded."""

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


def _being_cancelled() -> bool:
    """Whether the running task itself is being cancelled (not a tool raising
    ``CancelledError`` of its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _describe(value: Any) -> str:
    """A wrong option's value and type, for a configuration error."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _check_int(value: Any, name: str, *, minimum: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or None" if optional else "an int"
        raise ConfigurationError(f"{name} must be {kind}, not {_describe(value)}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, not {value}")


def _check_seconds(value: Any, name: str) -> None:
    """``None`` (no limit) or a positive, finite number of seconds."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(
            f"{name} must be seconds (a number) or None, not {_describe(value)}"
        )
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds (None for no limit), "
            f"not {value!r}"
        )


def _tool_list(tools: Any) -> list[Tool | Callable[..., Any]]:
    """``tools=`` as a list. A single tool (a :class:`Tool` or a function) is taken as a
    one-tool list; anything else must be an iterable of tools or functions."""
    if isinstance(tools, Tool) or (callable(tools) and not isinstance(tools, type)):
        return [tools]
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"tools must be a list of tools or typed functions, not {_describe(tools)}"
        )
    items = list(tools)
    for item in items:
        if not isinstance(item, Tool) and (not callable(item) or isinstance(item, type)):
            raise ConfigurationError(
                f"every tool must be a Tool or a typed function, not {_describe(item)}"
            )
    return items


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
