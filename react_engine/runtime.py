"""The runtime under every layer: threads for blocking work and the event loop of a blocking
run, on public ``asyncio`` and ``threading`` only. After ``os.fork()`` the child gets fresh
pools and a fresh runner."""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ReactEngineError, RunInterrupted

__all__ = [
    "MAX_STUCK_THREADS",
    "MAX_TOOL_THREADS",
    "DeadlinePassed",
    "ThreadsExhausted",
    "run_blocking",
    "run_coroutine",
    "run_sync_call",
    "stuck_threads",
]

T = TypeVar("T")


class ThreadsExhausted(ReactEngineError, RuntimeError):
    """Too many sync calls are stuck past their timeout for another one to start."""


class DeadlinePassed(ReactEngineError, TimeoutError):
    """The engine's own time limit for a call passed (not a ``TimeoutError`` the call raised)."""

    def __init__(self, timeout: float, *, started: bool = True) -> None:
        super().__init__(
            f"did not finish within {timeout:g}s"
            if started
            else f"did not start within {timeout:g}s: every worker thread was busy"
        )
        self.timeout = timeout
        self.started = started
        """False for a sync call that was still waiting for a thread: it never ran."""


def _no_stop_iteration(function: Callable[[], T]) -> T:
    try:
        return function()
    except StopIteration as exc:  # an asyncio future cannot hold one
        raise RuntimeError(f"the call raised {exc!r}") from None


# --- blocking calls --------------------------------------------------------------------------


