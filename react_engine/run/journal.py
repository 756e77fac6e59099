"""What a run asks of a store, as protocols the store layer implements (``run/`` never
imports ``store/``); a store given by name is opened by the opener registered with
:func:`set_store_opener`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..types import ActionRecord, HistoryItem, ModelResponse, RunResult, Step, check_type

if TYPE_CHECKING:
    from ..protocols.base import Protocol as RunProtocol
    from ..protocols.decision import Decision
    from .state import RunState

__all__ = ["Journal", "JournalStore", "SessionLike", "open_run_store", "set_store_opener"]


class Journal(Protocol):
    """One run's journal: what it commits as it goes and, when resumed, what it did already
    (:class:`react_engine.store.runs.RunJournal`)."""

    run_id: str
    protocol: str | None
    """The protocol a resumed run began with (None for a new run)."""
    eager: bool
    """Commit each reply as soon as it is read (user code runs between reply and call)."""
    header: dict[str, Any]

    # --- the run's lease and its ends (the agent) ---------------------------------------------

    def held(self) -> contextlib.AbstractAsyncContextManager[Journal]: ...
    async def load(self, approvals: Mapping[str, bool] | None = None) -> Journal: ...
    async def open(self) -> None: ...
    async def finish(self, result: RunResult[Any]) -> None: ...
    async def failed(self, error: BaseException) -> None: ...
    def last_protocol(self) -> str | None: ...
    def resume_on(
        self, live: tuple[RunProtocol, str], make_reader: Callable[[str], RunProtocol]
    ) -> tuple[RunProtocol, str]: ...

    # --- model replies and steps (the loop) ---------------------------------------------------

    def before_turn(self, state: RunState) -> None: ...
    def saved_reply(self) -> ModelResponse | None: ...
    async def decided(
        self, reply: ModelResponse, decision: Decision, protocol: str | None = None
    ) -> None: ...
    async def step(self, step: Step) -> None: ...

    # --- tool calls (the tool runner) ---------------------------------------------------------

    def finished(self, record: ActionRecord) -> ActionRecord | None: ...
    def in_flight(self, record: ActionRecord) -> bool: ...
    async def started(self, record: ActionRecord) -> None: ...
    async def done(self, record: ActionRecord) -> None: ...
    def approval(self, record: ActionRecord) -> bool | None: ...
    def waited(self, record: ActionRecord) -> bool: ...
    def defer(self, record: ActionRecord) -> None: ...


@runtime_checkable
class JournalStore(Protocol):
    """What ``Agent(store=...)`` takes: a store that gives each run its :class:`Journal`."""

    def journal(self, run_id: str | None = None) -> Journal: ...

    async def question(self, run_id: str) -> str: ...
    async def history(self, run_id: str) -> list[HistoryItem]: ...


@runtime_checkable
class SessionLike(Protocol):
    """What ``session=`` takes: a conversation's history kept between runs."""

    async def load(self) -> list[HistoryItem]: ...
    async def append(self, items: Sequence[HistoryItem]) -> None: ...


StoreOpener = Callable[[str | os.PathLike[str]], JournalStore]

_opener: list[StoreOpener] = []


def set_store_opener(opener: StoreOpener) -> None:
    """Register what opens a store given by name (a path or a URI) for ``Agent(store=...)``."""
    _opener[:] = [opener]


def open_run_store(store: Any) -> JournalStore | None:
    """What ``Agent(store=...)`` was given, as a store."""
    if store is None or isinstance(store, JournalStore):
        return store
    what = "a RunStore, a path or a postgresql:// URI"
    check_type(store, str | os.PathLike, "store", what, optional=False)
    return _opener[0](store)  # registered by react_engine/__init__.py
