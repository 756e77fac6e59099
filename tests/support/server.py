"""A :class:`MockOpenAIServer` that answers from a script, and reply builders for both protocols.

Each test pushes the HTTP answers it wants, in order: a JSON-ready body (status 200), a
:class:`MockResponse` (any fault), or a function of the request body returning either.
Once the script is spent, ``default`` answers (or a 500 saying the script ran out, which a
test sees as a retried failure rather than as a hang).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

from react_engine.mock_server import MockOpenAIServer, MockResponse, completion

Answer = MockResponse | dict[str, Any]
ScriptItem = Answer | Callable[[dict[str, Any]], Answer]

_ids = itertools.count(1)


class ScriptedServer:
    """A loopback OpenAI-compatible server whose answers come from a queue."""

    def __init__(self, *items: ScriptItem, default: ScriptItem | None = None) -> None:
        self._queue: deque[ScriptItem] = deque(items)
        self._lock = threading.Lock()
        self.default = default
        self.mock = MockOpenAIServer(self._respond)

    def push(self, *items: ScriptItem) -> None:
        with self._lock:
            self._queue.extend(items)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    @property
    def base_url(self) -> str:
        return self.mock.base_url

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every decoded request body, in arrival order."""
        return self.mock.requests

    def _respond(self, body: dict[str, Any]) -> Answer:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        if item is None:
            return MockResponse(500, {"error": {"message": "the test script ran out"}})
        return item(body) if callable(item) else item

    def __enter__(self) -> ScriptedServer:
        self.mock.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.mock.stop()


class FakeSleep:
    """Stands in for ``asyncio.sleep`` in a RetryPolicy: records each wait, returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


# --- reply bodies, per protocol ----------------------------------------------------------------


def raw_tool_call(name: str | None, arguments: Any, call_id: str | None = "auto") -> dict[str, Any]:
    """One entry of ``message.tool_calls`` exactly as given (ids may be missing or repeated)."""
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id == "auto":
        call["id"] = f"call_{next(_ids)}"
    elif call_id is not None:
        call["id"] = call_id
    return call


def text_action(tool: str, arguments: dict[str, Any] | str, thought: str = "I will look.") -> str:
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {shown}"


def call_body(
    protocol: str, tool: str, arguments: dict[str, Any] | str, **kwargs: Any
) -> dict[str, Any]:
    """A reply that calls one tool: native ``tool_calls`` or a Thought/Action block."""
    if protocol == "function_calling":
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return completion(None, tool_calls=[raw_tool_call(tool, text)], **kwargs)
    return completion(text_action(tool, arguments), **kwargs)


def final_body(protocol: str, answer: str, **kwargs: Any) -> dict[str, Any]:
    """A reply that gives the final answer."""
    if protocol == "function_calling":
        return completion(answer, **kwargs)
    return completion(f"Thought: I now know the final answer\nFinal Answer: {answer}", **kwargs)


def last_feedback(body: dict[str, Any]) -> str:
    """What the engine told the model last: the tool or user message at the end of a request."""
    content = body["messages"][-1]["content"]
    assert isinstance(content, str)
    return content
