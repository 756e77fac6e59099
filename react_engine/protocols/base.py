"""The ``Protocol`` seam: how one agent loop talks to models that differ in how they call tools.

A protocol owns everything that varies between ways of calling tools, and nothing else:

* :meth:`Protocol.build_request` renders the protocol-neutral history (user turns and
  :class:`~react_engine.types.Step` records) into one chat request;
* :meth:`Protocol.read_reply` reads the model's reply in the protocol's own format into a
  :data:`Decision`: tools to call (:class:`CallTools`), a :class:`FinalAnswer`, or a
  :class:`FormatError` to send back to the model.

What every protocol must enforce the same way (``tool_choice``, a reply cut by the length
limit, call ids, the server's reasoning kept apart) is written once, in
:mod:`react_engine.protocols.policy`, and applied by :meth:`Protocol.parse_reply`; a protocol words
the feedback in its own format through :meth:`Protocol.reject`.

Because the history is neutral, a conversation can switch protocol between requests (a
run-time fallback, or a new model between turns): the next protocol renders the same
history its own way. The loop (:mod:`react_engine.run.loop`) knows nothing of prompts or
message shapes, and a protocol knows nothing of transport, retries or tool execution.

A new protocol is one module with one class deriving from :class:`Protocol`, passed as a
value (``Agent(protocol=MyProtocol())``) or registered by name with
:func:`react_engine.protocols.registry.register`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from ..tools._nesting import TOO_DEEP, too_deep
from ..types import (
    HistoryItem,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolChoice,
)

if TYPE_CHECKING:
    from ..tools.base import Tool
    from ..transport.capabilities import Capabilities
    from .output import OutputSpec

__all__ = [
    "CallTools",
    "Decision",
    "FinalAnswer",
    "FormatError",
    "MultiAction",
    "PendingCall",
    "Protocol",
    "Refusal",
    "RequestContext",
]

T = TypeVar("T")

MultiAction: TypeAlias = Literal["independent", "first", "all"]
"""Which of a reply's several calls run (:attr:`AgentConfig.multi_action
<react_engine.run.config.AgentConfig.multi_action>`, applied by
:mod:`react_engine.protocols.policy`): ``"independent"`` the read-only ones and the first
other one, ``"first"`` the first one only, ``"all"`` every one. In every mode a later call
whose arguments hold a placeholder (blind) is not run."""


@dataclass(slots=True)
class RequestContext:
    """What a protocol needs to build one request and read its reply."""

    model: str
    history: Sequence[HistoryItem]
    tools: Sequence[Tool]
    tool_choice: ToolChoice
    capabilities: Capabilities
    settings: ModelSettings = field(default_factory=ModelSettings)
    instructions: str | None = None
    """The user's system prompt: what the agent is for. The protocol adds its own format."""
    force_final: bool = False
    """Ask for a final answer now (step budget spent, loop detected): no more tool calls."""
    multi_action: MultiAction | bool = "independent"
    """Which of a reply's several calls run (see :data:`MultiAction`); the policy applies
    it to every protocol. ``True`` and ``False`` are the old spellings of ``"all"`` and
    ``"first"``."""
    output: OutputSpec | None = None
    """The run's ``output_type``: the final answer must be JSON valid for it (``None``: any
    text). The protocol shows its schema; the policy validates the answer."""
    memo: dict[Hashable, Any] = field(default_factory=dict)
    """What a protocol keeps between the requests of one run (the loop passes every request
    of a run the same dict): see :meth:`once`."""

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def once(self, owners: tuple[object, ...], key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per run for ``owners`` and ``key``, then kept.

        For what a run does not change, so that each request does not redo it: the system
        prompt (``owners`` the template, ``key`` what else it is made of) or the messages
        of a step already in the history (``owners`` the step and the protocol, ``key`` any
        flag they depend on). ``owners`` are matched by identity (they need not be
        hashable) and held for the run, so that no other object takes their place."""
        slot = (*map(id, owners), key)
        hit = self.memo.get(slot)
        if hit is not None and all(a is b for a, b in zip(hit[0], owners, strict=True)):
            value: T = hit[1]
            return value
        value = compute()
        self.memo[slot] = (owners, value)
        return value


@dataclass(slots=True)
class PendingCall:
    """A call read from a reply, before it runs (it becomes an
    :class:`~react_engine.types.ActionRecord` once it has run or been refused)."""

    id: str | None
    """The provider's call id, ``""`` when it sent none, ``None`` when the format has no
    ids (text formats, salvaged calls). The policy makes every id unique and non-empty."""
    tool: str
    arguments: dict[str, Any] | str
    """Decoded arguments: a JSON object, or the plain text the model wrote."""
    raw_arguments: str
    error: str | None = None
    """Why the arguments could not be decoded (the call then becomes an error observation)."""
    salvaged: bool = False
    repairs: list[str] = field(default_factory=list)
    """The repairs the reading of this call took: its arguments, and for a format where the
    call is the whole reply (structured), the reply around them. The policy refuses a call
    with any lossy one (:mod:`react_engine.parsing.repairs`), so a protocol reports every
    repair that could have changed what this call's arguments are."""
    lossy: list[str] = field(default_factory=list)
    """Those of :attr:`repairs` that guessed a value, set by the policy."""
    cut: bool | None = None
    """The protocol's reading of a reply cut by the length limit: ``True`` when this call's
    arguments were cut, ``False`` when the reply is known to go on past them, ``None`` when
    the protocol cannot tell (the policy then trusts only arguments that are complete JSON
    as they stand)."""
    skip: str | None = None
    """Why the policy does not run this call although its arguments are fine (a blind
    later call, a second call with effects in one reply): the call is recorded as
    ``skipped`` and the model is told why, so that it can make it in a later step."""


class Refusal(str):
    """Why a reply is refused: a clause in English, as every protocol may send it, with a
    ``code`` and ``values`` by which a prompt template words it in its own language (its
    ``error_<code>`` text, see :meth:`Protocol.feedback`). A plain ``str`` everywhere else."""

    code: str
    values: dict[str, str]

    def __new__(cls, code: str, text: str, /, **values: str) -> Refusal:
        refusal = super().__new__(cls, text)
        refusal.code = code
        refusal.values = values
        return refusal


@dataclass(slots=True, kw_only=True)
class _Reading:
    text: str | None
    """The reply as it stays in the transcript."""
    thought: str | None = None
    repairs: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class CallTools(_Reading):
    """The reply asks for tool calls (at least one)."""

    calls: list[PendingCall]


@dataclass(slots=True, kw_only=True)
class FinalAnswer(_Reading):
    """The reply is the final answer."""

    answer: str
    output: Any = None
    """The answer as the run's ``output_type``, set by the policy once it validates."""


@dataclass(slots=True, kw_only=True)
class FormatError(_Reading):
    """The reply cannot be used; ``feedback`` tells the model what to write instead."""

    feedback: str
    problem: str | None = None
    """What the reply was, in a few words for the run's error message ("a tool call written
    as text", "empty"), should it be the last one."""
    plain: str | None = None
    """The reply read as plain prose in no format at all (no label, no call): the answer it
    would be. The policy takes it as the final answer when the model, once reminded of the
    format, replies in plain prose again."""


Decision = CallTools | FinalAnswer | FormatError
"""A reply, read by a protocol: exactly one of calls, a final answer, or a format error."""


class Protocol(ABC):
    """How tool calls travel between the agent and the model. Subclass once, pass as a value."""

    name: str = "protocol"
    reads_native_calls: bool = False
    """Whether :meth:`read_reply` reads the reply's native ``tool_calls`` itself. Where it
    does not, the policy reads them first: a native call is honoured under every protocol."""

    @abstractmethod
    def render(self, ctx: RequestContext) -> list[Message]:
        """The whole history as this protocol's messages (system prompt first)."""

    @abstractmethod
    def build_request(self, ctx: RequestContext) -> ModelRequest:
        """One chat request for the next step."""

    @abstractmethod
    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        """Read the model's reply in this protocol's format. Never raises for a bad reply:
        returns a :class:`FormatError`. The shared rules are applied afterwards."""

    def feedback(self, error: str, *, forced: bool = False) -> str:
        """The message that tells the model why its reply was refused. ``error`` is a clause
        ("no tool may be used for this question"); ``forced`` is true on a forced final
        request, whose instruction needs no reminder of how to call tools."""
        return f"Your reply could not be used: {error}."

    def reject(
        self, decision: Decision, error: str, *, forced: bool = False, problem: str | None = None
    ) -> FormatError:
        """A reply the policy refuses, as a format error in this protocol's words."""
        return FormatError(
            text=decision.text,
            thought=decision.thought,
            feedback=self.feedback(error, forced=forced),
            problem=problem,
            repairs=list(decision.repairs),
            events=list(decision.events),
        )

    def output_retry(self) -> str:
        """How to give a typed final answer again after it failed validation, as a clause
        (the protocol's own words: "call final_result again...")."""
        return "write the final answer again as JSON valid for the schema"

    def parse_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        """Read the reply and apply the rules every protocol shares (see
        :func:`react_engine.protocols.policy.apply`)."""
        from .policy import apply

        return apply(self, self.read_reply(reply, ctx), reply, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def arguments_json(arguments: dict[str, Any] | str, raw: str) -> str:
    """The JSON object text of a call's arguments, for native ``tool_calls`` messages."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return raw
    return json.dumps({"input": arguments}, ensure_ascii=False)


NOT_JSON = (
    "the Action Input is not valid JSON and could not be repaired (it is cut off, broken "
    "or nested too deeply), so the action was not run; write it again as one complete "
    "JSON object"
)
"""Why a parsed action whose input looks like JSON but is not (cut off, broken) never runs."""


def parsed_arguments_error(args: dict[str, Any] | str, repairs: Sequence[str]) -> str | None:
    """Why an action read by :func:`~react_engine.parsing.parse_react` must not run, or None.

    Input that starts like a JSON object or array but could not be decoded (cut off, or
    broken beyond repair) is kept as text by the parser; a tool must never receive it as
    if it were a plain-text input.
    """
    if (
        "action_input_not_json" in repairs
        and isinstance(args, str)
        and args.lstrip()[:1] in ("{", "[")
    ):
        return NOT_JSON
    return None


def guard_depth(call: PendingCall) -> None:
    """Refuse arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH`: the call becomes an
    ``invalid_arguments`` observation and keeps only the raw text, which every later
    step (rendering, the trace) handles at any depth."""
    if call.error is None and isinstance(call.arguments, dict) and too_deep(call.arguments):
        call.error = TOO_DEEP
        call.arguments = call.raw_arguments
