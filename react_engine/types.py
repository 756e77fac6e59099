"""Typed messages, model requests and replies, steps and results.

Everything in the engine speaks these types. Plain ``{"role": ...}`` dicts exist only in
:mod:`react_engine.transport.wire`, the wire format of the ``openai`` SDK.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeGuard

from .errors import ConfigurationError
from .nesting import CUT, MAX_TRACE_DEPTH
from .text import escape_separators
from .wording import Notice, NoticeCode

if TYPE_CHECKING:  # a default for type checkers (PEP 696); at run time a plain TypeVar
    from typing_extensions import TypeVar

    OutputT = TypeVar("OutputT", default=Any)
else:
    from typing import TypeVar

    OutputT = TypeVar("OutputT")

"""The type of a run's final answer (``RunResult[Person]``); bare, it means ``Any``."""

AS_EVENTS: Mapping[str, str] = {"json": "events"}
"""A ``notices`` field's metadata: serialised as their messages under ``"events"``."""


@dataclass(slots=True, frozen=True)
class ToolCall:
    """A tool call on the wire (arguments as JSON text), in a reply (the id may be missing,
    the arguments broken) or sent back in a request (every id set)."""

    id: str | None
    name: str
    arguments: str


@dataclass(slots=True, frozen=True)
class SystemMessage:
    content: str
    role: Literal["system"] = "system"


@dataclass(slots=True, frozen=True)
class UserMessage:
    content: str
    role: Literal["user"] = "user"


@dataclass(slots=True, frozen=True)
class AssistantMessage:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    role: Literal["assistant"] = "assistant"
    reasoning: str | None = None
    """Sent back as ``reasoning_content`` when set (``""`` included): providers in thinking
    mode want it on the tool-call turns of the current question."""


@dataclass(slots=True, frozen=True)
class ToolMessage:
    tool_call_id: str
    name: str
    content: str
    role: Literal["tool"] = "tool"


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage

ToolChoice: TypeAlias = str
"""``"auto"``, ``"required"``, ``"none"``, or the name of one tool."""


@dataclass(slots=True, frozen=True)
class ModelSettings:
    """Sampling settings passed through to the chat API."""

    temperature: float | None = None
    """``None`` leaves the server's default; 0 makes runs repeat on servers that honour it."""
    seed: int | None = None
    """Sent as ``seed`` where given, so runs repeat on servers that support it."""
    max_tokens: int | None = None
    """Upper bound on each reply's length; ``None`` leaves the server's own (a reasoning
    model's thinking counts against it, so a small bound cuts the answer off)."""
    timeout: float | None = None
    """Seconds one request attempt may take in all (a trickling server cannot stretch it);
    ``None`` keeps the client's own timeout (600 s when it has no single number)."""
    extra_body: Mapping[str, Any] | None = None
    """Provider-specific fields sent as they are (e.g. ``{"enable_thinking": False}``)."""
    top_p: float | None = None
    """Nucleus sampling; not sent to a model without sampling (``Capabilities.sampling``)."""

    def __post_init__(self) -> None:
        # Said here, not by the server after a paid request (every way of making settings,
        # dataclasses.replace included, comes through here).
        check_number("temperature", self.temperature, 0.0, integer=False)
        check_number("top_p", self.top_p, 0.0, 1.0, integer=False)
        check_number("max_tokens", self.max_tokens, 1, integer=True)
        check_number("seed", self.seed, None, integer=True)
        check_seconds(self.timeout, "settings.timeout", "the client's own")
        check_type(self.extra_body, Mapping, "extra_body", "a mapping")


def check_number(
    name: str,
    value: Any,
    low: float | None,
    high: float | None = None,
    *,
    integer: bool,
    optional: bool = True,
) -> None:
    """``value`` is an int (or a finite number) from ``low`` to ``high``, or ``None``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        kind = ("an int" if integer else "a number") + (" or None" if optional else "")
        raise ConfigurationError(f"{name} must be {kind}, not {describe(value)}")
    finite = integer or math.isfinite(value)
    if not finite or (low is not None and value < low) or (high is not None and value > high):
        span = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise ConfigurationError(f"{name} must be {span}, not {value!r}")


def is_seconds(value: Any) -> TypeGuard[float]:
    """``value`` is a time limit: a positive, finite number of seconds (a bool is not)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


def check_seconds(value: Any, name: str, none: str = "no limit") -> None:
    """``value`` is ``None`` (``none``) or a time limit (:func:`is_seconds`)."""
    if value is not None and not is_seconds(value):
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds (None for {none}), "
            f"not {describe(value)}"
        )


