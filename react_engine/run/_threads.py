"""Long-lived thread pools for blocking work: one for sync SDK clients, one for sync tools.

``asyncio.to_thread`` uses the running loop's default executor, which ``asyncio.run``
creates and joins for every blocking ``Agent.run()``: threads are started and torn down on
every run, and one stuck call (a sync tool past its timeout) holds the run until it ends.
A module-level pool avoids both.
"""

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
    loop = asyncio.get_running_loop()
    call = _Call(
        functools.partial(contextvars.copy_context().run, function, *args, **kwargs),
        loop,
        loop.create_future(),
    )
    submitted = _pool().submit(_run_and_settle, call)
    try:
        value: T = await call.waiter
        return value
    except BaseException:
        submitted.cancel()  # dropped if still queued; a running call ends on its own
        raise


def _run_and_settle(call: _Call) -> None:
    """On a pool thread: run the call, then settle its waiter on the caller's loop (one
    ``call_soon_threadsafe``; ``run_in_executor`` chains an asyncio future to the pool's
    own with two more callbacks and their closures)."""
    try:
        call.value = call.function()
    except BaseException as exc:  # handed to the caller, whatever it is
        call.error = exc
    call.state = _DONE
    with contextlib.suppress(RuntimeError):  # the caller's loop is closed
        call.loop.call_soon_threadsafe(_settle, call)


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


_QUEUED, _RUNNING, _DONE, _DROPPED = range(4)


class _Call:
    """One sync call handed to the pool, and its outcome.

    Not a ``concurrent.futures.Future`` wrapped in an asyncio one (``wrap_future``): that
    pair costs about fifty container objects per call (a condition, its waiters, the
    chained callbacks' closures), which at a thousand concurrent runs set off garbage
    collections more often than anything else the engine does per tool call. The worker
    stores the outcome here, under the pool's lock, and settles the caller's asyncio
    future with one ``call_soon_threadsafe``."""

    __slots__ = ("abandoned", "error", "function", "loop", "state", "value", "waiter")

    def __init__(
        self,
        function: Callable[[], Any],
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[Any],
    ) -> None:
        self.function = function
        self.loop = loop
        self.waiter = waiter
        self.state = _QUEUED
        self.abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        """What the function returned, or its exception raised (the call has ended)."""
        if self.error is not None:
            raise self.error
        return self.value


def _settle(call: _Call) -> None:
    """On the caller's loop: hand the ended call's outcome to its waiter (if still waited)."""
    waiter = call.waiter
    if waiter.done():
        return
    error = call.error
    if error is None:
        waiter.set_result(call.value)
    elif isinstance(error, StopIteration):  # a future cannot hold one
        waiter.set_exception(RuntimeError(f"the call raised {error!r}"))
    else:
        waiter.set_exception(error)


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

    def submit(self, call: _Call) -> None:
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

    def abandon(self, call: _Call) -> int:
        """The caller stopped waiting: the call's state then. A call still running
        (``_RUNNING``) leaves its thread stuck until it ends; one still queued is dropped
        (``_DROPPED``); one that ended (``_DONE``) has its outcome on it."""
        with self._lock:
            if call.state == _RUNNING:
                call.abandoned = True
                self._stuck += 1
                self._threads -= 1  # a fresh thread may take its place, within the caps
                if self._pending and self._idle < len(self._pending):
                    self._grow()
            elif call.state == _QUEUED:
                call.state = _DROPPED
            return call.state

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._idle += 1
                    self._lock.wait()
                    self._idle -= 1
                call = self._pending.popleft()
                if call.state != _QUEUED:  # dropped by its caller while queued
                    continue
                call.state = _RUNNING
            try:
                call.value = call.function()
            except BaseException as exc:  # handed to the caller, whatever it is
                call.error = exc
            with self._lock:
                call.state = _DONE
                abandoned = call.abandoned
                if abandoned:
                    self._stuck -= 1
                    # A fresh thread took its place in the pool, unless the caps kept it
                    # from starting: then calls may be waiting that only this one can run.
                    if self._pending and self._idle < len(self._pending):
                        self._grow()
            if not abandoned:
                with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                    call.loop.call_soon_threadsafe(_settle, call)
            else:
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
    loop = asyncio.get_running_loop()
    work = functools.partial(context.run, function, *args, **kwargs)
    call = _Call(work, loop, loop.create_future())
    _TOOLS.submit(call)
    try:
        if timeout is None:
            value: T = await call.waiter
        else:
            # asyncio.timeout, not wait_for: no task, future and callback of its own.
            async with asyncio.timeout(timeout):
                value = await call.waiter
        return value
    except BaseException as exc:
        call.waiter.cancel()  # an outcome still to come is dropped
        status = _TOOLS.abandon(call)
        if status == _DONE:
            if isinstance(exc, TimeoutError):
                # The function's own TimeoutError, or the time ran out just as it ended:
                # its own outcome either way (raised as it raised it).
                ended: T = call.outcome()
                return ended
            raise
        if isinstance(exc, TimeoutError) and timeout is not None:
            raise DeadlinePassed(timeout, started=status == _RUNNING) from None
        raise


