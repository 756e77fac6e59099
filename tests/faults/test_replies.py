"""Fault injection through the real ``openai`` SDK, over HTTP, against a loopback server.

Every fault is injected in the middle of a run (after one tool step), under both protocols,
with the sync and the async client. Each run either recovers (a network retry, or the error
fed back to the model as an observation or a format error) or ends with a typed error from
:mod:`react_engine.errors` whose ``result`` holds every step made so far. No test really
sleeps for a backoff: the retry policy's ``sleep`` is a fake that records the waits.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.replies import (
    FakeSleep,
    call_body,
    final_body,
    last_feedback,
    raw_tool_call,
    text_action,
)

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ErrorBudgetExhausted,
    ModelRequestError,
    ModelSettings,
    ModelUnavailableError,
    RetryPolicy,
    RunResult,
    Tool,
    ToolAnnotations,
)
from react_engine.testing import MockResponse, ScriptedServer, completion

PROTOCOLS = ["function_calling", "text"]
CLIENTS = ["sync", "async"]
ATTEMPTS = 3


class Lookup:
    """A city lookup tool that records every call it really receives."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        def lookup(city: str) -> dict[str, Any]:
            """Facts about a city.

            Args:
                city: the city's name.
            """
            self.calls.append(city)
            return {"city": city, "population": len(city) * 1000}

        self.tool = Tool.from_function(lookup, annotations=ToolAnnotations(read_only=True))


