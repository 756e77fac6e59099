"""What a run needs beyond the agent itself, in one place.

:class:`~react_engine.run.agent.Agent` imports this module when a run starts (``from . import
_running``), not when ``react_engine`` is imported: the loop, tool execution, events,
tracing and MCP connections bring asyncio (and ``ssl``, ``socket``...) with them, which an
application that only imports the library, or builds agents, does not need. One module
rather than one import per name keeps the cost of that import at each run negligible.
"""

from __future__ import annotations

from ..tools.mcp import connected_tools
from ._threads import run_coroutine
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