class _KeptLoop:
    """One thread's event loop for its blocking runs (``agent.run()``), kept between them.

    ``asyncio.run`` makes a loop (a selector, a self-pipe, a signal wake-up fd) and tears
    it down for every call: about 80 µs of CPU per ``agent.run()``, a sizeable part of what
    the sync API costs beyond the bare SDK loop. The loop is kept only while it is as clean
    as a new one: see :func:`_run_on_kept_loop`."""

    __slots__ = ("pid", "runner")

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.pid = os.getpid()

    def close(self) -> None:
        self.runner.close()

    def __del__(self) -> None:
        # The thread ended (its locals go) or the interpreter exits: the loop is idle and
        # clean (nothing else is ever kept), so closing it is all that asyncio.run's end
        # would have done. Never from another process (a fork's copy).
        loop = getattr(self.runner, "_loop", None)
        if loop is not None and self.pid == os.getpid() and not loop.is_running():
            with contextlib.suppress(Exception):
                loop.close()


_KEPT = threading.local()


@atexit.register
def _close_kept_loop() -> None:
    """At exit, close the main thread's kept loop while the interpreter is whole."""
    kept: _KeptLoop | None = getattr(_KEPT, "loop", None)
    _KEPT.loop = None
    if kept is not None and kept.pid == os.getpid():
        with contextlib.suppress(Exception):
            kept.close()


def _clean(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` holds nothing a run left behind: no task, no async generator to
    finalise, no default executor (what ``asyncio.run`` would cancel, close and join)."""
    gens = getattr(loop, "_asyncgens", None)
    executor = getattr(loop, "_default_executor", True)
    return gens is not None and not gens and executor is None and not asyncio.all_tasks(loop)


def _run_on_kept_loop(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, on this thread's kept event loop when it has one.

    The same as ``asyncio.run`` as seen from the run: a task of its own with a copy of the
    caller's context, Ctrl-C cancelling it (``asyncio.Runner``), no current event loop set
    once it returns. Whatever the run leaves behind (a task still pending, an async
    generator such as an async client's closer, a default executor), a failure or an
    interrupt, closes the loop the way ``asyncio.run`` does, and the next run gets a new
    one."""
    kept: _KeptLoop | None = getattr(_KEPT, "loop", None)
    if kept is None or kept.pid != os.getpid():
        kept = _KEPT.loop = _KeptLoop()
    try:
        value = kept.runner.run(coro)
    except BaseException:
        _KEPT.loop = None
        kept.close()
        raise
    if _clean(kept.runner.get_loop()):
        asyncio.set_event_loop(None)  # as asyncio.run leaves it
    else:
        _KEPT.loop = None
        kept.close()
    return value


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block: a run's error gets no RuntimeError context
        return _run_on_kept_loop(coro)
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
