"""Durable runs: a run journalled in the agent's store, a stored run resumed, and a run
whose history lives in a session (on the protocols of :mod:`react_engine.run.journal`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, StoreError
from ..types import HistoryItem, RunResult, check_type
from .journal import Journal, JournalStore, SessionLike

if TYPE_CHECKING:
    from .loop import Loop
    from .state import RunState

__all__ = ["in_session", "journalled", "resumed"]


async def journalled(loop: Loop, state: RunState, journal: Journal) -> RunResult[Any]:
    """``loop`` over ``state`` with the run held in its store, and its outcome written there."""
    async with journal.held() as held:  # RunBusy if another worker runs it
        await held.open()
        try:
            result = await loop.run(state)
        except Exception as exc:
            try:
                await held.failed(exc)
            except StoreError as lost:  # the run's own error is the one to raise
                exc.add_note(f"(its failure was not stored either: {lost})")
            raise
        try:
            await held.finish(result)
        except StoreError as lost:  # the answer is the caller's all the same
            result.notices.append(state.note(f"the result was not stored: {lost}", warn=True))
    return result


async def resumed(
    store: JournalStore | None,
    run_id: str,
    approvals: Mapping[str, bool] | None,
    run: Callable[[str, list[HistoryItem], Journal], Awaitable[RunResult[Any]]],
) -> RunResult[Any]:
    """Stored run ``run_id``, held and loaded, given to ``run`` with its question and history."""
    if store is None:
        raise ConfigurationError("resume needs the agent's store: Agent(store=...)")
    async with store.journal(run_id).held() as journal:
        await journal.load(approvals)
        question = await store.question(run_id)
        history = await store.history(run_id)
        return await run(question, history, journal)


async def in_session(
    session: SessionLike,
    history: list[HistoryItem] | None,
    run: Callable[[list[HistoryItem]], Awaitable[RunResult[Any]]],
) -> RunResult[Any]:
    """A run in a session: its history loaded first, and what the run added appended when
    it ends, however it ends, so that no turn is lost."""
    check_type(session, SessionLike, "session", "a Session", optional=False)
    items = history if history is not None else []
    items[:] = await session.load()
    start = len(items)
    try:
        return await run(items)
    finally:
        if len(items) > start:
            await session.append(items[start:])
