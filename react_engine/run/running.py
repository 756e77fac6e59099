"""What a run needs beyond the agent, imported when a run starts, not with ``react_engine``
(asyncio, ``ssl``, ``socket``... come with it)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from .. import runtime
from ..errors import RunInterrupted
from ..tools.mcp import connected_tools
from .events import RunDone, RunFailed, RunStarted
from .execution import ToolRunner
from .loop import Loop, LoopDeps
from .state import RunState
from .tracing import run_tracer

__all__ = [
    "Loop",
    "LoopDeps",
    "RunDone",
    "RunFailed",
    "RunStarted",
    "RunState",
    "ToolRunner",
    "connected_tools",
    "run_coroutine",
    "run_tracer",
]

T = TypeVar("T")


def run_coroutine(run: Coroutine[Any, Any, T]) -> T:
    """A blocking run: Ctrl-C raises :class:`~react_engine.errors.RunInterrupted` with the run
    so far (which the loop puts on the run's ``CancelledError``)."""
    so_far: list[Any] = []

    async def watched() -> T:
        try:
            return await run
        except asyncio.CancelledError as exc:
            result = getattr(exc, "result", None)
            if result is not None:
                so_far.append(result)
            raise

    try:
        return runtime.run_coroutine(watched())
    except KeyboardInterrupt as exc:
        if not so_far or isinstance(exc, RunInterrupted):
            raise
        interrupted = RunInterrupted(so_far[-1])
    raise interrupted  # outside the except block: no KeyboardInterrupt as its context
