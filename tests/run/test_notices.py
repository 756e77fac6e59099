"""One vocabulary for what is notable in a run: :class:`RunNotice`.

The notices a run streams (``Agent.iter``) are the ones its result keeps
(``RunResult.notices``) and its steps keep (``Step.notices``), as typed events; and a
trace or a store writes a notice as its message under ``"events"``.
"""

from __future__ import annotations

import asyncio
import json

from react_engine import Agent, ScriptedModel, reply, tool_call_reply
from react_engine.run.events import RunNotice
from react_engine.store.codec import dump_item, load_item
from react_engine.testing.tools import get_weather


def over_budget() -> Agent:
    """Two calls in one reply, one tool call allowed: the second is not run, and said so;
    the calls have one id between them, so the engine makes one up, and says so."""
    model = ScriptedModel(
        [
            tool_call_reply(
                ("get_weather", {"location": "Paris"}, "same"),
                ("get_weather", {"location": "Rome"}, "same"),
            ),
            reply("Paris is sunny."),
        ]
    )
    return Agent("m", [get_weather], client=model, max_tool_calls=1, multi_action="all")


def test_the_streamed_notices_are_the_ones_the_result_keeps() -> None:
    async def run() -> tuple[list[RunNotice], list[RunNotice]]:
        streamed = []
        result = None
        async for event in over_budget().iter("weather?"):
            if isinstance(event, RunNotice):
                streamed.append(event)
            elif event.kind == "done":
                result = event.result
        assert result is not None
        return streamed, result.notices

    streamed, kept = asyncio.run(run())
    assert streamed == kept
    assert [n.source for n in kept] == ["run"]
    assert "tool-call budget of 1 is spent" in kept[0].message


def test_a_step_keeps_its_notices_typed_with_their_step_and_source() -> None:
    result = over_budget().run("weather?")
    first = result.steps[0]
    assert all(isinstance(n, RunNotice) and n.step == 0 for n in first.notices)
    by_source = {n.source: n.message for n in first.notices}
    assert by_source["reply"] == "duplicate_call_id"  # about the reply: the step only
    assert by_source["run"] == result.notices[0].message  # the run's: on both
    assert result.steps[1].notices == []


def test_traces_and_stores_write_a_notice_as_its_message_under_events() -> None:
    result = over_budget().run("weather?")
    step = result.steps[0]
    record = dump_item(step)
    assert "notices" not in record
    assert record["events"] == [n.message for n in step.notices]
    json.dumps(record)  # strings, nothing else
    back = load_item(record)
    assert [(n.step, n.message) for n in back.notices] == [(0, m) for m in record["events"]]
    footer = result.trace()[-1]
    assert footer["events"] == [n.message for n in result.notices] and "notices" not in footer
