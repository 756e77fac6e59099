"""A tool that raises a ``BaseException`` of a kind the engine does not know (pytest's
``Failed``, gevent's ``Timeout``) ends the run with the same exception, and the transcript
rides on it as ``exc.result``. It used to escape with no result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from react_engine import Agent, ScriptedModel, reply, tool_call_reply


class GeventLikeTimeout(BaseException):
    """gevent's Timeout derives from BaseException, so that ``except Exception`` misses it."""


class Slotted(BaseException):
    __slots__ = ()  # BaseException keeps a __dict__ anyway: the result still fits


def fail_the_test() -> None:
    pytest.fail("the tool asked the test to fail")


def raise_timeout() -> None:
    raise GeventLikeTimeout("gevent timeout")


def raise_slotted() -> None:
    raise Slotted("no attributes here")


KINDS: dict[str, tuple[Callable[[], None], type[BaseException]]] = {
    "pytest_fail": (fail_the_test, pytest.fail.Exception),
    "gevent_timeout": (raise_timeout, GeventLikeTimeout),
    "slotted": (raise_slotted, Slotted),
}


def make_tool(raiser: Callable[[], None], asynchronous: bool) -> Any:
    if asynchronous:

        async def lookup(city: str) -> str:
            """Look a city up.

            Args:
                city: the city.
            """
            raiser()
            return "never"

        return lookup

    def lookup_sync(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        raiser()
        return "never"

    lookup_sync.__name__ = "lookup"
    return lookup_sync


SCRIPTS = {
    "function_calling": [tool_call_reply(("lookup", {"city": "Paris"})), reply("done")],
    "text": [
        'Thought: t\nAction: lookup\nAction Input: {"city": "Paris"}',
        "Thought: t\nFinal Answer: done",
    ],
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("protocol", sorted(SCRIPTS))
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
def test_the_exception_keeps_its_kind_and_carries_the_transcript(
    kind: str, asynchronous: bool, protocol: str, streamed: bool
) -> None:
    raiser, expected = KINDS[kind]
    agent = Agent(
        "m",
        [make_tool(raiser, asynchronous)],
        client=ScriptedModel(list(SCRIPTS[protocol])),
        protocol=protocol,
    )
    with pytest.raises(expected) as caught:
        if streamed:
            list(agent.run_stream("Look Paris up."))
        else:
            agent.run("Look Paris up.")
    result = getattr(caught.value, "result", None)
    assert result is not None
    assert result.usage.requests == 1
    (step,) = result.steps
    (action,) = step.actions
    assert action.tool == "lookup" and action.arguments == {"city": "Paris"}
    assert action.status == "error" and "the run was aborted" in (action.observation or "")
    assert result.stop_reason == "error"
