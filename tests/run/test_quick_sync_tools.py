"""A quick sync tool's call does not suspend its run; a slow one's is not waited for.

A sync tool always runs on a worker thread. While its calls have been quick, the event loop
waits for each, on its own thread, for at most ``BRIEF_WAIT`` before it suspends the run:
at 1,000 concurrent runs, the suspension between a reply and the next request doubled the
garbage collections (docs/performance.md, "what a run holds across an await"). Here the
wait is made long, so that "no suspension" is checked without a clock: a callback
scheduled before the call has not run when the call returns.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from react_engine import tool
from react_engine.run import _threads
from react_engine.tools.base import Tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: a number.
        b: another.
    """
    return a + b


def _tool(function: Any) -> Tool:
    """A fresh tool (its own pace) with ``add``'s arguments."""
    return Tool(
        name=function.__name__,
        description="",
        args_model=add.args_model,
        function=function,
        parameters=add.parameters,
    )


async def _call(the_tool: Tool, arguments: dict[str, Any], timeout: float | None = None) -> Any:
    return await the_tool.ainvoke(the_tool.check(arguments), timeout)


async def _suspended(the_tool: Tool, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """Whether the call let the event loop run something else, and its outcome."""
    ran: list[int] = []
    asyncio.get_running_loop().call_soon(ran.append, 1)
    try:
        outcome: Any = await _call(the_tool, arguments)
    except BaseException as exc:
        outcome = exc
    return bool(ran), outcome


async def test_a_quick_sync_tool_goes_on_without_a_suspension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_threads, "BRIEF_WAIT", 10.0)
    the_tool = _tool(add.function)
    for _ in range(3):
        suspended, value = await _suspended(the_tool, {"a": 2, "b": 3})
        assert (suspended, value) == (False, 5)
    worker = []

    def where() -> str:
        worker.append(threading.current_thread() is not threading.main_thread())
        return "ok"

    on_thread = _tool(lambda a, b: where())
    assert await _suspended(on_thread, {"a": 1, "b": 1}) == (False, "ok")
    assert worker == [True]  # still on a worker thread, never on the loop's


async def test_a_quick_tools_errors_are_raised_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_threads, "BRIEF_WAIT", 10.0)

    def fail(a: int, b: int) -> int:
        raise ValueError("no")

    def stop(a: int, b: int) -> int:
        raise StopIteration

    for function, kind, text in ((fail, ValueError, "no"), (stop, RuntimeError, "StopIteration")):
        failing = _tool(function)
        suspended, error = await _suspended(failing, {"a": 1, "b": 1})
        assert not suspended
        assert isinstance(error, kind) and text in str(error)


async def test_a_slow_sync_tool_is_not_waited_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "BRIEF_WAIT", 0.02)
    gate = threading.Event()

    def slow(a: int, b: int) -> int:
        gate.wait(5)
        return a + b

    slow_tool = _tool(slow)
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, gate.set)
    assert await _suspended(slow_tool, {"a": 1, "b": 2}) == (True, 3)  # waited, then awaited
    # Its call took longer than the brief wait: the next one suspends at once (the loop
    # runs the callback while the tool still waits for its gate).
    gate.clear()
    ran: list[int] = []
    loop.call_soon(ran.append, 1)
    loop.call_soon(gate.set)
    assert await _call(slow_tool, {"a": 2, "b": 2}) == 4
    assert ran == [1]


async def test_the_timeout_holds_when_it_is_shorter_than_the_brief_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_threads, "BRIEF_WAIT", 10.0)
    gate = threading.Event()

    def stuck(a: int, b: int) -> int:
        gate.wait(5)
        return 0

    stuck_tool = _tool(stuck)
    try:
        with pytest.raises(_threads.DeadlinePassed) as caught:
            await _call(stuck_tool, {"a": 1, "b": 1}, timeout=0.05)
        assert "0.05" in str(caught.value) and caught.value.started
    finally:
        gate.set()
