"""Long-lived thread pools for blocking work: one for sync SDK clients, one for sync tools.

``asyncio.to_thread`` uses the running loop's default executor, which ``asyncio.run``
creates and joins for every blocking ``Agent.run()``: threads are started and torn down on
every run, and one stuck call (a sync tool past its timeout) holds the run until it ends.
A module-level pool avoids both.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import ReactEngineError

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


# --- sync tools ------------------------------------------------------------------------------

MAX_TOOL_THREADS = 64
"""Sync tool calls (and sync approvers) running at once; more wait for a free thread."""
MAX_STUCK_THREADS = 64
"""Threads left running by calls that overran their timeout or were cancelled (a thread
cannot be stopped). Past this many, sync calls are refused until some of them end, and no
thread is started in place of one that gets stuck: the pool's threads, stuck ones
included, never number more than ``MAX_TOOL_THREADS + MAX_STUCK_THREADS``."""


class ThreadsExhausted(ReactEngineError, RuntimeError):
    """Too many sync calls are stuck past their timeout for another one to start."""


class DeadlinePassed(ReactEngineError, TimeoutError):
    """The engine's own time limit for a call passed.

    Apart from a ``TimeoutError`` the call raised itself (an HTTP client's read timeout
    inside a tool, ``socket.timeout``), which is the call's own error, not the engine's.
    """

    def __init__(self, timeout: float, *, started: bool = True) -> None:
        super().__init__(
            f"did not finish within {timeout:g}s"
            if started
            else f"did not start within {timeout:g}s: every worker thread was busy"
        )
        self.timeout = timeout
        self.started = started
        """False for a sync call that was still waiting for a thread: it never ran."""


class _Call:
    __slots__ = ("abandoned", "function", "future")

    def __init__(self, function: Callable[[], Any], future: Future[Any]) -> None:
        self.function = function
        self.future = future
        self.abandoned = False


class _DaemonPool:
    """A bounded pool of daemon threads for sync tools.

    Apart from the pool above, so that stuck tools never starve the sync SDK client's
    requests; of daemon threads, so that a tool stuck past its timeout never keeps the
    interpreter from exiting (``ThreadPoolExecutor`` joins its threads at exit). A call
    abandoned by its caller (a timeout, a cancelled run) gives its thread up: the thread
    ends when the call does, and a fresh one takes its place in the pool; at most
    :data:`MAX_STUCK_THREADS` such threads live at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._pending: collections.deque[_Call] = collections.deque()
        self._threads = 0  # threads serving the pool (stuck ones not counted)
        self._idle = 0
        self._stuck = 0

    @property
    def stuck(self) -> int:
        return self._stuck

    def submit(self, function: Callable[[], Any]) -> _Call:
        call = _Call(function, Future())
        with self._lock:
            if self._stuck >= MAX_STUCK_THREADS:
                raise ThreadsExhausted(
                    f"{self._stuck} earlier sync calls are still running past their timeout"
                )
            self._pending.append(call)
            if self._idle >= len(self._pending):
                self._lock.notify()
            else:
                self._grow()
        return call

    def _grow(self) -> None:
        """Start one more thread, if the pool may have it (the lock is held)."""
        if (
            self._threads < MAX_TOOL_THREADS
            and self._threads + self._stuck < MAX_TOOL_THREADS + MAX_STUCK_THREADS
        ):
            self._threads += 1
            threading.Thread(target=self._work, name="react-engine-tool", daemon=True).start()

    @property
    def live(self) -> int:
        """The pool's threads, stuck ones included."""
        return self._threads + self._stuck

    def abandon(self, call: _Call) -> bool:
        """The caller stopped waiting; True when the call is still running (its thread is
        then stuck until it ends). A call still queued is dropped."""
        with self._lock:
            if call.future.running():
                call.abandoned = True
                self._stuck += 1
                self._threads -= 1  # a fresh thread may take its place, within the caps
                if self._pending and self._idle < len(self._pending):
                    self._grow()
                return True
            call.future.cancel()
            return False

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._idle += 1
                    self._lock.wait()
                    self._idle -= 1
                call = self._pending.popleft()
                if not call.future.set_running_or_notify_cancel():
                    continue
            try:
                value = call.function()
            except BaseException as exc:  # handed to the caller, whatever it is
                call.future.set_exception(exc)
            else:
                call.future.set_result(value)
            with self._lock:
                if call.abandoned:
                    self._stuck -= 1
                    # A fresh thread took its place in the pool, unless the caps kept it
                    # from starting: then calls may be waiting that only this one can run.
                    if self._pending and self._idle < len(self._pending):
                        self._grow()
                    return
            del call


_TOOLS = _DaemonPool()


def stuck_threads() -> int:
    """Threads still running sync calls their callers gave up on."""
    return _TOOLS.stuck


def tool_threads() -> int:
    """The sync-tool pool's live threads, stuck ones included."""
    return _TOOLS.live


async def run_sync_call(
    function: Callable[..., T], /, *args: Any, timeout: float | None = None, **kwargs: Any
) -> T:
    """``await`` a sync tool (or approver) on a daemon thread, within ``timeout`` seconds.

    Raises :class:`DeadlinePassed` when the time is up and :class:`ThreadsExhausted` when
    too many earlier calls are stuck; in both cases, and when the caller is cancelled, a call
    still running is left to finish on its own thread. A ``TimeoutError`` the function
    raises is raised as it is.
    """
    context = contextvars.copy_context()
    call = _TOOLS.submit(functools.partial(context.run, function, *args, **kwargs))
    waiter = asyncio.wrap_future(call.future)
    try:
        value: T = await (waiter if timeout is None else asyncio.wait_for(waiter, timeout))
        return value
    except BaseException as exc:
        if call.future.done():
            if isinstance(exc, TimeoutError) and not call.future.cancelled():
                # The function's own TimeoutError, or the time ran out just as it ended:
                # its own outcome either way (result() raises what it raised, as raised).
                ended: T = call.future.result()
                return ended
            raise
        waiter.cancel()  # its outcome, when it comes, is dropped
        running = _TOOLS.abandon(call)
        if isinstance(exc, TimeoutError) and timeout is not None:
            raise DeadlinePassed(timeout, started=running) from None
        raise


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block: a run's error gets no RuntimeError context
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="react-engine-run")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