def describe(value: Any) -> str:
    """A wrong option's value and type, for a configuration error."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def check_type(value: Any, kind: Any, name: str, what: str, *, optional: bool = True) -> None:
    """Raise a :class:`ConfigurationError` ("``name`` must be ``what``") unless ``value`` is
    a ``kind`` (or ``None`` when ``optional``)."""
    if not (value is None and optional) and not isinstance(value, kind):
        raise ConfigurationError(f"{name} must be {what}, not {describe(value)}")


@dataclass(slots=True, frozen=True)
class Constraint:
    """Constrained decoding for one request: ``grammar`` (GBNF), ``json_schema``, or both
    (the grammar is then the schema's own, for servers that take grammars only)."""

    style: str
    """``"llama.cpp"``, ``"vllm"`` or ``"json_schema"``."""
    grammar: str | None = None
    json_schema: Mapping[str, Any] | None = None
    strict: bool = False
    """Ask for strict schema adherence where the server distinguishes (OpenAI)."""


@dataclass(slots=True, frozen=True)
class ModelRequest:
    """One chat completion request, as a protocol builds it."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stop: tuple[str, ...] | None = None
    settings: ModelSettings = ModelSettings()
    constraint: Constraint | None = None
    """Constrained decoding, when the protocol asks for it and the server supports it."""


@dataclass(slots=True)
class Usage:
    """Token counts. ``cached_tokens`` is the part of the prompt the provider served from cache."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0

    def add(self, other: Usage) -> None:
        # A negative count from a server must not lower the sum a token budget checks.
        for count in dataclasses.fields(self):
            added = max(0, getattr(other, count.name))
            setattr(self, count.name, getattr(self, count.name) + added)


@dataclass(slots=True)
class ModelResponse:
    """One chat completion reply, provider-neutral."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    """Separate reasoning text (DeepSeek-R1's ``reasoning_content``), when the API sends it."""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    events: list[Notice] = field(default_factory=list)
    """What was odd about the reply itself (a usage count that was not a count...)."""


@dataclass(slots=True, frozen=True)
class ToolCallChunk:
    """A fragment of one streamed tool call; fragments with the same ``index`` build one."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(slots=True, frozen=True)
class ModelDelta:
    """One piece of a streamed reply; :class:`~react_engine.transport.streaming.ReplyBuilder`
    assembles deltas into the :class:`ModelResponse` a non-streamed call returns."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCallChunk, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    events: tuple[Notice, ...] = ()
    """What was odd about the reply (as :attr:`ModelResponse.events`)."""

    @classmethod
    def whole(cls, reply: ModelResponse) -> ModelDelta:
        """A complete reply as one delta (what a model that cannot stream yields)."""
        return cls(
            content=reply.content,
            reasoning=reply.reasoning,
            tool_calls=tuple(
                ToolCallChunk(i, c.id, c.name, c.arguments) for i, c in enumerate(reply.tool_calls)
            ),
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            model=reply.model,
            events=tuple(reply.events),
        )


@dataclass(slots=True)
class PendingCall:
    """A call read from a reply, before it runs: what every reader produces (native calls,
    :func:`~react_engine.parsing.parse_react`, the salvage, JSON call objects)."""

    id: str | None
    """The provider's call id, ``""`` when it sent none, ``None`` when the format has no
    ids; the policy makes every id unique and non-empty."""
    tool: str
    arguments: dict[str, Any] | str
    """Decoded arguments: a JSON object, or the plain text the model wrote."""
    raw_arguments: str
    """The arguments as the model wrote them (or, salvaged decoded, their JSON text)."""
    error: Notice | None = None
    """Why the call must not run although it was read: it becomes an error observation."""
    salvaged: bool = False
    repairs: list[str] = field(default_factory=list)
    """Every repair that could have changed what this call's arguments are (for a format
    where the call is the whole reply, the reply's too): the policy refuses lossy ones."""
    lossy: list[str] = field(default_factory=list)
    """Those of :attr:`repairs` that guessed a value, set by the policy."""
    cut: bool | Notice | None = None
    """For a reply cut by the length limit: ``True`` when this call's arguments were cut,
    ``False`` when the reply goes on past them, ``None`` when unknown (only complete JSON
    is then trusted). A notice: the reply ends inside a value it never closed; never run."""
    skip: Notice | None = None
    """Why the policy holds this call back although its arguments are fine: recorded as
    ``skipped``, and the model is told why so it can make it in a later step."""
    exact: bool = False
    """Whether :attr:`raw_arguments` decodes, without repair, to :attr:`arguments`: the
    history then sends the model's own text back, byte for byte."""
    format: str = ""
    """For a salvaged call, the model family's format it was written in; else ``""``."""
    span: tuple[int, int] = (0, 0)
    """For a salvaged call, ``text[start:end]`` it occupies in the reply (calls from one
    wrapper tile it); ``(0, 0)`` for other calls."""

    def record(self) -> ActionRecord:
        """This call's :class:`ActionRecord` before it runs."""
        return ActionRecord(
            id=self.id or "",
            tool=self.tool,
            arguments=self.arguments,
            raw_arguments=self.raw_arguments,
            salvaged=self.salvaged,
            repairs=list(self.repairs),
            lossy=list(self.lossy),
            exact=self.exact,
        )

    thought: str | None = None
    """A thought written beside the call in its JSON object (``{"thought": ...}``)."""


@dataclass(slots=True)
class ParsedStep:
    """What :func:`react_engine.parse_react` recovered from one reply."""

    thought: str | None = None
    actions: list[PendingCall] = field(default_factory=list)
    """The actions read (``id`` ``None``, ``raw_arguments`` the input as written)."""
    final_answer: str | None = None
    repairs: list[str] = field(default_factory=list)
    """Codes of the tolerances applied, e.g. ``"fullwidth_colon"``, ``"cut_observation"``."""
    text: str = ""
    """The reply as kept in the transcript: invented observations and what follows cut."""


ActionStatus: TypeAlias = Literal[
    "ok", "error", "unknown_tool", "invalid_arguments", "timeout", "denied", "skipped"
]

StepKind: TypeAlias = Literal["action", "final", "format_error"]

StopReason: TypeAlias = Literal[
    "final_answer",
    "max_steps",
    "deadline",
    "error_budget",
    "tool_budget",
    "token_budget",
    "loop",
    "context_window",
    "cancelled",
    "error",
    "awaiting_approval",
]


@dataclass(slots=True)
class ActionRecord:
    """One tool call in a step, and what came of it."""

    id: str
    tool: str
    arguments: dict[str, Any] | str
    raw_arguments: str
    observation: str = ""
    """Exactly what the model was shown."""
    status: ActionStatus = "ok"
    error: Notice | None = None
    """Why it did not run or failed, or the warning added to its result, as told the model."""
    duration_s: float = 0.0
    salvaged: bool = False
    """True when the call was recovered from reply text instead of native ``tool_calls``."""
    repairs: list[str] = field(default_factory=list)
    """The repairs its arguments' reading took."""
    lossy: list[str] = field(default_factory=list)
    """Those of ``repairs`` that guessed a value: a call with any is never run."""
    exact: bool = False
    """Whether :attr:`raw_arguments` is the exact JSON text of :attr:`arguments`."""

    @property
    def observation_code(self) -> NoticeCode | None:
        """The code of :attr:`error`, the same in every language it is worded in."""
        return None if self.error is None else self.error.code


@dataclass(frozen=True, slots=True)
class RunNotice:
    """Something notable in a run (a protocol fallback, an adaptation, calls not run, an odd
    reply): emitted as it happens and kept on its step and, for the run's own, on the
    result. In traces and stores a notice is its ``message``."""

    step: int
    message: str
    source: Literal["adaptation", "run", "reply"] = "run"
    """``"adaptation"``: the run changed protocol or dropped a parameter the server refused;
    ``"reply"``: about the model's reply or its reading (kept on the step only)."""
    kind: Literal["notice"] = "notice"


@dataclass(slots=True)
class Step:
    """One model turn in a run: the reply, the actions it asked for and their results."""

    index: int
    kind: StepKind
    protocol: str
    text: str | None = None
    """The assistant's reply as kept in the transcript (content for function calling)."""
    thought: str | None = None
    """The visible reasoning: the Thought, text beside native calls, a ``<think>`` block."""
    reasoning: str | None = None
    """The server's separate reasoning (``reasoning_content``), verbatim, to send back."""
    actions: list[ActionRecord] = field(default_factory=list)
    final_answer: str | None = None
    repairs: list[str] = field(default_factory=list)
    feedback: str | None = None
    """For ``format_error`` steps and warnings: the message sent back to the model."""
    usage: Usage = field(default_factory=Usage)
    started_at: float = field(default_factory=time.time)
    duration_s: float = 0.0
    model_time_s: float = 0.0
    notices: list[RunNotice] = field(default_factory=list, metadata=AS_EVENTS)
    """The :class:`RunNotice` events of this step."""


@dataclass(slots=True, frozen=True)
class UserTurn:
    """A user's message in a conversation."""

    content: str


HistoryItem: TypeAlias = UserTurn | Step


@dataclass(slots=True, repr=False)
class RunResult(Generic[OutputT]):
    """Everything a run produced; ``RunResult[Person]`` for ``output_type=Person``."""

    question: str
    answer: str | None
    """The final answer's text (with an ``output_type``, the value's JSON)."""
    steps: list[Step]
    usage: Usage
    protocol: str
    protocol_reason: str
    """Why this protocol ran: ``"explicit"``, ``"registry: <pattern>"``, ``"fallback: ..."``."""
    stop_reason: StopReason
    model: str
    duration_s: float = 0.0
    error: str | None = None
    notices: list[RunNotice] = field(default_factory=list, metadata=AS_EVENTS)
    """The run's own :class:`RunNotice` events."""
    output: OutputT | None = None
    """The final answer as the run's ``output_type`` (the answer text without one); ``None``
    when the run gave no answer."""
    run_id: str | None = None
    """The run's id in the agent's store (``Agent(store=...)``), for ``agent.resume``."""
    pending: list[ActionRecord] = field(default_factory=list)
    """Calls waiting for an approval: ``agent.resume(run_id, approvals={call.id: bool})``."""

    def __repr__(self) -> str:
        """One line: answer (cut at 60 characters), stop reason, error, protocol, steps, tokens."""
        u = self.usage
        error = "" if self.error is None else f", error={_cut(self.error)!r}"
        return (
            f"RunResult(answer={_cut(self.answer)!r}, stop_reason={self.stop_reason!r}"
            f"{error}, protocol={self.protocol!r}, steps={len(self.steps)}, "
            f"usage=<{u.total_tokens} tokens: {u.prompt_tokens} prompt, "
            f"{u.completion_tokens} completion, {u.requests} requests>)"
        )

    @property
    def tool_calls(self) -> list[ActionRecord]:
        return [a for s in self.steps for a in s.actions]

    def trace(self) -> list[dict[str, Any]]:
        """The run as JSON-ready records: a header, one record per step, a footer."""
        return [
            run_record(self.question, self.model, self.protocol, self.protocol_reason),
            *({**to_jsonable(step), "type": "step"} for step in self.steps),
            {
                "type": "result",
                "answer": self.answer,
                "stop_reason": self.stop_reason,
                "usage": to_jsonable(self.usage),
                "duration_s": self.duration_s,
                "error": self.error,
                "events": [notice.message for notice in self.notices],
            },
        ]

    def to_jsonl(self) -> str:
        """The trace as JSON Lines (U+2028, U+2029 and U+0085 escaped: one record, one line)."""
        lines = (json.dumps(r, ensure_ascii=False) for r in self.trace())
        return "".join(escape_separators(line) + "\n" for line in lines)

    def to_html(self) -> str:
        """The run as one self-contained HTML page (by the renderer the package registers)."""
        if not _html_renderer:
            raise ConfigurationError("no HTML renderer is registered: import react_engine")
        return _html_renderer[0](self.trace())

    def write_trace(self, path: str) -> None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(self.to_jsonl())


def run_record(question: str, model: str, protocol: str, reason: str) -> dict[str, Any]:
    """A trace's first record (``"type": "run"``), in :meth:`RunResult.trace` and the file."""
    return {
        "type": "run",
        "question": question,
        "model": model,
        "protocol": protocol,
        "protocol_reason": reason,
    }


_html_renderer: list[Callable[[list[dict[str, Any]]], str]] = []


def set_html_renderer(render: Callable[[list[dict[str, Any]]], str]) -> None:
    """Register what :meth:`RunResult.to_html` renders a run's trace records with."""
    _html_renderer[:] = [render]


def _cut(text: str | None, limit: int = 60) -> str | None:
    return text if text is None or len(text) <= limit else text[: limit - 1].rstrip() + "…"


def to_jsonable(value: Any, *, max_depth: int = MAX_TRACE_DEPTH) -> Any:
    """Turn dataclasses, tuples and mappings into JSON-ready values; nesting deeper than
    ``max_depth`` (or a cycle) becomes ``"<cut: nested too deep>"``, so a trace always
    serialises."""
    record = dataclasses.is_dataclass(value) and not isinstance(value, type)
    if max_depth <= 0 and (record or isinstance(value, Mapping | list | tuple)):
        return CUT
    if record:
        return {
            f.metadata.get("json", f.name): (
                [notice.message for notice in getattr(value, f.name)]
                if "json" in f.metadata  # AS_EVENTS
                else to_jsonable(getattr(value, f.name), max_depth=max_depth - 1)
            )
            for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, max_depth=max_depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v, max_depth=max_depth - 1) for v in value]
    return value
