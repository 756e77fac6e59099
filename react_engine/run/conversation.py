"""A :class:`Conversation`: an agent's runs sharing one history, turn after turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Unpack

from ..types import HistoryItem, OutputT, RunResult, Step
from .config import Options

if TYPE_CHECKING:
    from .agent import Agent
    from .journal import SessionLike as Session

__all__ = ["Conversation"]


class Conversation(Generic[OutputT]):
    """A multi-turn conversation with an agent: each question sees the earlier turns,
    their tool calls and results included. Interrupting a turn keeps what it did."""

    def __init__(
        self,
        agent: Agent[OutputT],
        history: list[HistoryItem] | None = None,
        *,
        session: Session | None = None,
    ) -> None:
        self.agent = agent
        self.history: list[HistoryItem] = history if history is not None else []
        self.session = session
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