class Harness:
    """Builds an agent on a real SDK client for the server, runs it, closes the client."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.lookup = Lookup()
        self.sleep = FakeSleep()

    def run(
        self,
        protocol: str,
        question: str = "Tell me about Paris.",
        *,
        client: str = "sync",
        timeout: float = 10.0,
        **options: Any,
    ) -> RunResult:
        options.setdefault("retry", RetryPolicy(max_attempts=ATTEMPTS, sleep=self.sleep))
        options.setdefault("max_consecutive_errors", 2)

        def build(sdk: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
            return Agent(
                "mock-model",
                [self.lookup.tool],
                protocol=protocol,
                client=sdk,
                settings=ModelSettings(timeout=timeout),
                capability_cache=CapabilityCache(),
                registry=CapabilityRegistry.from_default(env={}),
                **options,
            )

        url, key = self.server.base_url, "sk-test-faults"
        if client == "sync":
            with openai.OpenAI(base_url=url, api_key=key) as sdk:
                return build(sdk).run(question)

        async def arun() -> RunResult:
            async with openai.AsyncOpenAI(base_url=url, api_key=key) as sdk:
                return await build(sdk).arun(question)

        return asyncio.run(arun())


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def harness(server: ScriptedServer) -> Harness:
    return Harness(server)


def assert_first_step_kept(result: RunResult) -> None:
    """The tool step made before the fault is in the transcript, exactly once."""
    first = result.steps[0]
    assert first.kind == "action"
    assert [(a.tool, a.arguments, a.status) for a in first.actions] == [
        ("lookup", {"city": "Paris"}, "ok")
    ]
    assert json.loads(first.actions[0].observation) == {"city": "Paris", "population": 5000}
    assert [s.index for s in result.steps] == list(range(len(result.steps)))


# --- transport faults: retried, then recovered or a typed error -----------------------------------

GOOD = final_body("function_calling", "unused")  # a well-formed body, cut or delayed below
TRANSPORT_FAULTS: dict[str, tuple[MockResponse, int | None]] = {
    "429_retry_after": (
        MockResponse(429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "3"}),
        429,
    ),
    "500": (MockResponse(500, {"error": {"message": "internal error"}}), 500),
    "502": (MockResponse(502, "<html><body>502 Bad Gateway</body></html>"), 502),
    "503": (MockResponse(503, {"error": {"message": "overloaded"}}), 503),
    "hang_past_timeout": (MockResponse(body=GOOD, delay=1.0), None),
    "dropped_connection": (MockResponse(drop=True), None),
    "malformed_json_body": (MockResponse(body=b'{"id": "chatcmpl-1", "choices": [{"mess'), None),
    "html_body_with_200": (
        MockResponse(body="<html>proxy error</html>", headers={"content-type": "text/html"}),
        None,
    ),
    "no_choices_key": (MockResponse(body={"id": "x", "object": "chat.completion"}), None),
    "empty_choices": (
        MockResponse(body={"id": "x", "object": "chat.completion", "choices": []}),
        None,
    ),
    "choice_without_message": (
        MockResponse(body={"id": "x", "object": "chat.completion", "choices": [{"index": 0}]}),
        None,
    ),
    "reply_cut_mid_body": (MockResponse(body=GOOD, truncate_at=60), None),
}


def _timeout_for(fault: str) -> float:
    return 0.25 if fault == "hang_past_timeout" else 10.0


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_transport_fault_is_retried_and_the_run_recovers(
    server: ScriptedServer, harness: Harness, fault: str, protocol: str, client: str
) -> None:
    response, _ = TRANSPORT_FAULTS[fault]
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        response,
        final_body(protocol, "Paris has 5000 people."),
    )
    result = harness.run(protocol, client=client, timeout=_timeout_for(fault))

    assert result.answer == "Paris has 5000 people."
    assert result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert_first_step_kept(result)
    assert harness.lookup.calls == ["Paris"]  # the tool ran once: a retry re-sends, never re-runs
    assert len(server.requests) == 3
    assert server.requests[2] == server.requests[1]  # the very same request, sent again
    assert len(harness.sleep.waits) == 1
    if fault == "429_retry_after":
        assert harness.sleep.waits == [3.0]  # the server's Retry-After, not our backoff
    else:
        assert 0.5 <= harness.sleep.waits[0] <= 1.0  # initial backoff plus jitter
    assert result.usage.requests == 2  # the failed attempt produced no reply


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_persistent_transport_fault_ends_with_a_typed_error_and_the_transcript(
    server: ScriptedServer, harness: Harness, fault: str, protocol: str, client: str
) -> None:
    response, status = TRANSPORT_FAULTS[fault]
    server.push(call_body(protocol, "lookup", {"city": "Paris"}), *[response] * ATTEMPTS)
    with pytest.raises(ModelUnavailableError) as info:
        harness.run(protocol, client=client, timeout=_timeout_for(fault))

    err = info.value
    assert err.attempts == ATTEMPTS
    assert f"after {ATTEMPTS} attempts" in str(err)
    assert err.status_code == status
    assert len(server.requests) == 1 + ATTEMPTS
    assert len(harness.sleep.waits) == ATTEMPTS - 1
    assert err.result is not None
    assert err.result.stop_reason == "error"
    assert err.result.error == str(err)
    assert err.result.protocol == protocol
    assert [s.kind for s in err.result.steps] == ["action"]
    assert_first_step_kept(err.result)
    assert harness.lookup.calls == ["Paris"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_hang_past_the_run_deadline_ends_the_run_on_time(
    server: ScriptedServer, harness: Harness, protocol: str, client: str
) -> None:
    """The HTTP timeout is long and the server hangs as long: the deadline (1 s) still holds,
    for the blocking client too, whose request runs in a thread nothing can cancel."""
    hang = 60.0
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        MockResponse(body=GOOD, delay=hang),
        MockResponse(body=GOOD, delay=hang),
    )
    started = time.perf_counter()
    result = harness.run(
        protocol, client=client, timeout=hang, deadline=1.0, retry=RetryPolicy(sleep=None)
    )
    elapsed = time.perf_counter() - started
    assert result.stop_reason == "deadline"
    assert result.answer is None
    assert [s.kind for s in result.steps] == ["action"]
    assert_first_step_kept(result)
    assert len(server.requests) == 2  # the hung request was not retried either
    # The run ended long before the hang or the HTTP timeout would have let it: a run that
    # waited for either takes the whole minute.
    assert elapsed < hang / 3


def test_retry_after_longer_than_the_backoff_cap_is_capped(
    server: ScriptedServer, harness: Harness
) -> None:
    server.push(
        MockResponse(429, {"error": {"message": "slow down"}}, {"retry-after": "3600"}),
        final_body("function_calling", "ok"),
    )
    harness.run("function_calling", retry=RetryPolicy(max_backoff=7.5, sleep=harness.sleep))
    assert harness.sleep.waits == [7.5]


@pytest.mark.parametrize("client", CLIENTS)
def test_on_retry_is_told_of_each_retry_before_its_wait(
    server: ScriptedServer, harness: Harness, client: str
) -> None:
    """The hook the CLI shows retries with: the attempt that follows, its wait, the error."""
    seen: list[tuple[int, float, str, int]] = []

    def on_retry(attempt: int, wait: float, error: BaseException) -> None:
        seen.append((attempt, wait, str(error), len(harness.sleep.waits)))

    overloaded = MockResponse(503, {"error": {"message": "overloaded"}})
    server.push(overloaded, overloaded, final_body("function_calling", "ok"))
    policy = RetryPolicy(max_attempts=4, sleep=harness.sleep, on_retry=on_retry)
    assert harness.run("function_calling", client=client, retry=policy).answer == "ok"
    assert [attempt for attempt, *_ in seen] == [2, 3]  # the first retry, then the second
    assert [wait for _, wait, *_ in seen] == harness.sleep.waits  # the waits that followed
    assert [waited for *_, waited in seen] == [0, 1]  # each told before its wait
    assert all("overloaded" in error for _, _, error, _ in seen)


def test_retry_after_ms_is_honoured(server: ScriptedServer, harness: Harness) -> None:
    server.push(
        MockResponse(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "250"}),
        final_body("function_calling", "ok"),
    )
    assert harness.run("function_calling").answer == "ok"
    assert harness.sleep.waits == [0.25]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried_and_keep_the_transcript(
    server: ScriptedServer, harness: Harness, protocol: str, status: int
) -> None:
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        MockResponse(status, {"error": {"message": f"nope ({status})"}}),
    )
    with pytest.raises(ModelRequestError) as info:
        harness.run(protocol)
    err = info.value
    assert err.status_code == status
    assert err.attempts == 1
    assert err.body == f"nope ({status})"
    assert harness.sleep.waits == []
    assert len(server.requests) == 2
    assert err.result is not None and err.result.stop_reason == "error"
    assert_first_step_kept(err.result)


# --- replies that arrive but cannot be used: fed back to the model --------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_null_content_without_tool_calls_is_fed_back(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        completion(None),
        final_body(protocol, "done"),
    )
    result = harness.run(protocol)
    assert result.answer == "done"
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]
    assert_first_step_kept(result)
    feedback = result.steps[1].feedback
    assert feedback
    assert last_feedback(server.requests[2]) == feedback
    if protocol == "function_calling":
        assert feedback.startswith("Your reply was empty")
    else:
        assert feedback.startswith("Observation: Your reply could not be used")
    assert harness.sleep.waits == []  # a format retry, not a network retry


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_null_content_forever_ends_with_error_budget_and_every_step(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    server.push(call_body(protocol, "lookup", {"city": "Paris"}), *[completion(None)] * 3)
    with pytest.raises(ErrorBudgetExhausted) as info:
        harness.run(protocol, max_consecutive_errors=2)
    err = info.value
    assert err.attempts == 3
    assert err.last_reply is not None and err.last_reply.content is None
    assert err.result.stop_reason == "error_budget"
    assert [s.kind for s in err.result.steps] == ["action"] + ["format_error"] * 3
    assert_first_step_kept(err.result)
    assert len(server.requests) == 4


UNPARSEABLE = {
    "function_calling": "not json at all {",
    "text": '{"city": ',
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_arguments_that_are_not_json_become_an_error_observation(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    server.push(
        call_body(protocol, "lookup", UNPARSEABLE[protocol]),
        call_body(protocol, "lookup", {"city": "Paris"}),
        final_body(protocol, "done"),
    )
    result = harness.run(protocol)
    assert result.answer == "done"
    bad = result.steps[0].actions[0]
    assert bad.status == "invalid_arguments"
    assert "not valid JSON" in bad.observation
    assert bad.raw_arguments == UNPARSEABLE[protocol].strip()
    assert harness.lookup.calls == ["Paris"]  # the broken call never ran
    sent = server.requests[1]["messages"][-1]
    if protocol == "function_calling":
        assert sent["role"] == "tool" and sent["tool_call_id"] == bad.id
        assert sent["content"] == bad.observation
    else:
        assert sent["content"] == f"Observation: <observation>{bad.observation}</observation>"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_tool_names_become_an_error_observation(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    server.push(
        call_body(protocol, "lookup_city", {"city": "Paris"}),
        call_body(protocol, "lookup", {"city": "Paris"}),
        final_body(protocol, "done"),
    )
    result = harness.run(protocol)
    assert result.answer == "done"
    bad = result.steps[0].actions[0]
    assert bad.status == "unknown_tool"
    assert bad.observation == "Error: unknown tool 'lookup_city'. Valid tools: lookup."
    assert bad.observation in last_feedback(server.requests[1])
    assert harness.lookup.calls == ["Paris"]


def test_arguments_sent_as_an_object_instead_of_a_string_still_run(
    server: ScriptedServer, harness: Harness
) -> None:
    server.push(
        completion(None, tool_calls=[raw_tool_call("lookup", {"city": "Paris"})]),
        final_body("function_calling", "done"),
    )
    result = harness.run("function_calling")
    assert harness.lookup.calls == ["Paris"]
    assert result.steps[0].actions[0].raw_arguments == '{"city": "Paris"}'


def test_missing_empty_and_duplicate_call_ids_get_unique_ids_paired_in_order(
    server: ScriptedServer, harness: Harness
) -> None:
    server.push(
        completion(
            None,
            tool_calls=[
                raw_tool_call("lookup", '{"city": "Paris"}', None),
                raw_tool_call("lookup", '{"city": "Rome"}', "dup"),
                raw_tool_call("lookup", '{"city": "Oslo"}', "dup"),
                raw_tool_call("lookup", '{"city": "Lima"}', ""),
            ],
        ),
        final_body("function_calling", "done"),
    )
    result = harness.run("function_calling")
    actions = result.steps[0].actions
    ids = [a.id for a in actions]
    assert all(ids) and len(set(ids)) == 4
    assert ids[1] == "dup"
    assert harness.lookup.calls == ["Paris", "Rome", "Oslo", "Lima"]
    assert set(result.steps[0].events) == {"generated_call_id", "duplicate_call_id"}
    # The next request pairs every call with its result, by id and in order.
    messages = server.requests[1]["messages"]
    assistant, *tool_messages = messages[2:]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in tool_messages] == ids
    assert [json.loads(m["content"])["city"] for m in tool_messages] == [
        "Paris",
        "Rome",
        "Oslo",
        "Lima",
    ]


# --- a reply cut by the length limit: never run a call with truncated arguments -------------------

CUT = {
    "function_calling": completion(
        None,
        tool_calls=[raw_tool_call("lookup", '{"city": "Par')],
        finish_reason="length",
    ),
    "text": completion(
        'Thought: I will look.\nAction: lookup\nAction Input: {"city": "Par',
        finish_reason="length",
    ),
    "text_plain_input": completion(
        "Thought: I will look.\nAction: lookup\nAction Input: Par", finish_reason="length"
    ),
}


@pytest.mark.parametrize("case", sorted(CUT))
def test_a_call_cut_by_the_length_limit_does_not_run(
    server: ScriptedServer, harness: Harness, case: str
) -> None:
    protocol = "function_calling" if case == "function_calling" else "text"
    server.push(
        CUT[case],
        call_body(protocol, "lookup", {"city": "Paris"}),
        final_body(protocol, "done"),
    )
    result = harness.run(protocol)
    assert result.answer == "done"
    cut = result.steps[0].actions[0]
    assert cut.status == "invalid_arguments"
    assert "cut off" in cut.observation
    assert harness.lookup.calls == ["Paris"]  # never "Par"
    assert cut.observation in last_feedback(server.requests[1])


COMPLETE_THOUGH_LENGTH = {
    "function_calling": completion(
        None,
        tool_calls=[
            raw_tool_call("lookup", '{"city": "Paris"}'),
            raw_tool_call("lookup", '{"city": "Ro'),
        ],
        finish_reason="length",
    ),
    "text": completion(
        text_action("lookup", {"city": "Paris"}) + "\nObservation: Paris is big\nThought: and th",
        finish_reason="length",
    ),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_complete_calls_before_the_cut_still_run(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    server.push(COMPLETE_THOUGH_LENGTH[protocol], final_body(protocol, "done"))
    result = harness.run(protocol)
    statuses = [a.status for a in result.steps[0].actions]
    assert statuses[0] == "ok"
    assert harness.lookup.calls == ["Paris"]
    if protocol == "function_calling":
        assert statuses[1] == "invalid_arguments"  # the one that was cut


# --- text that is not valid Unicode ---------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_lone_surrogates_in_a_reply_and_a_tool_result_do_not_break_the_run(
    server: ScriptedServer, harness: Harness, protocol: str, tmp_path: Path
) -> None:
    def odd(city: str) -> str:
        """Returns text decoded with surrogateescape, as file and subprocess tools do."""
        return b"caf\xe9 ".decode("utf-8", "surrogateescape") + city

    tool = Tool.from_function(odd)
    thought = "Half a pair: \ud83d."
    if protocol == "function_calling":
        first = completion(thought, tool_calls=[raw_tool_call("odd", '{"city": "Paris"}')])
    else:
        first = completion(text_action("odd", {"city": "Paris"}, thought=thought))
    # json.dumps escapes the lone surrogate as \ud83d, as a server written in any language may.
    server.push(MockResponse(body=json.dumps(first)), final_body(protocol, "done"))

    with openai.OpenAI(base_url=server.base_url, api_key="sk-test") as sdk:
        agent = Agent(
            "mock-model",
            [tool],
            protocol=protocol,
            client=sdk,
            retry=RetryPolicy(max_attempts=1),
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
        )
        result = agent.run("q")
    assert result.answer == "done"
    assert len(server.requests) == 2  # the second request could be encoded and sent
    assert result.steps[0].actions[0].status == "ok"
    assert "Paris" in result.steps[0].actions[0].observation
    path = tmp_path / "trace.jsonl"
    result.write_trace(str(path))  # the trace is valid UTF-8 too
    assert len(path.read_text(encoding="utf-8").splitlines()) == 4


# --- everything at once -----------------------------------------------------------------------


def _chaos_script(protocol: str) -> list[Any]:
    return [
        MockResponse(503, {"error": {"message": "warming up"}}),
        call_body(protocol, "lookup", {"city": "Paris"}),
        MockResponse(drop=True),
        completion(None),
        call_body(protocol, "lookup_city", {"city": "Paris"}),
        MockResponse(429, {"error": {"message": "slow"}}, {"retry-after": "1"}),
        call_body(protocol, "lookup", UNPARSEABLE[protocol]),
        MockResponse(body=GOOD, truncate_at=10),
        final_body(protocol, "Paris: 5000 people."),
    ]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_run_through_many_faults_loses_no_step(
    server: ScriptedServer, harness: Harness, protocol: str, client: str
) -> None:
    server.push(*_chaos_script(protocol))
    result = harness.run(protocol, client=client, max_consecutive_errors=3)
    assert result.answer == "Paris: 5000 people."
    assert [s.kind for s in result.steps] == ["action", "format_error", "action", "action", "final"]
    assert [a.status for s in result.steps for a in s.actions] == [
        "ok",
        "unknown_tool",
        "invalid_arguments",
    ]
    assert harness.lookup.calls == ["Paris"]
    assert len(harness.sleep.waits) == 4
    assert len(server.requests) == 9
    # Each request carries the whole history so far: one more exchange each time.
    sizes = [len(r["messages"]) for r in server.requests]
    assert sizes == sorted(sizes)
