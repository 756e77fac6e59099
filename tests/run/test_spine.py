"""One reply to the next request in at most 20 spine hops, and through a bounded number
of functions.

The measure (docs/architecture.md, "The spine"): a scripted two-step run (one tool call,
then the answer) through the ``openai`` SDK against a loopback server, under
``sys.setprofile``. The window opens when the SDK's ``chat.completions.create`` returns the
first reply and closes when it is called for the next request: everything the engine does
in between (reading the reply, the policy, running the tool, recording the step, building
the next request) is in it. A **hop** is a fresh call (a coroutine resumed is not one) into
a function of the package, from a frame of another file (another module, or the event
loop starting a task), into a function that calls on into the package within the window:
a stage the reply passes through and a reader has to open another file to follow. Leaf
helpers (a clock read, an id check, a Unicode clean-up) hang off the spine and are not
hops. Each function counts once. The tool is async, so that every frame runs on the
profiled thread, and the run measured is the agent's second (the first imports what a run
loads on first use).

Merging two files removes the hops between them and leaves the code as it was, so the
window is also measured in **functions**: every function of the package called in it, hop
or leaf, each once, whatever file it is in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import openai
import pytest

import react_engine
from react_engine import Agent, tool
from react_engine.testing import ScriptedServer, completion, tool_calls_completion

PACKAGE = str(Path(react_engine.__file__).parent)
TESTING = str(Path(react_engine.__file__).parent / "testing")
LIMIT = 20


@tool
async def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def _replies(protocol: str) -> Iterator[dict[str, Any]]:
    if protocol == "function_calling":
        yield tool_calls_completion(("get_weather", {"city": "Paris"}))
        yield completion("It is sunny in Paris.")
    else:
        action = json.dumps({"city": "Paris"})
        yield completion(f"Thought: look it up\nAction: get_weather\nAction Input: {action}")
        yield completion("Thought: done\nFinal Answer: It is sunny in Paris.")


def _ours(code: CodeType) -> bool:
    return code.co_filename.startswith(PACKAGE) and not code.co_filename.startswith(TESTING)


def _window(protocol: str) -> list[tuple[CodeType, CodeType | None]]:
    """Every fresh call into the package between the first reply and the second request,
    with its caller's code (``None``: the event loop starting a task)."""
    create = openai.resources.chat.completions.AsyncCompletions.create.__code__
    started: dict[int, FrameType] = {}  # every frame entered: a second "call" is a resume
    window: list[tuple[CodeType, CodeType | None]] | None = None
    windows: list[list[tuple[CodeType, CodeType | None]]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal window
        if event != "call" and not (event == "return" and frame.f_code is create):
            return
        code = frame.f_code
        if code is create:
            if event == "return":
                window = []
            elif window is not None:
                windows.append(window)
                window = None
            return
        if started.get(id(frame)) is frame:
            return  # a coroutine resumed
        started[id(frame)] = frame
        if window is not None and _ours(code):
            caller = frame.f_back
            window.append((code, caller.f_code if caller is not None else None))

    async def main() -> str | None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        agent = Agent("scripted", [get_weather], protocol=protocol, client=client)
        await agent.arun("What is the weather in Paris?")  # warm: first-use imports done
        sys.setprofile(profile)
        try:
            result = await agent.arun("What is the weather in Paris?")
        finally:
            sys.setprofile(None)
            await client.close()
        return result.answer

    with ScriptedServer(*_replies(protocol), *_replies(protocol)) as server:
        answer = asyncio.run(main())
    assert answer == "It is sunny in Paris."
    assert len(windows) == 1  # two requests: one window between them
    return windows[0]


def spine_hops(protocol: str) -> list[str]:
    """The hops between the first reply and the second request, as ``file:function``."""
    calls = _window(protocol)
    callers = {caller for _, caller in calls if caller is not None}
    hops = {
        f"{Path(code.co_filename).relative_to(PACKAGE)}:{code.co_qualname}"
        for code, caller in calls
        if code in callers  # it calls on into the package: not a leaf
        and (caller is None or caller.co_filename != code.co_filename)
    }
    return sorted(hops)


def spine_functions(protocol: str) -> list[str]:
    """Every function of the package called between the first reply and the second request
    (hops and leaves), as ``file:function``. Comprehensions, generator expressions and
    lambdas are left out (Python 3.12 inlines the first): what counts is a ``def``."""
    calls = _window(protocol)
    return sorted(
        {
            f"{Path(code.co_filename).relative_to(PACKAGE)}:{code.co_qualname}"
            for code, _ in calls
            if not code.co_name.startswith("<")
        }
    )


FUNCTIONS = {"function_calling": 75, "text": 93}
"""Just above where the spine stands (74 functions for function calling, 93 for text, with
one retry wrapper, one request path, ``PendingCall.record`` and the edge's bound on a
reply, ``limits.too_large``): a change that adds a
function between two requests fails here, with the functions listed, and moving functions
between files changes nothing."""


CEILING = LIMIT
"""Where the spine stands now (20 under both protocols; 22 and 23 before the depth walker,
the constraint style and ``policy.decide`` lost their forwarders): a change that adds a hop
fails here, with the hops listed."""


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_no_new_hop_on_the_spine(protocol: str) -> None:
    hops = spine_hops(protocol)
    assert any(h.endswith("ToolRunner.run") for h in hops)  # the measure sees the stages
    assert any(h.endswith("policy.py:decide") for h in hops)
    assert len(hops) <= CEILING, "\n".join(hops)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_one_reply_to_the_next_request_in_at_most_20_spine_hops(protocol: str) -> None:
    hops = spine_hops(protocol)
    assert len(hops) <= LIMIT, "\n".join(hops)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_no_new_function_between_two_requests(protocol: str) -> None:
    functions = spine_functions(protocol)
    assert "run/execution.py:ToolRunner.run" in functions  # the measure sees the stages
    assert "transport/retries.py:with_retries" in functions  # and the next request
    assert len(functions) <= FUNCTIONS[protocol], "\n".join(functions)
