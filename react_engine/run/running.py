"""What a run needs beyond the agent, in one module that :class:`~react_engine.run.agent.Agent`
imports when a run starts, not with ``react_engine``: the loop, tool execution, events, tracing
and MCP connections bring asyncio (and ``ssl``, ``socket``...) with them."""

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
from .state import RUN_EVENT, RunState
from .tracing import RunTracer, content_wanted, tracer_for

__all__ = [
    "RUN_EVENT",
    "Loop",
    "LoopDeps",
    "RunDone",
    "RunFailed",
    "RunStarted",
    "RunState",
    "RunTracer",
    "ToolRunner",
    "connected_tools",
    "content_wanted",
    "run_coroutine",
    "tracer_for",
]

T = TypeVar("T")


def run_coroutine(run: Coroutine[Any, Any, T]) -> T:
    """A blocking run (:func:`react_engine.runtime.run_coroutine`): Ctrl-C raises
    :class:`~react_engine.errors.RunInterrupted` with the run so far (the loop puts it on
    the run's ``CancelledError``, :meth:`Loop.run <react_engine.run.loop.Loop.run>`)."""
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
