"""Long-lived thread pools for blocking work: one for sync SDK clients, one for sync tools.

``asyncio.to_thread`` uses the running loop's default executor, which ``asyncio.run``
creates and joins for every blocking ``Agent.run()``: threads are started and torn down on
every run, and one stuck call (a sync tool past its timeout) holds the run until it ends.
A module-level pool avoids both.

And the blocking runs' own event loop (:func:`run_coroutine`), kept per thread, on which a
sync client's request runs inline, without a worker thread, while the run is alone there
(:func:`inline_watch`): one watchdog thread holds every inline request's time limit, and
the loop's Ctrl-C handler aborts the request in progress.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C half: no stubs
import asyncio
import atexit
import collections
import contextlib
import contextvars
import functools
import math
import os
import select
import signal
import threading
import time
import weakref
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
    waiter = loop.create_future()
    call = _Call(
        functools.partial(contextvars.copy_context().run, function, *args, **kwargs),
        loop,
        waiter,
    )
    submitted = _pool().submit(_run_and_settle, call)
    try:
        value: T = await waiter
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


BRIEF_WAIT = 0.0002
"""Seconds the event loop's thread waits for a quick sync tool's call to end on its worker
thread before it suspends the run (see :class:`Pace`): longer than a quick function takes
there (a thread wake-up and a few microseconds of Python), short enough that a tool slower
than it stalls the loop's other runs no more than that, once."""


