"""A :class:`Conversation`: an agent's runs sharing one history, turn after turn."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Generic, Unpack

from ..types import HistoryItem, OutputT, RunResult, Step
from .config import Options

if TYPE_CHECKING:
    from .agent import Agent
    from .journal import SessionLike as Session

__all__ = ["Conversation"]


@dataclass(eq=False)
class Conversation(Generic[OutputT]):
    """A multi-turn conversation with an agent: each question sees the earlier turns,
    their tool calls and results included. Interrupting a turn keeps what it did."""

    agent: Agent[OutputT]
    history: list[HistoryItem] = field(default_factory=list)
    _: KW_ONLY
    session: Session | None = None
    """Where the history lives between turns (loaded before each question)."""

    def ask(self, question: str, **options: Unpack[Options]) -> RunResult[OutputT]:
        """The next turn (blocking); ``options`` are ``Agent.arun``'s."""
        return self.agent.run(question, history=self.history, session=self.session, **options)

    async def aask(self, question: str, **options: Unpack[Options]) -> RunResult[OutputT]:
        """The next turn; ``options`` are ``Agent.arun``'s."""
        return await self.agent.arun(
            question, history=self.history, session=self.session, **options
        )

    @property
    def steps(self) -> list[Step]:
        return [item for item in self.history if isinstance(item, Step)]
