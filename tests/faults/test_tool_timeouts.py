"""A tool's own ``TimeoutError`` is the tool's error, not the engine's timeout.

A tool whose HTTP client gives up after 0.5 s raises ``TimeoutError`` (``socket.timeout`` is
the same class): the model must read that error, with its text, as an ``error`` observation,
not "did not finish within 30s ... still running on its thread". Only the engine's own time
limit (``tool_timeout``, a tool's ``timeout``, the run's ``deadline``) is a ``timeout``.
Through the whole agent, for sync and async tools, under both protocols.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from react_engine import Agent, RunResult, ScriptedModel, reply, tool, tool_call_reply

PROTOCOLS = ["function_calling", "text"]


def run(protocol: str, the_tool: Any, **options: Any) -> RunResult:
    if protocol == "function_calling":
        replies = [tool_call_reply(("fetch", {"url": "http://x"})), reply("done")]
    else:
        replies = [
            'Thought: I fetch it.\nAction: fetch\nAction Input: {"url": "http://x"}',
            "Final Answer: done",
        ]
    agent = Agent("m", [the_tool], client=ScriptedModel(replies), protocol=protocol, **options)
    return agent.run("q")


@tool
def sync_fetch(url: str) -> str:
    """Fetch a URL (its HTTP client times out at once)."""
    time.sleep(0.05)
    raise socket.timeout("timed out")  # noqa: UP041 - what a socket read raises


@tool
async def async_fetch(url: str) -> str:
    """Fetch a URL (its HTTP client times out at once)."""
    await asyncio.sleep(0.05)
    raise TimeoutError("read timed out after 0.5s")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("function", "text"),
    [(sync_fetch, "TimeoutError: timed out"), (async_fetch, "read timed out after 0.5s")],
    ids=["sync", "async"],
)
@pytest.mark.parametrize(
    "options",
    [{}, {"tool_timeout": 5.0}, {"tool_timeout": None}, {"tool_timeout": None, "deadline": 30}],
    ids=["default", "tool_timeout", "no_limit", "deadline_only"],
)
def test_a_tools_own_timeout_is_its_error(
    protocol: str, function: Any, text: str, options: dict[str, Any]
) -> None:
    the_tool = tool(name="fetch")(function.function)
    result = run(protocol, the_tool, **options)
    (action,) = result.tool_calls
    assert action.status == "error"
    assert text in action.observation
    assert "fetch failed: TimeoutError" in action.observation
    assert "did not finish within" not in action.observation
    assert "still running on its thread" not in action.observation
    assert not any(
        "overran" in event for step in result.steps for event in [n.message for n in step.notices]
    )
    assert result.answer == "done"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_engines_own_limit_is_still_a_timeout(protocol: str, kind: str) -> None:
    if kind == "sync":

        def slow(url: str) -> str:
            """Fetch slowly."""
            time.sleep(1.0)
            return "late"

    else:

        async def slow(url: str) -> str:
            """Fetch slowly."""
            await asyncio.sleep(1.0)
            return "late"

    result = run(protocol, tool(name="fetch")(slow), tool_timeout=0.2)
    (action,) = result.tool_calls
    assert action.status == "timeout"
    assert action.observation.startswith("Error: fetch did not finish within 0.2s")
    assert ("still running on its thread" in action.observation) == (kind == "sync")
