"""Streaming runs: ``Agent.iter`` / ``Agent.run_stream`` over SSE from the loopback server.

The server streams real ``chat.completion.chunk`` events through the ``openai`` SDK. What
is checked: deltas arrive in order and add up to the step's text; a server that ignores
``stop`` is cut at the label and its connection closed (the server records how many chunks
it sent); tool calls are assembled from fragments; errors propagate as from ``arun``;
leaving the iteration early cancels the run and closes the stream; a model that cannot
stream still serves ``iter``. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import sys
import time
from typing import Any

import openai
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from react_engine import (
    Agent,
    CapabilityCache,
    ConfigurationError,
    ErrorBudgetExhausted,
    ModelRequestError,
    RetryPolicy,
    ScriptedModel,
    reply,
    tool_call_reply,
)
from react_engine.cli import main as cli_main
from react_engine.run.events import (
    ActionDecided,
    Event,
    ReplyDiscarded,
    RunDone,
    StepDone,
    StoppedLive,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from react_engine.testing import (
    MockResponse,
    ScriptedServer,
    completion,
    stream_chunks,
    tool_calls_completion,
)
from react_engine.testing.tools import get_weather
from react_engine.transport.streaming import ReplyBuilder
from react_engine.types import ModelDelta, ToolCallChunk
from react_engine.wording import NoticeCode

TEXT_ACTION = (
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'
)
INVENTED = "\nObservation: sunny and 30C, I made this up " + "and then kept going " * 40
TEXT_FINAL = "Thought: I know it now.\nFinal Answer: It is overcast in Paris."


async def no_sleep(_: float) -> None:
    return None


def make_agent(server: ScriptedServer, protocol: str, **kwargs: Any) -> Agent:
    return Agent(
        "mock-model",
        [get_weather],
        base_url=server.base_url,
        api_key="sk-test",
        protocol=protocol,
        capability_cache=CapabilityCache(),
        retry=RetryPolicy(max_attempts=3, sleep=no_sleep),
        **kwargs,
    )


def collect(agent: Agent, question: str = "Weather in Paris?", **options: Any) -> list[Event]:
    return list(agent.run_stream(question, **options))


def text_of(events: list[Event], step: int) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta) and e.step == step)


def test_text_deltas_arrive_in_order_and_make_the_steps_text() -> None:
    with ScriptedServer(completion(TEXT_ACTION), completion(TEXT_FINAL)) as server:
        events = collect(make_agent(server, "text"))
    result = events[-1]
    assert isinstance(result, RunDone)
    steps = result.result.steps
    assert result.result.answer == "It is overcast in Paris."
    assert text_of(events, 0) == TEXT_ACTION == steps[0].text
    assert text_of(events, 1) == TEXT_FINAL
    deltas = [e.text for e in events if isinstance(e, TextDelta) and e.step == 0]
    assert len(deltas) > 5  # word by word, not one piece
    kinds = [e.kind for e in events]
    # the action is announced before its tool runs, the step after it ran
    assert kinds.index("action") < kinds.index("tool_started") < kinds.index("tool_finished")
    assert kinds.index("tool_finished") < kinds.index("step")
    assert kinds[0] == "run_started" and kinds[-1] == "done"
    for body in server.requests:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # the usage chunk was read: the server's counts, not an estimate
    assert result.result.usage.prompt_tokens == 20 and result.result.usage.completion_tokens == 10


def test_a_server_that_ignores_stop_is_cut_at_the_label_and_the_stream_closed() -> None:
    flood = MockResponse(body=completion(TEXT_ACTION + INVENTED), chunk_delay=0.002)
    with ScriptedServer(flood, completion(TEXT_FINAL)) as server:
        events = collect(make_agent(server, "text"))
        first = server.streams[0]
    assert server.requests[0]["stop"]  # the server was asked to stop, and did not
    assert first.closed_by_client and first.sent < first.available
    result = events[-1]
    assert isinstance(result, RunDone)
    step = result.result.steps[0]
    assert step.text == TEXT_ACTION
    assert "Observation" not in text_of(events, 0)  # not even a piece of the label was shown
    assert "cut_observation" not in step.repairs  # nothing left for the parser to cut
    stopped = [e for e in events if isinstance(e, StoppedLive)]
    assert len(stopped) == 1 and stopped[0].stop == "\nObservation:"
    assert any(e.startswith("stopped_live") for e in [n.message for n in step.notices])
    assert any(e.startswith("usage estimated") for e in [n.message for n in step.notices])
    # no usage chunk came: completion tokens are the chunks received
    assert step.usage.completion_tokens == stopped[0].completion_tokens
    assert 0 < step.usage.completion_tokens < len(stream_chunks(completion(TEXT_ACTION + INVENTED)))
    assert result.result.answer == "It is overcast in Paris."


def test_without_streaming_the_same_server_sends_the_whole_invented_reply() -> None:
    with ScriptedServer(completion(TEXT_ACTION + INVENTED), completion(TEXT_FINAL)) as server:
        result = make_agent(server, "text").run("Weather in Paris?")
        assert server.streams == [] and "stream" not in server.requests[0]
    assert result.steps[0].text == TEXT_ACTION
    assert "cut_observation" in result.steps[0].repairs


def test_parallel_tool_calls_are_assembled_from_fragments() -> None:
    calls = tool_calls_completion(
        ("get_weather", {"location": "Paris", "unit": "fahrenheit"}),
        ("get_weather", {"location": "London, UK"}),
    )
    chunks = stream_chunks(calls)
    fragments = [c for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert len(fragments) > 6  # arguments split across chunks
    with ScriptedServer(calls, completion("Overcast in Paris, drizzle in London.")) as server:
        events = collect(make_agent(server, "function_calling"))
    decided = [e for e in events if isinstance(e, ActionDecided)]
    assert len(decided) == 1
    assert [c.arguments for c in decided[0].calls] == [
        {"location": "Paris", "unit": "fahrenheit"},
        {"location": "London, UK"},
    ]
    ids = [tc["id"] for tc in calls["choices"][0]["message"]["tool_calls"]]
    assert [c.id for c in decided[0].calls] == ids
    started = [e.call.id for e in events if isinstance(e, ToolStarted)]
    finished = [e.call for e in events if isinstance(e, ToolFinished)]
    assert sorted(started) == sorted(ids) and all(c.status == "ok" for c in finished)
    assert "Paris" in finished[0].observation or "Paris" in finished[1].observation
    kinds = [e.kind for e in events]
    assert kinds.index("action") < kinds.index("tool_started")
    result = events[-1]
    assert isinstance(result, RunDone)
    assert result.result.answer == "Overcast in Paris, drizzle in London."


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
async def test_iter_gives_the_same_result_as_arun(protocol: str) -> None:
    first = (
        tool_calls_completion(("get_weather", {"location": "Paris"}))
        if protocol == "function_calling"
        else completion(TEXT_ACTION)
    )
    final = completion("It is overcast." if protocol == "function_calling" else TEXT_FINAL)
    with ScriptedServer(first, final, first, final) as server:
        agent = make_agent(server, protocol)
        plain = await agent.arun("Weather in Paris?")
        events = [e async for e in agent.iter("Weather in Paris?")]
    result = events[-1]
    assert isinstance(result, RunDone)
    streamed = result.result
    assert streamed.answer == plain.answer and streamed.stop_reason == plain.stop_reason
    assert [s.kind for s in streamed.steps] == [s.kind for s in plain.steps]
    assert [a.observation for a in streamed.tool_calls] == [a.observation for a in plain.tool_calls]
    assert [e.step for e in events if isinstance(e, StepDone)] == streamed.steps


async def test_breaking_out_early_cancels_the_run_and_closes_the_stream() -> None:
    long = MockResponse(body=completion(TEXT_FINAL + " and more" * 200), chunk_delay=0.002)
    with ScriptedServer(long) as server:
        agent = make_agent(server, "text")
        async with contextlib.aclosing(agent.iter("Weather in Paris?")) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        for _ in range(100):  # the server notices the closed connection at its next write
            if server.streams and server.streams[0].closed_by_client:
                break
            await asyncio.sleep(0.01)
        record = server.streams[0]
    assert record.closed_by_client and record.sent < record.available
    assert asyncio.all_tasks() == {asyncio.current_task()}


def test_breaking_out_of_run_stream_early_ends_the_run() -> None:
    slow = MockResponse(body=completion(TEXT_ACTION + " and more" * 200), chunk_delay=0.002)
    with ScriptedServer(slow, completion(TEXT_FINAL)) as server:
        agent = make_agent(server, "text")
        for event in agent.run_stream("Weather in Paris?"):
            if isinstance(event, TextDelta):
                break
        assert len(server.requests) == 1  # no second request: the run is over
        assert server.streams[0].sent < server.streams[0].available


def test_the_runs_errors_are_raised_from_the_iteration() -> None:
    model = ScriptedModel(default=reply(""))
    agent = Agent("m", [get_weather], client=model, protocol="text", max_consecutive_errors=1)
    seen: list[Event] = []
    with pytest.raises(ErrorBudgetExhausted) as caught:
        seen.extend(agent.run_stream("Weather?"))
    assert len(caught.value.result.steps) == 2
    assert not any(isinstance(e, RunDone) for e in seen)

    refused = MockResponse(401, {"error": {"message": "bad key"}})
    with ScriptedServer(refused) as server, pytest.raises(ModelRequestError):
        collect(make_agent(server, "function_calling"))


async def test_run_stream_inside_an_event_loop_is_refused() -> None:
    agent = Agent("m", client=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"agent\.iter"):
        agent.run_stream("hi")


def test_a_model_that_cannot_stream_yields_its_whole_reply_as_one_delta() -> None:
    model = ScriptedModel(
        [tool_call_reply(("get_weather", {"location": "Paris"})), reply("It is overcast.")]
    )
    agent = Agent("m", [get_weather], client=model, protocol="function_calling")
    events = list(agent.run_stream("Weather in Paris?"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["It is overcast."]
    result = events[-1]
    assert isinstance(result, RunDone) and result.result.answer == "It is overcast."
    assert result.result.tool_calls[0].id == "call_1"


def test_a_server_that_rejects_stream_options_is_asked_again_without_them() -> None:
    def picky(body: dict[str, Any]) -> MockResponse:
        if "stream_options" in body:
            return MockResponse(400, {"error": {"message": "unknown field: stream_options"}})
        return MockResponse(body=completion("It is overcast."))

    with ScriptedServer(default=picky) as server:
        events = collect(make_agent(server, "function_calling"))
        assert ["stream_options" in body for body in server.requests] == [True, False]
    result = events[-1]
    assert isinstance(result, RunDone) and result.result.answer == "It is overcast."
    assert any(
        e.startswith("usage estimated") for e in [n.message for n in result.result.steps[0].notices]
    )


def test_a_stream_cut_midway_is_discarded_and_retried() -> None:
    cut = MockResponse(body=completion(TEXT_FINAL), drop_after=3)
    with ScriptedServer(cut, completion(TEXT_FINAL)) as server:
        events = collect(make_agent(server, "text"))
        assert len(server.requests) == 2
    discarded = [i for i, e in enumerate(events) if isinstance(e, ReplyDiscarded)]
    assert len(discarded) == 1
    after = "".join(e.text for e in events[discarded[0] :] if isinstance(e, TextDelta))
    assert after == TEXT_FINAL
    result = events[-1]
    assert isinstance(result, RunDone) and result.result.answer == "It is overcast in Paris."


def _error_midway(error: dict[str, Any]) -> MockResponse:
    """A stream that starts well, then carries an error event instead of the rest."""
    chunks = stream_chunks(completion(TEXT_FINAL))
    return MockResponse(chunks=[*chunks[:3], {"error": error}])


@pytest.mark.parametrize(
    "error",
    [
        {"type": "server_error", "message": "overloaded"},
        {"type": "overloaded_error", "message": "Overloaded"},
        {"message": "Rate limit reached, please try again", "code": "rate_limit_exceeded"},
    ],
)
def test_an_error_event_inside_a_stream_is_retried_as_transient(error: dict[str, Any]) -> None:
    with ScriptedServer(_error_midway(error), completion(TEXT_FINAL)) as server:
        events = collect(make_agent(server, "text"))
        assert len(server.requests) == 2
    assert sum(isinstance(e, ReplyDiscarded) for e in events) == 1
    result = events[-1]
    assert isinstance(result, RunDone) and result.result.answer == "It is overcast in Paris."


def test_an_error_event_that_blames_the_request_is_not_retried() -> None:
    error = {"type": "invalid_request_error", "message": "Invalid value for 'tools'"}
    with ScriptedServer(_error_midway(error), default=completion(TEXT_FINAL)) as server:
        with pytest.raises(ModelRequestError, match="inside the stream"):
            collect(make_agent(server, "text"))
        assert len(server.requests) == 1


def test_reasoning_deltas_are_reported_apart_from_the_text() -> None:
    body = completion("It is overcast.")
    body["choices"][0]["message"]["reasoning_content"] = "Let me think about Paris."
    with ScriptedServer(body) as server:
        events = collect(make_agent(server, "function_calling"))
    reasoning = "".join(e.text for e in events if e.kind == "reasoning_delta")
    assert reasoning == "Let me think about Paris."
    result = events[-1]
    assert isinstance(result, RunDone)
    assert result.result.steps[0].reasoning == "Let me think about Paris."


# --- the builder on its own ---------------------------------------------------------------


def test_builder_holds_back_what_may_become_a_stop_sequence() -> None:
    builder = ReplyBuilder(("\nObservation:",))
    shown = []
    for piece in ["Action: x", "\nObs", "erv", "ation: made up", " more"]:
        out = builder.add(ModelDelta(content=piece))
        shown.append(out.content if out and out.content else "")
    assert shown == ["Action: x", "", "", "", ""]
    assert builder.stopped == "\nObservation:"
    reply_ = builder.response()
    assert reply_.content == "Action: x" and reply_.finish_reason == "stop"
    # a prefix that turns out to be no label is released
    builder = ReplyBuilder(("\nObservation:",))
    assert builder.add(ModelDelta(content="a\nObs")).content == "a"  # type: ignore[union-attr]
    assert builder.add(ModelDelta(content="cure")).content == "\nObscure"  # type: ignore[union-attr]
    assert builder.add(ModelDelta(content="\nOb")) is None
    assert builder.flush() == "\nOb"


@given(
    text=st.text(alphabet="ab\nObservation:", max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=12),
    stops=st.lists(st.text(alphabet="ab\nObs:", min_size=1, max_size=6), max_size=3),
)
def test_builder_output_does_not_depend_on_how_the_text_is_split(
    text: str, cuts: list[int], stops: list[str]
) -> None:
    # The reply is the text up to the first stop sequence, and what was passed on is its
    # prefix, however the stream split it (one delta, or many small ones). Stop sequences
    # where one holds another before its end (":" and "O::") are left out: a stream stops
    # at whichever is complete first, which depends on the split, as on a server.
    assume(not any(a in b[:-1] for a in stops for b in stops if a != b))
    earliest = [(i, s) for s in stops if (i := text.find(s)) >= 0]
    expected = text[: min(earliest)[0]] if earliest else text
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    builder = ReplyBuilder(tuple(stops))
    passed = []
    for start, end in itertools.pairwise(bounds):
        out = builder.add(ModelDelta(content=text[start:end]))
        passed.append(out.content if out is not None and out.content else "")
    if builder.stopped is None:
        passed.append(builder.flush())
    assert (builder.response().content or "") == expected
    assert "".join(passed) == expected


def test_builder_assembles_interleaved_fragments_by_index() -> None:
    builder = ReplyBuilder()
    deltas = [
        ModelDelta(tool_calls=(ToolCallChunk(0, "a", "get_weather", ""),)),
        ModelDelta(tool_calls=(ToolCallChunk(1, "b", "calc", '{"x"'),)),
        ModelDelta(tool_calls=(ToolCallChunk(0, None, None, '{"location": '),)),
        ModelDelta(tool_calls=(ToolCallChunk(1, None, None, ": 1}"),)),
        # a server that repeats the name and id with each fragment
        ModelDelta(tool_calls=(ToolCallChunk(0, "a", "get_weather", '"Paris"}'),)),
        ModelDelta(finish_reason="tool_calls"),
    ]
    for delta in deltas:
        builder.add(delta)
    out = builder.response()
    assert [(c.id, c.name, json.loads(c.arguments)) for c in out.tool_calls] == [
        ("a", "get_weather", {"location": "Paris"}),
        ("b", "calc", {"x": 1}),
    ]
    assert out.content is None and out.finish_reason == "tool_calls"
    assert out.usage.completion_tokens == 5  # no usage chunk: counted, and said so
    assert [e.code for e in out.events] == [NoticeCode.USAGE_ESTIMATED]


# --- the command line on a terminal ------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["run", "demo"])
def test_the_cli_streams_on_a_terminal(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    tty, stdout = _Tty(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", tty)  # where the steps go
    monkeypatch.setattr(sys, "stdout", stdout)
    argv = ["run", "What's the weather in Beijing?"] if command == "run" else ["demo"]
    assert cli_main([*argv, "--dry-run", "--protocol", "text"]) == 0
    out = tty.getvalue()
    # the step's header, the reply's text as written, the call before what it returned
    assert out.index("── step 1") < out.index("Action: get_weather") < out.index("→ calling")
    assert out.index("→ calling get_weather(") < out.index("← get_weather: ")
    assert "══ result" in out
    # each step once: the streamed text is not printed again in a block after it
    assert out.count("Action: get_weather") == 2  # two calls in step 1's reply
    assert out.count("Final Answer:") == 1
    assert stdout.getvalue() == "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C.\n"


def test_a_blocking_openai_client_streams_and_stops_live_too() -> None:
    flood = MockResponse(body=completion(TEXT_ACTION + INVENTED), chunk_delay=0.002)
    with ScriptedServer(flood, completion(TEXT_FINAL)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
        try:
            agent = Agent("m", [get_weather], client=client, protocol="text")
            events = collect(agent)
        finally:
            client.close()
        first = server.streams[0]
        # The server notices the close at its next chunk, on its own thread: wait for it
        # (bounded) before the server shuts down, rather than read the record mid-flight.
        for _ in range(1000):
            if first.closed_by_client or first.sent == first.available:
                break
            time.sleep(0.01)
    assert first.closed_by_client and first.sent < first.available
    assert len([e for e in events if isinstance(e, TextDelta) and e.step == 0]) > 5
    result = events[-1]
    assert isinstance(result, RunDone) and result.result.steps[0].text == TEXT_ACTION
