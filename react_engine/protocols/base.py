"""The ``Protocol`` seam: how one agent loop talks to models that differ in how they call tools.

A protocol renders the protocol-neutral history into one chat request
(:meth:`Protocol.build_request`) and reads the reply in its own format into a
:data:`Decision` (:meth:`Protocol.read_reply`). What every protocol enforces the same way
is written once, in :mod:`react_engine.protocols.policy` (:meth:`Protocol.parse_reply`).
Because the history is neutral, a run can switch protocol between requests. A new
protocol is one class deriving from :class:`Protocol`, passed as a value or registered
with :func:`react_engine.protocols.registry.register` (docs/extending-protocols.md).
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..types import HistoryItem, Message, ModelRequest, ModelResponse, ModelSettings, ToolChoice
from ..wording import Notice, word
from .decision import (
    NOT_JSON,
    CallTools,
    Decision,
    FinalAnswer,
    FormatError,
    MultiAction,
    PendingCall,
    arguments_json,
    guard_depth,
    parsed_arguments_error,
)

if TYPE_CHECKING:
    from ..tools.base import Tool
    from ..transport.capabilities import Capabilities
    from .output import OutputSpec
    from .registry import ProtocolOptions, ScriptStep

__all__ = [
    "NOT_JSON",
    "CallTools",
    "Decision",
    "FinalAnswer",
    "FormatError",
    "MultiAction",
    "PendingCall",
    "Protocol",
    "RequestContext",
    "arguments_json",
    "guard_depth",
    "parsed_arguments_error",
]

T = TypeVar("T")


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
    multi_action: MultiAction = "independent"
    """Which of a reply's several calls run (see :data:`MultiAction`); the policy applies
    it to every protocol."""
    output: OutputSpec | None = None
    """The run's ``output_type``: the final answer must be JSON valid for it (``None``: any
    text). The protocol shows its schema; the policy validates the answer."""
    call_limit: int | None = None
    """Where a protocol's readers of calls in text stop (the loop sets it to
    :data:`~react_engine.protocols.limits.READ_LIMIT`: a reply with more calls than
    ``MAX_CALLS`` is refused whole). ``None``: no limit."""
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
        if hit is not None and all(map(operator.is_, hit[0], owners)):  # slots hold one id each
            value: T = hit[1]
            return value
        value = compute()
        self.memo[slot] = (owners, value)
        return value


class Protocol(ABC):
    """How tool calls travel between the agent and the model. Subclass once, pass as a value."""

    name: str = "protocol"
    reads_native_calls: bool = False
    """Whether :meth:`read_reply` reads the reply's native ``tool_calls`` itself. Where it
    does not, the policy reads them first: a native call is honoured under every protocol."""

    @classmethod
    def from_options(cls, options: ProtocolOptions) -> Protocol:
        """The protocol the registry builds for one model (``Agent(protocol=name)``): by
        default ``cls()``; a protocol that reads a prompt template or another option takes
        it from ``options``."""
        return cls()

    @staticmethod
    def script(step: ScriptStep) -> list[dict[str, Any]]:
        """``step`` as the scripted replies a model speaking this protocol would send (the
        demo's ``--dry-run``, the comparison's scripted runs): by default native
        ``tool_calls``, for protocols that send the tools natively."""
        if step.answer is not None:
            return [{"content": step.answer}]
        calls = [{"name": name, "arguments": args} for name, args in step.calls]
        return [{"content": step.thought, "tool_calls": calls}]

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

    @property
    def language(self) -> str:
        """The language of the engine's own observations for this protocol's calls (a call
        refused, held back or failed: :mod:`react_engine.wording`): its prompt template's
        (``template.language``), English without one."""
        return str(getattr(getattr(self, "template", None), "language", "en"))

    def feedback(self, error: Notice | str, *, forced: bool = False) -> str:
        """The message that tells the model why its reply was refused. ``error`` is a clause
        ("no tool may be used for this question"); ``forced`` is true on a forced final
        request, whose instruction needs no reminder of how to call tools."""
        return f"Your reply could not be used: {word(error, self.language)}."

    def reject(
        self,
        decision: Decision,
        error: Notice | str,
        *,
        forced: bool = False,
        problem: str | None = None,
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
        from .policy import decide

        return decide(self, reply, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