async def run_blocking(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await`` a blocking call on the loop's default executor, with the caller's context
    variables (``asyncio.to_thread``)."""
    call = functools.partial(function, *args, **kwargs)
    return await asyncio.to_thread(_no_stop_iteration, call)


# --- sync tools ------------------------------------------------------------------------------

MAX_TOOL_THREADS = 64
"""Sync tool calls (and sync approvers, callbacks) running at once; more wait for a thread."""
MAX_STUCK_THREADS = 64
"""Threads left running by calls that overran their timeout or were cancelled: past this
many, sync calls are refused until some of them end."""

_QUEUED, _RUNNING, _DONE, _DROPPED = range(4)


@dataclass(slots=True, eq=False)
class _Call:
    """One sync call handed to the pool (its state written under the pool's lock)."""

    function: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    waiter: asyncio.Future[Any]
    state: int = _QUEUED
    abandoned: bool = False
    value: Any = None
    error: BaseException | None = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _settle(call: _Call) -> None:
    """On the caller's loop: hand the ended call's outcome to its future."""
    waiter = call.waiter
    if waiter.done():
        return
    if call.error is None:
        waiter.set_result(call.value)
    else:
        waiter.set_exception(call.error)


class _ToolPool:
    """A bounded pool of daemon threads for sync tools, apart from :func:`run_blocking`'s so
    that stuck tools never starve it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: collections.deque[_Call] = collections.deque()
        self._idle = 0  # threads waiting for a call, not yet woken
        self.threads = 0  # threads serving the pool (stuck ones not counted)
        self.stuck = 0

    def submit(self, call: _Call) -> None:
        with self._lock:
            if self.stuck >= MAX_STUCK_THREADS:
                raise ThreadsExhausted(
                    f"{self.stuck} earlier sync calls are still running past their timeout"
                )
            self._pending.append(call)
            self._serve()

    def _serve(self) -> None:
        """Wake an idle thread for a queued call, or start one within the caps (lock held)."""
        if self._idle:
            self._idle -= 1
            self._wake.notify()
        elif (
            self.threads < MAX_TOOL_THREADS
            and self.threads + self.stuck < MAX_TOOL_THREADS + MAX_STUCK_THREADS
        ):
            self.threads += 1
            thread = threading.Thread(target=self._work, name="react-engine-tool", daemon=True)
            try:
                thread.start()
            except BaseException:  # no thread (the interpreter is exiting)
                self.threads -= 1
                raise

    def abandon(self, call: _Call) -> int:
        """The caller stopped waiting: the call's state then (a running one leaves its thread
        stuck, a queued one is dropped)."""
        with self._lock:
            if call.state == _RUNNING:
                call.abandoned = True
                self.stuck += 1
                self.threads -= 1
                if self._pending:
                    self._serve()
            elif call.state == _QUEUED:
                call.state = _DROPPED
            return call.state

    def _next(self) -> _Call:
        """The next queued call, now running; waits for one (the lock is held)."""
        while True:
            while not self._pending:
                self._idle += 1
                self._wake.wait()  # _serve took this thread off the idle count
            call = self._pending.popleft()
            if call.state == _QUEUED:  # not dropped by its caller while queued
                call.state = _RUNNING
                return call

    def _work(self) -> None:
        with self._lock:
            call = self._next()
        while True:
            try:
                call.value = call.function()
            except BaseException as exc:  # handed to the caller, whatever it is
                call.error = exc
            with self._lock:
                call.state = _DONE
                if call.abandoned:
                    self.stuck -= 1
                    if self._pending:  # a thread the caps kept from starting
                        self._serve()
                    return
            with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                call.loop.call_soon_threadsafe(_settle, call)
            with self._lock:
                call = self._next()


_TOOLS = _ToolPool()


def stuck_threads() -> int:
    """Threads still running sync calls their callers gave up on."""
    return _TOOLS.stuck


async def run_sync_call(
    function: Callable[..., T], /, *args: Any, timeout: float | None = None, **kwargs: Any
) -> T:
    """``await`` a sync call on a daemon thread, within ``timeout`` seconds
    (:class:`DeadlinePassed`), with the caller's context variables; :class:`ThreadsExhausted`
    when too many earlier calls are stuck."""
    loop = asyncio.get_running_loop()
    run = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    call = _Call(functools.partial(_no_stop_iteration, run), loop, loop.create_future())
    pool = _TOOLS
    pool.submit(call)
    try:
        async with asyncio.timeout(timeout):  # not wait_for: no task of its own
            value: T = await call.waiter
        return value
    except BaseException as exc:
        status = pool.abandon(call)
        if status == _DONE:
            if isinstance(exc, TimeoutError):  # its own, or the time ran out as it ended
                ended: T = call.outcome()
                return ended
            raise
        if isinstance(exc, TimeoutError) and timeout is not None:
            raise DeadlinePassed(timeout, started=status == _RUNNING) from None
        raise


# --- the event loop of a blocking run --------------------------------------------------------


class _Kept:
    """One thread's ``asyncio.Runner``, kept between its blocking runs, and its process."""

    __slots__ = ("__weakref__", "pid", "runner")

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.pid = os.getpid()

    def close(self) -> None:
        if self.pid == os.getpid():
            with contextlib.suppress(Exception):
                self.runner.close()

    def __del__(self) -> None:  # the thread ended: its locals go
        self.close()


_KEPT = threading.local()
_FORKED: list[_Kept] = []
"""Runners a fork copied here: never closed (their selector is the parent's) nor collected."""


@atexit.register
def _close_kept() -> None:
    """At exit, close the main thread's runner while the interpreter is whole."""
    kept: _Kept | None = getattr(_KEPT, "kept", None)
    _KEPT.kept = None
    if kept is not None:
        kept.close()


def _kept_runner() -> _Kept:
    kept: _Kept | None = getattr(_KEPT, "kept", None)
    if kept is not None and kept.pid == os.getpid():
        return kept
    if kept is not None:
        _FORKED.append(kept)
    kept = _KEPT.kept = _Kept()
    return kept


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code as ``asyncio.run`` does, but on the
    thread's kept loop (closed by a run that leaves a task pending, fails or is interrupted).
    Inside a running loop, the coroutine runs on a thread of its own. Ctrl-C raises
    :class:`~react_engine.errors.RunInterrupted` with the run so far, which the loop puts on
    the run's ``CancelledError``."""
    so_far: list[Any] = []
    coro = _watched(coro, so_far)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # on a thread of its own, not waited for past a Ctrl-C
        thread = ThreadPoolExecutor(1, thread_name_prefix="react-engine-run")
        try:
            return thread.submit(asyncio.run, coro).result()
        finally:
            thread.shutdown(wait=False)
    kept = _kept_runner()
    interrupted: RunInterrupted | None = None
    try:
        value = kept.runner.run(coro, context=contextvars.copy_context())
    except BaseException as exc:
        _KEPT.kept = None
        kept.close()
        if not so_far or not isinstance(exc, KeyboardInterrupt) or isinstance(exc, RunInterrupted):
            raise
        interrupted = RunInterrupted(so_far[-1])
    if interrupted is not None:
        raise interrupted  # outside the except block: no KeyboardInterrupt as its context
    loop = kept.runner.get_loop()
    if asyncio.all_tasks(loop):  # a task that ends in a few steps (a client's close) may go
        with contextlib.suppress(Exception):
            kept.runner.run(_let_tasks_end())
    if asyncio.all_tasks(loop):
        _KEPT.kept = None
        kept.close()
    else:
        asyncio.set_event_loop(None)  # as asyncio.run leaves it
    return value


async def _watched(coro: Coroutine[Any, Any, T], so_far: list[Any]) -> T:
    try:
        return await coro
    except asyncio.CancelledError as exc:
        if (result := getattr(exc, "result", None)) is not None:
            so_far.append(result)
        raise


_LEFTOVER_STEPS = 8  # loop iterations a run's leftover tasks get to end


async def _let_tasks_end() -> None:
    this = asyncio.current_task()
    for _ in range(_LEFTOVER_STEPS):
        if not asyncio.all_tasks() - {this}:
            return
        await asyncio.sleep(0)


def _after_fork_in_child() -> None:
    """The parent's threads are not in the child, and may hold its pool's lock."""
    global _TOOLS
    _TOOLS = _ToolPool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
