"""One run's state (:class:`RunState`), and how the engine calls a user's callback."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocols.base import Protocol
from ..runtime import DeadlinePassed, run_sync_call
from ..tools.base import is_async_callable
from ..tools.timeouts import within
from ..transport.capabilities import Capabilities
from ..types import ActionRecord, HistoryItem, ModelResponse, RunResult, Step, StopReason, Usage
from .config import AgentConfig
from .events import Event, RunNotice

if TYPE_CHECKING:
    from ..tools.base import Tool
    from ..transport.base import ChatModel
    from .journal import Journal

__all__ = [
    "RUN_EVENT",
    "RunState",
    "call_user",
]

RUN_EVENT: Mapping[str, Any] = {"run_event": True}
"""``extra=`` of a warning that is also one of the run's notices: a program that shows the
notices may leave these log records out."""

log = logging.getLogger("react_engine")


@dataclass(slots=True)
class RunState:
    """Everything one run accumulates; a conversation keeps only the history."""

    question: str
    history: list[HistoryItem]
    protocol: Protocol
    protocol_reason: str
    caps: Capabilities
    config: AgentConfig
    model: ChatModel
    model_name: str
    tools: list[Tool]
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.perf_counter)
    seen: Counter[str] = field(default_factory=Counter)
    """The run's calls by tool and arguments: how often each was made, and (``results``) its
    latest observation."""
    results: dict[str, str] = field(default_factory=dict)
    events: list[RunNotice] = field(default_factory=list)
    pending_events: list[RunNotice] = field(default_factory=list)
    """Adaptations noted since the last step, which go on the next one too."""
    last_reply: ModelResponse | None = None
    sinks: list[Callable[[Event], None]] = field(default_factory=list)
    streaming: bool = False
    journal: Journal | None = None
    deferred: list[ActionRecord] = field(default_factory=list)
    """Calls whose approval was deferred (``RunResult.pending``)."""
    memo: dict[Hashable, Any] = field(default_factory=dict)
    """What the protocol keeps between the run's requests, to render only what is new."""

    def emit(self, event: Event) -> None:
        """The one point where the loop reports what happens; callers check ``if
        state.sinks:`` first, so a run nobody listens to builds no event."""
        for sink in self.sinks:
            sink(event)

    def note(self, message: str, *, adaptation: bool = False, warn: bool = False) -> RunNotice:
        """One of the run's notices (with ``warn``, logged as a warning too); an
        adaptation's also goes on the next step."""
        if warn:
            log.warning("%s", message, extra=RUN_EVENT)
        notice = RunNotice(len(self.steps), message, "adaptation" if adaptation else "run")
        if adaptation:
            self.pending_events.append(notice)
        self.events.append(notice)
        if self.sinks:
            self.emit(notice)
        return notice

    def remaining(self) -> float | None:
        if self.config.deadline is None:
            return None
        return self.config.deadline - (time.perf_counter() - self.started)

    def deadline_at(self) -> float | None:  # a perf_counter instant
        deadline = self.config.deadline
        return None if deadline is None else self.started + deadline

    def result(
        self, answer: str | None, reason: StopReason, error: str | None = None, output: Any = None
    ) -> RunResult:
        return RunResult(
            question=self.question,
            answer=answer,
            output=output,
            steps=list(self.steps),
            usage=dataclasses.replace(self.usage),
            protocol=self.protocol.name,
            protocol_reason=self.protocol_reason,
            stop_reason=reason,
            model=self.model_name,
            duration_s=time.perf_counter() - self.started,
            error=error,
            notices=list(self.events),
            run_id=self.journal.run_id if self.journal is not None else None,
            pending=list(self.deferred),
        )


async def call_user(function: Callable[..., Any], /, *args: Any, deadline: float | None) -> Any:
    """The one way the engine calls a user's callback: ``function(*args)``, awaited if need
    be, by ``deadline`` (a perf_counter instant); a sync one runs on a worker thread."""
    left = None if deadline is None else deadline - time.perf_counter()
    if left is not None and left <= 0:
        raise DeadlinePassed(0.0, started=False)
    if is_async_callable(function):
        outcome = function(*args)
    else:
        outcome = await run_sync_call(function, *args, timeout=left)
    if not inspect.isawaitable(outcome):
        return outcome
    if deadline is None:
        return await outcome
    return await within(outcome, max(deadline - time.perf_counter(), 0.001))
