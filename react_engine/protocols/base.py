"""The ``Protocol`` seam: how one agent loop talks to models that differ in how they call tools.

A protocol renders the protocol-neutral history into one chat request
(:meth:`Protocol.build_request`) and reads the reply into a :data:`Decision`
(:meth:`Protocol.read_reply`); :mod:`react_engine.protocols.policy` applies the shared
rules. A new protocol is one subclass (docs/extending-protocols.md).
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..types import (
    AssistantMessage,
    HistoryItem,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Step,
    ToolChoice,
    UserMessage,
)
from ..wording import Notice, word
from .decision import Decision, FormatError, MultiAction

if TYPE_CHECKING:
    from ..tools.base import Tool
    from ..transport.capabilities import Capabilities
    from .output import OutputSpec
    from .registry import ProtocolOptions, ScriptStep

__all__ = ["Protocol", "RequestContext"]

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
    """Which of a reply's several calls run (see :data:`MultiAction`)."""
    output: OutputSpec | None = None
    """The run's ``output_type`` (``None``: any text)."""
    memo: dict[Hashable, Any] = field(default_factory=dict)
    """What a protocol keeps between the requests of one run: see :meth:`once`."""

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def once(self, owners: tuple[object, ...], key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per run for ``owners`` and ``key``, then kept (the
        system prompt, a step's messages). ``owners`` are matched by identity and held for
        the run, so that no other object takes their id."""
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
    """Whether :meth:`read_reply` reads native ``tool_calls`` itself (else the policy does)."""

    @classmethod
    def from_options(cls, options: ProtocolOptions) -> Protocol:
        """The protocol the registry builds for one model; by default ``cls()``."""
        return cls()

    @staticmethod
    def script(step: ScriptStep) -> list[dict[str, Any]]:
        """``step`` as the scripted replies a model speaking this protocol would send (by
        default native ``tool_calls``)."""
        if step.answer is not None:
            return [{"content": step.answer}]
        calls = [{"name": name, "arguments": args} for name, args in step.calls]
        return [{"content": step.thought, "tool_calls": calls}]

    @abstractmethod
    def build_request(self, ctx: RequestContext) -> ModelRequest:
        """One chat request for the next step."""

    @abstractmethod
    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        """Read the model's reply in this protocol's format. Never raises for a bad reply:
        returns a :class:`FormatError`. The shared rules are applied afterwards."""

    @property
    def language(self) -> str:
        """The language of the engine's own observations: the template's, else English."""
        return str(getattr(getattr(self, "template", None), "language", "en"))

    def feedback(self, error: Notice | str, *, forced: bool = False) -> str:
        """The message that tells the model why its reply was refused (``error``, a clause);
        ``forced``: a forced final request, which needs no reminder of how to call tools."""
        return f"Your reply could not be used: {word(error, self.language)}."

    def _refused(self, step: Step, reasoning: str | None = None) -> list[Message]:
        """A format-error step: the reply, if any, and its feedback."""
        said = step.text if step.text and step.text.strip() else None
        out: list[Message] = [AssistantMessage(said, reasoning=reasoning)] if said else []
        return [*out, UserMessage(step.feedback or self.feedback("unreadable reply", forced=True))]

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
        """How to give a typed final answer again after it failed validation, as a clause."""
        return "write the final answer again as JSON valid for the schema"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