class Pace:
    """Whether one sync tool's next call is expected to end within :data:`BRIEF_WAIT`
    (each call is timed on its worker thread).

    Why wait at all, with other runs on the loop: a run suspended while its tool runs has
    let go of its request's objects and not yet built the next ones, and the event loop
    resumes such runs back to back, so their frees, then their allocations, come in long
    runs of one sign; generation 0's counter is allocations minus frees, never below zero,
    so the frees are lost and the allocations set off collections. At 1,000 concurrent runs
    that made half again as many collections for a run whose sync tool returns at once
    (docs/performance.md, "what a run holds across an await"). A call that ends within the
    wait goes on without a suspension; a tool whose call took longer is not waited for on
    its next call, nor, while a call of it is running past the wait, on anyone's."""

    __slots__ = ("quick",)

    def __init__(self) -> None:
        self.quick = True


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
    future with one ``call_soon_threadsafe`` (the sync-tool pool through the caller loop's
    :class:`_Inbox`, shared by every call that ends before the loop wakes up), or, for a
    caller that waits for it in its own thread, releases its ``waiting`` lock (see
    :func:`_wait_here`)."""

    __slots__ = (
        "abandoned",
        "elapsed",
        "error",
        "function",
        "inbox",
        "loop",
        "state",
        "value",
        "waiter",
        "waiting",
    )

    def __init__(
        self,
        function: Callable[[], Any],
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[Any] | None,
        waiting: _Waiting | None = None,
        inbox: _Inbox | None = None,
    ) -> None:
        self.function = function
        self.loop = loop
        self.waiter = waiter
        self.waiting = waiting
        self.inbox = inbox  # where a sync-tool pool thread leaves it ended (_DaemonPool)
        self.state = _QUEUED
        self.abandoned = False
        self.elapsed = 0.0
        """Seconds the function ran, on its worker thread (for :class:`Pace`)."""
        self.value: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        """What the function returned, or its exception raised (the call has ended)."""
        if self.error is not None:
            raise self.error
        return self.value


class _Waiting:
    """A sync call's caller waiting for it in the loop's own thread (:func:`_wait_here`):
    the lock the worker releases when the call ends, or a Ctrl-C does."""

    __slots__ = ("done", "interrupted")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.interrupted = False

    def release(self) -> None:
        with contextlib.suppress(RuntimeError):  # released already: by the other side
            self.done.release()

    def interrupt(self) -> None:
        """From the signal handler, in the waiting thread: its ``acquire`` returns."""
        self.interrupted = True
        self.release()


def _settle(call: _Call) -> None:
    """On the caller's loop: hand the ended call's outcome to its waiter (if still waited)."""
    waiter = call.waiter
    if waiter is None or waiter.done():
        return
    error = call.error
    if error is None:
        waiter.set_result(call.value)
    elif isinstance(error, StopIteration):  # a future cannot hold one
        waiter.set_exception(RuntimeError(f"the call raised {error!r}"))
    else:
        waiter.set_exception(error)


class _Inbox:
    """One event loop's ended sync calls, waiting to be settled together.

    A worker that ends a call appends it here; only the first one since the loop last
    emptied the inbox wakes the loop (``call_soon_threadsafe``: a handle, a write to the
    loop's self-pipe, and the worker giving up the GIL for that write), and the loop
    settles every call it finds in one callback. Under load, a loop settles the calls of
    many workers per wake-up. Lock-free: ``deque`` appends and pops are atomic, the loop
    clears ``scheduled`` before it empties the deque, and a worker sets it after its
    append, so an ended call is always either seen by a drain or followed by a wake-up
    (at worst one wake-up too many, which finds the inbox empty)."""

    __slots__ = ("calls", "scheduled")

    def __init__(self) -> None:
        self.calls: collections.deque[_Call] = collections.deque()
        self.scheduled = False


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    try:
        inbox = _INBOXES.get(loop)
        if inbox is None:
            inbox = _INBOXES.setdefault(loop, _Inbox())
    except TypeError:  # a loop that takes no weak reference: an inbox per call
        return _Inbox()
    return inbox


def _settle_inbox(inbox: _Inbox) -> None:
    """On the caller's loop: settle every call that ended since the loop last looked."""
    inbox.scheduled = False  # before the drain: a call appended after this wakes us again
    calls = inbox.calls
    while calls:
        _settle(calls.popleft())


def _wake(loop: asyncio.AbstractEventLoop, inbox: _Inbox) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop is closed
        loop.call_soon_threadsafe(_settle_inbox, inbox)


class _DaemonPool:
    """A bounded pool of daemon threads for sync tools.

    Apart from the pool above, so that stuck tools never starve the sync SDK client's
    requests; of daemon threads, so that a tool stuck past its timeout never keeps the
    interpreter from exiting (``ThreadPoolExecutor`` joins its threads at exit). A call
    abandoned by its caller (a timeout, a cancelled run) gives its thread up: the thread
    ends when the call does, and a fresh one takes its place in the pool; at most
    :data:`MAX_STUCK_THREADS` such threads live at once.

    Cheap hand-offs, for a thousand runs calling trivial tools at once: at most one
    thread is on its way to the queue at a time (woken, or just started, and not yet
    holding a call), and a thread that takes a call wakes the next one only if more calls
    are queued, so a burst of calls does not wake a thread per call that then competes for
    the GIL and finds the queue empty; each call still gets a thread of its own when its
    predecessors run long. A thread takes its next call in the same lock section where it
    records the end of the last one, the most recently idle thread is woken first (its
    caches are warm), and ended calls go back to their loop through its :class:`_Inbox`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: collections.deque[_Call] = collections.deque()
        self._sleeping: list[threading.Lock] = []  # idle threads' wake-up locks (held)
        self._threads = 0  # threads serving the pool (stuck ones not counted)
        self._waking = 0  # threads woken or started that have not yet looked at the queue
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
            if not self._waking:
                self._wake_one()

    def _wake_one(self) -> None:
        """Wake an idle thread, or start one if the pool may have it (the lock is held)."""
        if self._sleeping:
            self._waking += 1
            self._sleeping.pop().release()
        elif (
            self._threads < MAX_TOOL_THREADS
            and self._threads + self._stuck < MAX_TOOL_THREADS + MAX_STUCK_THREADS
        ):
            self._threads += 1
            self._waking += 1
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
                if self._pending and not self._waking:
                    self._wake_one()
            elif call.state == _QUEUED:
                call.state = _DROPPED
            return call.state

    def hand_to_loop(self, call: _Call) -> asyncio.Future[Any] | None:
        """A call its caller waited for in its own thread (``waiting``), to be settled on
        its loop instead (a future); ``None`` when it has ended already."""
        with self._lock:
            if call.state == _DONE:
                return None
            waiter = call.waiter = call.loop.create_future()
            call.waiting = None
            if call.inbox is None:
                call.inbox = _inbox(call.loop)
            return waiter

    def _take(self) -> _Call | None:
        """The next queued call, now running (the lock is held); wakes the next thread
        when more are queued."""
        pending = self._pending
        while pending:
            call = pending.popleft()
            if call.state == _QUEUED:  # not dropped by its caller while queued
                call.state = _RUNNING
                if pending and not self._waking:
                    self._wake_one()
                return call
        return None

    def _work(self) -> None:
        lock = self._lock
        wake = threading.Lock()  # held while this thread sleeps; released to wake it
        wake.acquire()
        with lock:
            self._waking -= 1
            call = self._take()
            if call is None:
                self._sleeping.append(wake)
        while True:
            if call is None:
                wake.acquire()
                with lock:
                    self._waking -= 1
                    call = self._take()
                    if call is None:  # another thread took it first
                        self._sleeping.append(wake)
                continue
            started = time.perf_counter()
            try:
                call.value = call.function()
            except BaseException as exc:  # handed to the caller, whatever it is
                call.error = exc
            call.elapsed = time.perf_counter() - started
            with lock:
                call.state = _DONE
                if call.abandoned:
                    self._stuck -= 1
                    # A fresh thread took its place in the pool, unless the caps kept it
                    # from starting: then calls may be waiting that only this one can run.
                    if self._pending and not self._waking:
                        self._wake_one()
                    return
                if call.waiting is not None:  # its caller waits, blocked: nothing to settle
                    call.waiting.release()
                    call = self._take()
                    if call is None:
                        self._sleeping.append(wake)
                    continue
                # Read under the lock: a caller whose brief wait ran out may have handed the
                # call to its loop (``hand_to_loop``) after the call ended, before this.
                inbox = call.inbox
                assert inbox is not None  # set by the time its caller awaits it
                inbox.calls.append(call)
                signal = not inbox.scheduled
                inbox.scheduled = True
                loop = call.loop
                # The next call in the same lock section (or sleep, registered before the
                # wake-up below, so that a call submitted meanwhile finds this thread).
                call = self._take()
                if call is None:
                    self._sleeping.append(wake)
            if signal:
                _wake(loop, inbox)
            del loop, inbox


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
    raises is raised as it is. In a blocking run alone on its loop (``agent.run()``), the
    loop's thread waits for the worker itself (:func:`_wait_here`).
    """
    return await call_sync(function, args, kwargs, timeout)


async def call_sync(
    function: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout: float | None = None,
    pace: Pace | None = None,
) -> T:
    """:func:`run_sync_call` of ``function(*args, **kwargs)``. With a tool's ``pace`` and
    other runs on the loop, a call expected to be quick is waited for in the loop's thread
    for up to :data:`BRIEF_WAIT` (it still runs on a worker thread), and its run goes on
    without a suspension when it ends within it (see :class:`Pace`)."""
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    work = functools.partial(context.run, function, *args, **kwargs)
    alone = _alone_on(loop)
    if alone is not None:
        runner, task = alone
        waiting = _Waiting()
        runner.inline = waiting
        if not task.cancelling():  # checked once in place: a Ctrl-C sees one or this
            here: T = await _wait_here(runner, _Call(work, loop, None, waiting), timeout)
            return here
        runner.inline = None
    if pace is not None and pace.quick:
        waiting = _Waiting()
        call = _Call(work, loop, None, waiting)
        _TOOLS.submit(call)
        brief = BRIEF_WAIT if timeout is None else min(BRIEF_WAIT, timeout)
        waiting.done.acquire(timeout=brief)
        handed = _TOOLS.hand_to_loop(call)
        if handed is None:  # it has ended: the run goes on without a suspension
            pace.quick = call.elapsed < BRIEF_WAIT
            if isinstance(call.error, StopIteration):  # as _settle hands it over
                raise RuntimeError(f"the call raised {call.error!r}")
            quick: T = call.outcome()
            return quick
        if call.state == _RUNNING:  # not one still queued: a thread was slow to take it
            pace.quick = False  # the runs calling it meanwhile are not held up too
        left = None if timeout is None else timeout - brief
        ended: T = await _await_call(call, handed, timeout, left)
        pace.quick = call.elapsed < BRIEF_WAIT
        return ended
    waiter = loop.create_future()
    call = _Call(work, loop, waiter, None, _inbox(loop))
    _TOOLS.submit(call)
    value: T = await _await_call(call, waiter, timeout, timeout)
    return value


async def _await_call(
    call: _Call, waiter: asyncio.Future[Any], timeout: float | None, left: float | None
) -> Any:
    """The rest of :func:`run_sync_call`: the submitted call's outcome, within ``left`` of
    its ``timeout`` seconds."""
    try:
        if left is None:
            value = await waiter
        else:
            # asyncio.timeout, not wait_for: no task, future and callback of its own.
            async with asyncio.timeout(left):
                value = await waiter
        return value
    except BaseException as exc:
        waiter.cancel()  # an outcome still to come is dropped
        status = _TOOLS.abandon(call)
        if status == _DONE:
            if isinstance(exc, TimeoutError):
                # The function's own TimeoutError, or the time ran out just as it ended:
                # its own outcome either way (raised as it raised it).
                return call.outcome()
            raise
        if isinstance(exc, TimeoutError) and timeout is not None:
            raise DeadlinePassed(timeout, started=status == _RUNNING) from None
        raise


async def _wait_here(runner: _Runner, call: _Call, timeout: float | None) -> Any:
    """The sync call on a worker thread as :func:`run_sync_call` has it, waited for in the
    loop's own thread, which has nothing else to do (:func:`_alone_on`): a lock the worker
    releases, instead of a future settled through the loop (``call_soon_threadsafe``, the
    loop's wake-up pipe, a timer for the timeout, the task woken), about 60–100 µs less CPU
    per call in a sync ``agent.run()`` (docs/performance.md). The timeout and
    ``ThreadsExhausted`` are the same; a Ctrl-C releases the lock (:class:`_Runner`) and the
    run's task, cancelled, gets its ``CancelledError`` here.

    Every :data:`_POLL` seconds the wait looks at the loop: a callback that another thread
    scheduled on it (``call_soon_threadsafe``; a sync tool calling back into the run's
    loop with ``run_coroutine_threadsafe`` would otherwise wait for itself) hands the
    call back to the loop, awaited as :func:`run_sync_call` awaits it."""
    waiting = call.waiting
    assert waiting is not None
    loop: Any = call.loop
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        _TOOLS.submit(call)
        while True:
            left = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
            ended = waiting.done.acquire(timeout=max(left, 0.0))
            if ended or (deadline is not None and time.monotonic() >= deadline):
                break
            if loop._ready and (waiter := _TOOLS.hand_to_loop(call)) is not None:
                runner.inline = None
                rest = None if deadline is None else deadline - time.monotonic()
                return await _await_call(call, waiter, timeout, rest)
    except BaseException:  # ThreadsExhausted, or a second Ctrl-C's KeyboardInterrupt
        runner.inline = None
        _TOOLS.abandon(call)
        raise
    runner.inline = None
    if waiting.interrupted:
        _TOOLS.abandon(call)
        await asyncio.sleep(0)  # the runner cancelled the task: raised here
        raise asyncio.CancelledError  # (a cancellation the task did not get: not expected)
    if not ended:
        status = _TOOLS.abandon(call)
        if status != _DONE:
            raise DeadlinePassed(timeout or 0.0, started=status == _RUNNING)
    if isinstance(call.error, StopIteration):  # as _settle hands it over
        raise RuntimeError(f"the call raised {call.error!r}")
    return call.outcome()


_POLL = 0.05
"""Seconds between two looks at the loop while its thread waits for a sync call."""


# --- the blocking SDK call inline on the private loop -------------------------------------------


class _Runner(asyncio.Runner):  # type: ignore[misc]  # final in typeshed, not in asyncio
    """``asyncio.Runner`` for the kept loop, with a run of its own (:meth:`run`).

    Its Ctrl-C handler also gives up the blocking call running inline on the loop
    (:func:`inline_watch`): that call is in a socket read, which the signal interrupts only
    for the handler to run (PEP 475 then retries the read), so the handler has the
    watchdog shut the call's connection down under it, and the first Ctrl-C cancels the
    run as promptly as when the loop waits for a worker thread."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: _Watch | _Waiting | None = None
        """The blocking call running inline on this runner's loop, or the sync call its
        thread waits for, if there is one: what a Ctrl-C interrupts."""
        self.on_sigint = self._on_interrupt  # one object: installed, then recognised
        self._task: asyncio.Task[Any] | None = None
        self._interrupts = 0

    def run(self, coro: Coroutine[Any, Any, T], *, context: Any = None) -> T:
        """``asyncio.Runner.run``: the coroutine in a task of its own, the first Ctrl-C
        cancelling it and ending the run with ``KeyboardInterrupt``, a second raising
        ``KeyboardInterrupt`` at once. The handler goes in and out through ``_signal``:
        ``signal.signal`` and ``signal.getsignal`` try the handler as a ``Handlers`` enum
        value and format the task's ``repr`` for the error they catch, about 11 µs a run."""
        loop = self.get_loop()
        task = self._task = loop.create_task(coro, context=context)
        installed = False
        if (
            threading.current_thread() is threading.main_thread()
            and _signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            with contextlib.suppress(ValueError):  # an interpreter without signals
                _signal.signal(signal.SIGINT, self.on_sigint)
                installed = True
        self._interrupts = 0
        try:
            value: T = loop.run_until_complete(task)
            return value
        except asyncio.CancelledError:
            if self._interrupts and task.uncancel() == 0:
                raise KeyboardInterrupt() from None
            raise
        finally:
            self._task = None
            if installed and _signal.getsignal(signal.SIGINT) is self.on_sigint:
                _signal.signal(signal.SIGINT, signal.default_int_handler)

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        watch = self.inline
        if watch is not None:
            watch.interrupt()
        self._interrupts += 1
        task = self._task
        if self._interrupts == 1 and task is not None and not task.done():
            task.cancel()
            self.get_loop().call_soon_threadsafe(_nothing)  # wake a loop waiting in select
            return
        raise KeyboardInterrupt()


def _nothing() -> None:
    pass


_RETRY_ABORT = 0.05
"""Seconds between a given-up call's aborts while it has not ended (an abort finds nothing
to shut down while the request is still connecting)."""


class _Watch:
    """One blocking call running inline, and what ends it: its deadline (``limit``
    seconds), a Ctrl-C, and ``abort(target)`` to shut its connection down from another
    thread."""

    __slots__ = ("abort", "deadline", "expired", "interrupted", "runner", "target")

    def __init__(
        self, runner: _Runner, deadline: float, abort: Callable[[Any], None], target: Any
    ) -> None:
        self.runner = runner
        self.deadline = deadline
        self.abort = abort
        self.target = target
        self.expired = False
        """The watchdog gave the call up at its deadline."""
        self.interrupted = False
        """A Ctrl-C gave the call up."""

    def interrupt(self) -> None:
        """From a signal handler, in the call's own thread: no lock taken (the thread may
        hold one), only a byte written to wake the watchdog."""
        self.interrupted = True
        self.deadline = 0.0
        _WATCHDOG.wake()


class _Watchdog:
    """One daemon thread for every inline call's deadline (none started per call).

    Registering is a set insertion under a lock; the thread is woken (a byte in a pipe,
    safe from a signal handler) only when the new deadline is earlier than its next
    wake-up. A thread runs one inline call at a time, so the live calls are few and a
    plain set, scanned when the thread wakes, does what a heap would; a call that ended
    leaves nothing behind (a heap would keep its entry until its deadline, 600 s at the
    default limit). A call past its deadline is aborted, then again every
    :data:`_RETRY_ABORT` seconds until it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()
        self._wake_at = math.inf
        self._pipe: tuple[int, int] | None = None

    def add(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.add(watch)
            if watch.deadline < self._wake_at:
                if self._pipe is None:
                    self._start()
                self._wake_at = watch.deadline
                self.wake()

    def discard(self, watch: _Watch) -> None:
        self._watches.discard(watch)  # one bytecode under the GIL: no lock

    def wake(self) -> None:
        pipe = self._pipe
        if pipe is not None:
            with contextlib.suppress(OSError):  # full (already woken) or closed
                os.write(pipe[1], b"\0")

    def _start(self) -> None:
        read, write = os.pipe()
        try:
            os.set_blocking(read, False)
            os.set_blocking(write, False)
            threading.Thread(
                target=self._watch, args=(read,), name="react-engine-watchdog", daemon=True
            ).start()
        except BaseException:  # no thread (the interpreter is exiting): no watch either
            os.close(read)
            os.close(write)
            raise
        self._pipe = (read, write)

    def close_pipe(self) -> None:
        """In a forked child: the parent's thread is not there, its pipe is the parent's."""
        pipe, self._pipe = self._pipe, None
        for fd in pipe or ():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _watch(self, read: int) -> None:
        while True:
            wake_at = self._fire()
            timeout = None if wake_at == math.inf else max(wake_at - time.monotonic(), 0.0)
            with contextlib.suppress(InterruptedError):
                select.select([read], [], [], timeout)
            with contextlib.suppress(OSError):
                os.read(read, 512)

    def _fire(self) -> float:
        """Abort the calls past their deadline; the time of the next one. (A method of its
        own: nothing of a call is held by the thread while it sleeps.)"""
        with self._lock:
            now = time.monotonic()
            due = [w for w in self._watches if w.deadline <= now]
            for watch in due:
                watch.deadline = now + _RETRY_ABORT
            wake_at = self._wake_at = min((w.deadline for w in self._watches), default=math.inf)
        for watch in due:
            if not watch.interrupted:
                watch.expired = True
            with contextlib.suppress(Exception):
                watch.abort(watch.target)
        return wake_at


_WATCHDOG = _Watchdog()


def _watchdog_after_fork() -> None:
    global _WATCHDOG
    _WATCHDOG.close_pipe()
    _WATCHDOG = _Watchdog()  # the parent's thread is not in the child, nor its lock's owner


_INLINE = hasattr(os, "register_at_fork")
"""Calls run inline on POSIX only (the watchdog waits on a pipe with ``select``)."""
if _INLINE:
    os.register_at_fork(after_in_child=_watchdog_after_fork)


def inline_watch(limit: float, abort: Callable[[Any], None], target: Any) -> _Watch | None:
    """Registered with the watchdog, the watch of a blocking call that may run inline on
    the running loop, or ``None`` when it must go to a worker thread (:func:`run_blocking`).

    Inline only on the engine's private loop of a blocking run (``agent.run()``, see
    :func:`_run_on_kept_loop`), with nothing else on it that the call would hold up: no
    other task, no timer (a run's deadline is one), no callback ready, no file descriptor
    watched but the loop's own wake-up; on the main thread, only with the runner's own
    Ctrl-C handler in place (it is what gives the call up, :class:`_Runner`); and never
    once the run is being cancelled."""
    alone = _alone_on(asyncio.get_running_loop())
    if alone is None:
        return None
    runner, task = alone
    watch = _Watch(runner, time.monotonic() + limit, abort, target)
    runner.inline = watch
    try:
        _WATCHDOG.add(watch)
    except Exception:  # no watchdog thread: the call goes to a worker thread
        _end_inline(watch)
        return None
    if task.cancelling():  # checked once the watch is in place: a Ctrl-C sees one or this
        _end_inline(watch)
        return None
    return watch


def _alone_on(loop: asyncio.AbstractEventLoop) -> tuple[_Runner, asyncio.Task[Any]] | None:
    """This thread's runner of a blocking run and the run's task, when ``loop`` is that
    runner's loop and holds nothing that a call blocking its thread would hold up (see
    :func:`inline_watch`)."""
    kept: _KeptLoop | None = getattr(_KEPT, "loop", None)
    if kept is None or not _INLINE:
        return None
    runner = kept.runner
    try:
        if (
            runner._loop is not loop  # type: ignore[attr-defined]
            or loop._ready
            or len(loop._selector.get_map()) != 1
            or not all(timer.cancelled() for timer in loop._scheduled)
        ):
            return None
    except AttributeError:  # a loop of another kind
        return None
    if (
        threading.current_thread() is threading.main_thread()
        and _signal.getsignal(signal.SIGINT) is not runner.on_sigint
    ):
        return None
    task = asyncio.current_task(loop)
    if task is None or len(asyncio.all_tasks(loop)) != 1:
        return None
    return runner, task


def _end_inline(watch: _Watch) -> None:
    watch.runner.inline = None
    _WATCHDOG.discard(watch)


async def run_inline(watch: _Watch, function: Callable[..., T], /, *args: Any) -> T:
    """Run a blocking call on the loop's own thread, with a copy of the caller's context
    variables (as on a worker thread), under ``watch`` (from :func:`inline_watch`).

    As :func:`run_blocking` inside ``asyncio.timeout``: past the deadline the watchdog
    aborts the call and this raises ``TimeoutError``; a Ctrl-C aborts it and the run's
    task, which the runner's handler cancelled, gets its ``CancelledError`` here."""
    error: Exception | None = None
    try:
        value: T = contextvars.copy_context().run(function, *args)
    except Exception as exc:  # raised below, once the call is given up or not
        error = exc
    finally:
        _end_inline(watch)
    try:
        if watch.interrupted:
            await asyncio.sleep(0)  # the cancellation is delivered at this yield
        if error is not None:
            if watch.expired:
                raise TimeoutError  # outside an except block: not chained to the SDK's error
            raise error
        return value
    finally:
        del error


class _KeptLoop:
    """One thread's event loop for its blocking runs (``agent.run()``), kept between them.

    ``asyncio.run`` makes a loop (a selector, a self-pipe, a signal wake-up fd) and tears
    it down for every call: about 80 µs of CPU per ``agent.run()``, a sizeable part of what
    the sync API costs beyond the bare SDK loop. The loop is kept only while it is as clean
    as a new one: see :func:`_run_on_kept_loop`."""

    __slots__ = ("pid", "runner")

    def __init__(self) -> None:
        self.runner = _Runner()
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
        # A fresh copy of the caller's context for each run: the runner's own (copied when
        # its loop was made) would hand the first run's variables to every later one.
        value = kept.runner.run(coro, context=contextvars.copy_context())
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
