"""One long-lived thread pool for blocking work: sync tools and sync SDK clients.

``asyncio.to_thread`` uses the running loop's default executor, which ``asyncio.run``
creates and joins for every blocking ``Agent.run()``: threads are started and torn down on
every run, and one stuck call (a sync tool past its timeout) holds the run until it ends.
A module-level pool avoids both.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="react-engine")
        return _POOL


async def run_blocking(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await`` a blocking call on the shared pool, with the caller's context variables."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_pool(), call)
