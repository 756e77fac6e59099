"""What a run reports as it goes: typed events, each a dataclass with a literal ``kind``.

``Agent.iter`` and ``run_stream`` hand them to the caller, the tracer turns them into spans.
In the order a run sees them::

    RunStarted
      ModelCallStarted                      one per request
        TextDelta / ReasoningDelta ...      streamed runs only
        ReplyDiscarded                      a stream failed mid-way and is retried
        StoppedLive                         the client cut the reply at a stop sequence
      ModelCallFinished | ModelCallFailed
      RunNotice                             a fallback, an adaptation, a skipped call...
      Thought
      ActionDecided                         before any tool runs
        ToolStarted / ToolFinished          per call that runs
      AnswerGiven
      StepDone                              the step, as ``on_step`` sees it
    RunDone (the RunResult) | RunFailed

``RunFailed`` goes to the tracer only. ``step`` is the index of the step the event belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeAlias

from ..types import OutputT, RunNotice

if TYPE_CHECKING:
    from ..types import ActionRecord, ModelRequest, ModelResponse, PendingCall, RunResult, Step

__all__ = [
    "ActionDecided",
    "AnswerGiven",
    "Event",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallStarted",
    "ReasoningDelta",
    "ReplyDiscarded",
    "RunDone",
    "RunFailed",
    "RunNotice",
    "RunStarted",
    "StepDone",
    "StoppedLive",
    "TextDelta",
    "Thought",
    "ToolFinished",
    "ToolStarted",
]


@dataclass(frozen=True, slots=True)
class _InStep:
    step: int


@dataclass(frozen=True, slots=True)
class RunStarted:
    question: str
    model: str
    protocol: str
    """The protocol the run starts with (a fallback is a :class:`RunNotice` later)."""
    reason: str = ""
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True, slots=True)
class ModelCallStarted(_InStep):
    request: ModelRequest
    protocol: str
    kind: Literal["model_call_started"] = "model_call_started"


@dataclass(frozen=True, slots=True)
class TextDelta(_InStep):
    """A piece of the reply's text, as the server wrote it (streamed runs only)."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta(_InStep):
    """A piece of the server's separate reasoning (``reasoning_content``)."""

    text: str
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ReplyDiscarded(_InStep):
    """The stream failed after some deltas: forget them, the reply starts again."""

    reason: str
    kind: Literal["reply_discarded"] = "reply_discarded"


@dataclass(frozen=True, slots=True)
class StoppedLive(_InStep):
    """The server wrote past a stop sequence; the client cut the reply there."""

    stop: str
    completion_tokens: int
    kind: Literal["stopped_live"] = "stopped_live"


@dataclass(frozen=True, slots=True)
class ModelCallFinished(_InStep):
    reply: ModelResponse
    duration_s: float
    kind: Literal["model_call_finished"] = "model_call_finished"


@dataclass(frozen=True, slots=True)
class ModelCallFailed(_InStep):
    """A request that failed for good (retries spent, or a refusal the run adapts to)."""

    error: BaseException
    kind: Literal["model_call_failed"] = "model_call_failed"


@dataclass(frozen=True, slots=True)
class Thought(_InStep):
    text: str
    kind: Literal["thought"] = "thought"


@dataclass(frozen=True, slots=True)
class ActionDecided(_InStep):
    """The reply asks for these calls; none has run yet."""

    calls: tuple[PendingCall, ...]
    kind: Literal["action"] = "action"


@dataclass(frozen=True, slots=True)
class ToolStarted(_InStep):
    """A call was approved and its tool starts now."""

    call: ActionRecord
    kind: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True)
class ToolFinished(_InStep):
    """The tool returned, failed or timed out: ``call.observation`` is what the model sees."""

    call: ActionRecord
    kind: Literal["tool_finished"] = "tool_finished"


@dataclass(frozen=True, slots=True)
class AnswerGiven(_InStep):
    answer: str
    kind: Literal["final_answer"] = "final_answer"


@dataclass(frozen=True, slots=True)
class StepDone:
    step: Step
    kind: Literal["step"] = "step"


@dataclass(frozen=True, slots=True)
class RunDone(Generic[OutputT]):
    """The last event of a run that returned: its result."""

    result: RunResult[OutputT]
    kind: Literal["done"] = "done"


@dataclass(frozen=True, slots=True)
class RunFailed:
    """The run raised ``error`` (seen by the tracer; ``Agent.iter`` raises the error)."""

    error: BaseException
    kind: Literal["failed"] = "failed"


Event: TypeAlias = (
    RunStarted
    | ModelCallStarted
    | TextDelta
    | ReasoningDelta
    | ReplyDiscarded
    | StoppedLive
    | ModelCallFinished
    | ModelCallFailed
    | RunNotice
    | Thought
    | ActionDecided
    | ToolStarted
    | ToolFinished
    | AnswerGiven
    | StepDone
    | RunDone[OutputT]
    | RunFailed
)
"""Every event a run emits, generic in the run's output type as :class:`RunDone` is."""
