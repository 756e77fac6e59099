"""Reply builders for both protocols and a fake sleep, for tests that drive the scripted
server (:class:`react_engine.testing.ScriptedServer`)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from react_engine.testing import completion

_ids = itertools.count(1)


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
