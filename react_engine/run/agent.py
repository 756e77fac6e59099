"""The :class:`Agent`: a model, tools, and a protocol chosen per model; and its ways to run."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Unpack, overload

from ..errors import ConfigurationError, ModelAPIError
from ..protocols.base import Protocol
from ..protocols.output import FINAL_RESULT, output_spec
from ..protocols.registry import ProtocolOptions, choose, registration
from ..tools.base import Tool
from ..tools.decorator import as_tools
from ..transport.base import ChatModel
from ..transport.capabilities import Capabilities, CapabilityRegistry, default_registry
from ..transport.endpoint import api_key_from, connect
from ..transport.learned import CapabilityCache, default_cache, resolve
from ..transport.openai_model import OpenAIChatModel
from ..transport.wire import mask_key, mask_url
from ..types import HistoryItem, OutputT, RunResult, UserTurn, check_type, describe
from . import durable
from .config import (
    AgentConfig,
    Options,
    RunOptions,
    check_bool,
    tool_list,
    with_options,
)
from .conversation import Conversation
from .journal import open_run_store

# What only a run needs is imported when a run starts (in the methods), to keep
# ``import react_engine`` light (tests/api/test_exports.py checks it).
if TYPE_CHECKING:
    import openai

    from ..tools.mcp import MCPServerHandle
    from .events import Event
    from .execution import ApprovalCallback, CallCallback, StepCallback
    from .journal import Journal, JournalStore
    from .journal import SessionLike as Session
    from .state import RunState

__all__ = ["Agent", "AgentConfig"]

log = logging.getLogger("react_engine")


T = TypeVar("T")


class AgentOptions(Options, total=False):
    """``Agent(...)``'s keywords besides ``model``, ``tools`` and ``output_type``."""

    mcp_servers: Sequence[MCPServerHandle]
    protocol: str | Protocol
    instructions: str | None
    client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None
    base_url: str | None
    api_key: str | None
    template: str | None
    implicit_final_answer: bool
    registry: CapabilityRegistry | None
    capability_cache: CapabilityCache | None
    on_step: StepCallback | None
    on_call: CallCallback | None
    approve: ApprovalCallback | Literal["defer"] | None
    store: JournalStore | str | os.PathLike[str] | None
    tracer_provider: Any
    trace_content: bool | None
    probe: bool | None


