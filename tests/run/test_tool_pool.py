"""The sync-tool pool's hand-off (``run/_threads.py``, docs/performance.md): calls that end
before their loop wakes up are settled together by one wake-up, and a burst of calls does
not wake a thread per call, yet each call still gets a thread when the others run long."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from react_engine.run import _threads
from react_engine.run._threads import run_sync_call


def _wait_until(check: Callable[[], bool]) -> None:
    """Block (this thread, the loop's included) until ``check()`` holds: a wait, never an
    assertion on how long it took."""
    give_up = time.monotonic() + 30
    while not check():
        assert time.monotonic() < give_up, "the worker threads never got there"
        time.sleep(0.001)


def _count_wake_ups(monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop) -> list[int]:
    calls = [0]
    real = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    return calls


def test_calls_that_end_before_the_loop_wakes_are_settled_by_one_wake_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()
    started = [0]
    lock = threading.Lock()

    def held(i: int) -> int:
        with lock:
            started[0] += 1
        gate.wait(30)
        return i * i

    async def main() -> None:
        loop = asyncio.get_running_loop()
        wake_ups = _count_wake_ups(monkeypatch, loop)
        calls = [asyncio.ensure_future(run_sync_call(held, i)) for i in range(20)]
        while started[0] < 20:  # every call on a thread of its own, all held
            await asyncio.sleep(0.001)
        assert wake_ups[0] == 0
        # Let them all end while the loop is busy (blocked here): each appends its call to
        # the loop's inbox, and only the first asks the loop to wake up.
        gate.set()
        inbox = _threads._inbox(loop)
        _wait_until(lambda: len(inbox.calls) == 20)
        assert await asyncio.gather(*calls) == [i * i for i in range(20)]
        assert wake_ups[0] == 1  # was 20: one call_soon_threadsafe per ended call
        # The inbox is open again: the next call's end wakes the loop once more.
        assert await run_sync_call(held, 3) == 9
        assert wake_ups[0] == 2

    asyncio.run(main())


def test_a_burst_of_calls_that_wait_on_each_other_still_gets_a_thread_each() -> None:
    # At most one thread is woken at a time, and a thread that takes a call wakes the next
    # one only while calls are queued: the chain must still reach every call, or these
    # eight, which can only end together, would never end.
    together = threading.Barrier(8, timeout=30)

    def meet(i: int) -> int:
        together.wait()
        return i

    async def main() -> list[int]:
        return await asyncio.gather(*(run_sync_call(meet, i) for i in range(8)))

    assert asyncio.run(main()) == list(range(8))
    assert not together.broken


class _LockWithAHook:
    """The pool's lock, running ``hook`` once, on the worker thread, just before the worker
    takes the lock to record an ended call: the window in which a caller's brief wait can
    run out and hand the call to its loop."""

    def __init__(self) -> None:
        self.real = threading.Lock()
        self.armed = False
        self.hook: Callable[[], None] | None = None

    def __enter__(self) -> bool:
        hook = self.hook
        if self.armed and hook is not None:
            self.armed = False
            hook()
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)


def test_a_call_handed_to_its_loop_just_as_it_ends_is_still_settled() -> None:
    # The worker used to read the call's inbox before taking the lock: a call handed to its
    # loop in between (its caller's brief wait ran out) was never settled, and its run hung.
    pool = _threads._DaemonPool()
    lock = _LockWithAHook()
    pool._lock = lock  # type: ignore[assignment]
    handed: list[asyncio.Future[Any] | None] = []

    async def main() -> Any:
        loop = asyncio.get_running_loop()

        def function() -> str:
            lock.armed = True  # the worker's next lock section records the end
            return "done"

        call = _threads._Call(function, loop, None, _threads._Waiting())
        lock.hook = lambda: handed.append(pool.hand_to_loop(call))
        pool.submit(call)
        while not handed:
            await asyncio.sleep(0.001)
        waiter = handed[0]
        assert waiter is not None  # the call had not ended yet when it was handed over
        return await asyncio.wait_for(waiter, 30)

    assert asyncio.run(main()) == "done"