class Agent(Generic[OutputT]):
    """A ReAct agent: a model, tools, and a protocol chosen per model.

    ``protocol`` is ``"auto"`` (the capability registry decides), ``"function_calling"``,
    ``"text"``, ``"structured"`` or a :class:`Protocol`. The endpoint is ``client=``, else
    ``base_url=``/``api_key=``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Limits are
    :class:`AgentConfig` fields as keywords (a misspelt one is an ``UnknownOptionError``)."""

    @overload
    def __init__(
        self: Agent[str],
        model: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[T],
        model: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        output_type: type[T],
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(  # an output type that is no class: ``int | None``, ``Literal[...]``...
        self: Agent[Any],
        model: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        output_type: Any,
        **options: Unpack[AgentOptions],
    ) -> None: ...

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
        approve: ApprovalCallback | Literal["defer"] | None = None,
        store: JournalStore | str | os.PathLike[str] | None = None,
        tracer_provider: Any = None,
        trace_content: bool | None = None,
        probe: bool | None = None,
        **limits: Any,
    ) -> None:
        check_type(model, str, "model", "a model name (a str)")
        name = model or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
        if not name:
            raise ConfigurationError(
                "no model name: pass model=..., or set REACT_ENGINE_MODEL or OPENAI_MODEL"
            )
        self.model = name
        from ..tools.mcp import check_servers  # the module only: the MCP SDK loads with a server

        self.tools = as_tools(tool_list(tools))
        self.mcp_servers = check_servers(mcp_servers)
        check_type(instructions, str, "instructions", "a str")
        for option, callback in (
            ("on_step", on_step),
            ("on_call", on_call),
            ("approve", None if approve == "defer" else approve),
        ):
            if callback is not None and not callable(callback):
                raise ConfigurationError(f"{option} must be callable, not {describe(callback)}")
        self.instructions = instructions
        self.template = template
        self.implicit_final_answer = implicit_final_answer
        """Text protocol: take a reply with no label at all as the final answer."""
        self.registry = registry or default_registry()
        self.capability_cache = capability_cache or default_cache()
        self.on_step = on_step
        self.on_call = on_call
        """Called with each approved call just before its tool runs."""
        self.approve = approve
        """Asked before a tool that needs approval runs: a callback returning True, False or
        ``"defer"``; or ``"defer"`` itself (the run stops, to be given to :meth:`resume`)."""
        self.store = open_run_store(store)
        """Where runs are journalled, so that :meth:`resume` can finish one."""
        if approve == "defer" and self.store is None:
            raise ConfigurationError(
                'approve="defer" needs a store to resume from: Agent(store="runs.db")'
            )
        if approve is not None and not self.mcp_servers and not _guarded(self.tools):
            warnings.warn(
                "approve= is set, but no tool of this agent has requires_approval=True, so "
                "the approver will never be asked: set requires_approval=True on the tools "
                "it should guard (@tool(requires_approval=True))",
                UserWarning,
                stacklevel=2,
            )
        self.tracer_provider = tracer_provider
        """An OpenTelemetry ``TracerProvider``; ``None``: the global one; ``False``: no spans."""
        check_bool(trace_content, "trace_content", optional=True)
        self.trace_content = trace_content
        """Put content in the spans (``None``: as ``REACT_ENGINE_TRACE_CONTENT`` says)."""
        self.config = with_options(
            AgentConfig(), limits, what="Agent", agent_options=_AGENT_OPTIONS
        )
        self._protocol_spec = protocol
        check_bool(probe, "probe", optional=True)
        self.probe = probe
        """Under ``protocol="auto"``, probe an endpoint the cache does not know before the
        first run. ``None``: only the agent's own client, a failure logged; ``True``: always,
        a failure fails the run; ``False``: never."""
        if not isinstance(protocol, Protocol) and protocol != "auto":
            registration(protocol)  # an unknown name: ConfigurationError
        check_type(base_url, str, "base_url", "a str")
        if api_key is not None and not isinstance(api_key, str):  # its value is not shown
            raise ConfigurationError(f"api_key must be a str, not {type(api_key).__name__}")
        self._api_key = api_key_from(api_key)
        self._model = self._connect(client, base_url, self._api_key)
        self._own_client = not isinstance(client, ChatModel)  # an endpoint the agent reaches
        self.base_url = self._model.base_url

    # --- construction -----------------------------------------------------------------------

    @staticmethod
    def _connect(
        client: ChatModel | openai.OpenAI | openai.AsyncOpenAI | None,
        base_url: str | None,
        api_key: str | None,
    ) -> ChatModel:
        if isinstance(client, ChatModel):
            return client
        sdk = sys.modules.get("openai")  # imported already if the client is one of its own
        if sdk is not None and isinstance(client, sdk.OpenAI | sdk.AsyncOpenAI):
            return OpenAIChatModel(client)
        if client is not None:
            raise ConfigurationError(
                f"client must be an openai client or a ChatModel, not {type(client).__name__}"
            )
        # One async client for both APIs: ``agent.run()`` drives it on its thread's kept loop.
        return connect(base_url, api_key, asynchronous=True)

    def __repr__(self) -> str:
        return (
            f"Agent(model={self.model!r}, tools={[t.name for t in self.tools]!r}, "
            f"protocol={self._protocol_spec!r}, base_url={mask_url(self.base_url)!r}, "
            f"api_key={mask_key(self._api_key)!r})"
        )

    # --- protocol choice -----------------------------------------------------------------------

    def capabilities(self) -> tuple[Capabilities, str]:
        """What the registry and learned decisions say about this model at this endpoint."""
        return resolve(self.registry, self.capability_cache, self.base_url, self.model)

    def choose_protocol(self) -> tuple[Protocol, str, Capabilities]:
        """The protocol a run starts with, why, and the capabilities it was chosen on."""
        caps, why = self.capabilities()
        options = ProtocolOptions(caps, self.template, self.implicit_final_answer)
        protocol, reason = choose(self._protocol_spec, options, why)
        return protocol, reason, caps

    async def _probe_once(self, timeout: float | None = None) -> None:
        """Probe the endpoint unless the cache already holds what a probe records."""
        if "function_calling" in self.capability_cache.get(self.base_url, self.model):
            return
        from ..transport.probe import aprobe

        try:  # bounded as the run's requests are, not by PROBE_TIMEOUT
            result = await aprobe(self._model, self.model, timeout=timeout)
        except ModelAPIError as exc:
            if self.probe:
                raise
            where = mask_url(self.base_url)
            log.warning("probe of %s at %s failed, not probed: %s", self.model, where, exc)
            return
        log.info("probe of %s at %s: tools %s", self.model, result.base_url, result.tools)
        self.capability_cache.remember(result.base_url, self.model, **result.overrides())

    # --- running ---------------------------------------------------------------------------

    def run(self, question: str, **options: Unpack[RunOptions]) -> RunResult[OutputT]:
        """Answer one question (blocking). See :meth:`arun` for the options."""
        from ..runtime import run_coroutine

        return run_coroutine(self._arun(question, **options))

    async def arun(self, question: str, **options: Unpack[RunOptions]) -> RunResult[OutputT]:
        """Answer one question. ``options`` override :class:`AgentConfig` fields for this
        run; ``history`` is extended in place."""
        return await self._arun(question, **options)

    async def iter(
        self, question: str, **options: Unpack[RunOptions]
    ) -> AsyncGenerator[Event[OutputT], None]:
        """Answer one question, streaming events (:mod:`react_engine.run.events`), the last a
        ``RunDone`` with the :class:`RunResult`; the run's errors are raised from the
        iteration. A ``break`` cancels the run (at once under ``contextlib.aclosing``)."""
        import asyncio

        from .events import RunFailed

        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def run() -> RunResult[Any]:
            try:
                return await self._arun(question, stream=queue.put_nowait, **options)
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

    def run_stream(self, question: str, **options: Unpack[RunOptions]) -> Iterator[Event[OutputT]]:
        """:meth:`iter` for sync code, on an event loop of the iterator's own; a ``break``
        cancels the run. Inside a running event loop it raises :class:`ConfigurationError`."""
        import asyncio

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

    def conversation(self, *, session: Session | None = None) -> Conversation[OutputT]:
        """A multi-turn conversation keeping its history (in ``session``, across processes)."""
        return Conversation(self, session=session)

    async def _arun(
        self,
        question: str,
        *,
        history: list[HistoryItem] | None = None,
        stream: Callable[[Event], None] | None = None,
        session: Session | None = None,
        run_id: str | None = None,
        _journal: Journal | None = None,
        **options: Any,
    ) -> RunResult[Any]:
        if session is not None:
            return await durable.in_session(
                session,
                history,
                lambda items: self._arun(question, history=items, stream=stream, **options),
            )
        entered = time.perf_counter()  # before the imports: a first run must not overshoot
        cfg = (
            with_options(self.config, options, what="run", agent_options=_AGENT_OPTIONS)
            if options
            else self.config
        )
        check_type(question, str, "the question", "a str", optional=False)
        check_type(history, list, "history", "a list")
        check_type(run_id, str, "run_id", "a str")
        from ..tools.mcp import connected_tools
        from .events import RunDone, RunFailed, RunStarted
        from .state import RunState
        from .tracing import run_tracer

        async with connected_tools(self.mcp_servers, self.tools) as tools:
            names = {t.name for t in tools}
            if cfg.tool_choice not in ("auto", "required", "none", *names):
                raise ConfigurationError(
                    f"tool_choice {cfg.tool_choice!r} names no tool of this agent"
                )
            if output_spec(cfg.output_type) is not None and FINAL_RESULT in names:
                raise ConfigurationError(
                    f"a tool is named {FINAL_RESULT!r}, the name of the tool that gives a "
                    "typed final answer (output_type): rename it"
                )
            if self.approve is not None and self.mcp_servers and not _guarded(tools):
                log.warning("approve= is set, but no tool of this run requires approval")
            probes = self.probe if self.probe is not None else self._own_client
            if self._protocol_spec == "auto" and probes:
                await self._probe_once(cfg.settings.timeout)
            protocol, reason, caps = self.choose_protocol()
            items = history if history is not None else []
            journal = _journal
            if journal is None and self.store is not None:
                journal = self.store.journal(run_id)
            if journal is not None:  # recorded once the run is held (durable.journalled)
                journal.eager = callable(self.approve) or bool(self.on_call or self.on_step)
                journal.header = {
                    "question": question,
                    "model": self.model,
                    "protocol": journal.protocol or protocol.name,
                    "history": list(items),
                }
            if journal is not None and journal.protocol is not None:
                # A resumed run: committed replies are read under the protocol they had.
                chosen = ProtocolOptions(caps, self.template, self.implicit_final_answer)
                last = journal.last_protocol()
                if self._protocol_spec == "auto" and last not in (None, protocol.name):
                    protocol, reason = choose(last, chosen, "resumed")
                protocol, reason = journal.resume_on(
                    (protocol, reason), lambda name: choose(name, chosen, "resumed")[0]
                )
            items.append(UserTurn(question))
            state = RunState(
                question=question,
                history=items,
                protocol=protocol,
                protocol_reason=reason,
                caps=caps,
                config=cfg,
                model=self._model,
                model_name=self.model,
                tools=tools,
                sinks=[stream] if stream is not None else [],
                streaming=stream is not None,
                started=entered,
                journal=journal,
            )
            if (tracer := run_tracer(self.tracer_provider, self.trace_content)) is not None:
                state.sinks.append(tracer)
            if cfg.trace is not None:
                from .tracefile import TraceFile

                state.sinks.append(TraceFile(cfg.trace))
            state.emit(RunStarted(question, self.model, protocol.name, reason))
            try:
                result = await self._drive(state)
            except BaseException as exc:
                state.emit(RunFailed(exc))
                raise
            state.emit(RunDone(result))
            return result

    async def _drive(self, state: RunState) -> RunResult[Any]:
        from .execution import ToolRunner
        from .loop import Loop, LoopDeps

        loop = Loop(
            LoopDeps(
                runner=ToolRunner(self.approve, self.on_call),
                instructions=self.instructions,
                on_step=self.on_step,
                protocol_spec=self._protocol_spec,
                template=self.template,
                implicit_final_answer=self.implicit_final_answer,
                capability_cache=self.capability_cache,
            )
        )
        if state.journal is None:
            return await loop.run(state)
        return await durable.journalled(loop, state, state.journal)

    # --- durable runs ------------------------------------------------------------------------

    def resume(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, bool] | None = None,
        **options: Unpack[Options],
    ) -> RunResult[OutputT]:
        """Finish a stored run (blocking): see :meth:`aresume`."""
        from ..runtime import run_coroutine

        return run_coroutine(self.aresume(run_id, approvals=approvals, **options))

    async def aresume(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, bool] | None = None,
        **options: Unpack[Options],
    ) -> RunResult[OutputT]:
        """Finish a stored run: one whose process died, or one awaiting approvals
        (``approvals`` maps call ids to True or False).

        An id that awaits no approval raises :class:`~react_engine.errors.UnknownApprovalError`.
        Committed replies and finished calls are served from the store; a call that was
        running when the process died runs again only if its tool is idempotent.
        ``options`` are :meth:`arun`'s: give the ones the run had.
        """
        return await durable.resumed(
            self.store,
            run_id,
            approvals,
            lambda question, history, journal: self._arun(
                question, history=history, _journal=journal, **options
            ),
        )


def _guarded(tools: Sequence[Tool]) -> bool:
    return any(t.requires_approval for t in tools)


_AGENT_OPTIONS = {"model", "tools", *AgentOptions.__optional_keys__ - Options.__optional_keys__}


def _blocking_events(events: AsyncGenerator[Event, None]) -> Iterator[Event]:
    import asyncio

    with asyncio.Runner() as runner:
        try:
            while True:
                try:
                    yield runner.run(anext(events))
                except StopAsyncIteration:
                    return
        finally:
            runner.run(events.aclose())
