"""Replies that arrive but cannot be used as they are, through the real ``openai`` SDK over
HTTP to a loopback server (or the scripted model), under every protocol, with the sync and
the async client.

* empty content, arguments that are not JSON, unknown tools, missing or repeated call
  ids: fed back to the model, and the run goes on;
* a reply cut by the length limit: a call with cut arguments never runs;
* text that is not valid Unicode, usage counts that are not counts, ``content`` as a list
  of parts, more calls than a step allows;
* all of these in one run: no step is lost.

Every run either recovers or ends with a typed error from :mod:`react_engine.errors` whose
``result`` holds every step made so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from support.faults import (
    CLIENTS,
    GOOD,
    PROTOCOLS,
    Harness,
    agent_for,
    assert_first_step_kept,
    calls,
    run_agent,
    with_usage,
)
from support.replies import (
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
    RetryPolicy,
    ScriptedModel,
    Tool,
    reply,
)
from react_engine.testing import MockResponse, ScriptedServer, completion

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
    assert set([n.message for n in result.steps[0].notices]) == {
        "generated_call_id",
        "duplicate_call_id",
    }
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


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_call_ids_repeated_across_replies_get_run_unique_ids_paired_on_the_wire(
    server: ScriptedServer, harness: Harness, protocol: str
) -> None:
    """A server that numbers each reply's calls from ``call_0`` repeats ids: a call whose id
    an earlier call of the run has gets ``-2``, ``-3``... (the first not used, even where
    the server itself sent that one), and each call keeps its result under that id."""

    def numbered(*calls: tuple[str, str]) -> dict[str, Any]:
        tool_calls = [raw_tool_call("lookup", json.dumps({"city": c}), i) for i, c in calls]
        return completion(None, tool_calls=tool_calls)

    server.push(
        numbered(("call_0", "Paris"), ("call_1", "Rome")),
        numbered(("call_0", "Oslo"), ("call_1", "Lima")),
        numbered(("call_1", "Kyiv"), ("call_1-3", "Bern")),
        final_body(protocol, "done"),
    )
    result = harness.run(protocol)
    assert result.answer == "done"
    assert harness.lookup.calls == ["Paris", "Rome", "Oslo", "Lima", "Kyiv", "Bern"]
    ids = [a.id for s in result.steps for a in s.actions]
    assert ids == ["call_0", "call_1", "call_0-2", "call_1-2", "call_1-3", "call_1-3-2"]
    reported = [[n.message for n in s.notices].count("duplicate_call_id") for s in result.steps]
    assert reported == [0, 2, 2, 0]
    if protocol != "function_calling":
        return  # the text protocol sends calls back as text: no ids on the wire
    # The last request pairs every call with its result, by the run-unique id, in order.
    messages = server.requests[-1]["messages"]
    sent = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sent == answered == ids
    cities = [json.loads(m["content"])["city"] for m in messages if m["role"] == "tool"]
    assert cities == harness.lookup.calls


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


# --- usage counts that are not counts -------------------------------------------------------------

BAD_USAGE: dict[str, dict[str, Any]] = {
    "string": {"prompt_tokens": 10, "completion_tokens": "abc", "total_tokens": 15},
    "float_string": {"prompt_tokens": "1e999", "completion_tokens": 5, "total_tokens": "x"},
    "nested_object": {"prompt_tokens": {"n": 1}, "completion_tokens": [5], "total_tokens": None},
    "bool": {"prompt_tokens": True, "completion_tokens": False, "total_tokens": True},
    "details_garbage": {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": "lots"},
    },
    "usage_is_a_string": "n/a",  # type: ignore[dict-item]
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", sorted(BAD_USAGE))
def test_usage_counts_that_are_not_counts_do_not_break_the_run(
    server: ScriptedServer, case: str, client: str
) -> None:
    first = call_body("function_calling", "lookup", {"city": "Paris"})
    first["usage"] = BAD_USAGE[case]
    server.push(first, final_body("function_calling", "Paris is big."))
    result = run_agent(server.base_url, client=client)
    assert result.answer == "Paris is big."
    usage = result.steps[0].usage
    for value in (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens):
        assert isinstance(value, int) and value >= 0
    assert usage.total_tokens >= usage.prompt_tokens + usage.completion_tokens
    assert result.usage.total_tokens == usage.total_tokens + 15
    if case != "bool":  # the SDK itself reads true/false as 1/0
        assert any("usage" in e for e in [n.message for n in result.steps[0].notices])


def test_a_garbage_count_is_named_in_the_step_events(server: ScriptedServer) -> None:
    body = with_usage(
        call_body("function_calling", "lookup", {"city": "Paris"}),
        prompt_tokens=10,
        completion_tokens="abc",
        total_tokens=15,
    )
    server.push(body, final_body("function_calling", "ok"))
    result = run_agent(server.base_url)
    step = result.steps[0]
    assert (step.usage.prompt_tokens, step.usage.completion_tokens) == (10, 0)
    assert step.usage.total_tokens == 15
    assert [n.message for n in step.notices] == [
        "the reply's usage had invalid counts, read as 0: completion_tokens='abc'"
    ]


def test_numeric_strings_and_floats_are_read_as_counts(server: ScriptedServer) -> None:
    body = with_usage(
        call_body("function_calling", "lookup", {"city": "Paris"}),
        prompt_tokens="12",
        completion_tokens=3.0,
        total_tokens=" 15 ",
    )
    server.push(body, final_body("function_calling", "ok"))
    step = run_agent(server.base_url).steps[0]
    assert (step.usage.prompt_tokens, step.usage.completion_tokens, step.usage.total_tokens) == (
        12,
        3,
        15,
    )
    assert [n.message for n in step.notices] == []


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_negative_usage_is_not_summed_and_the_token_budget_still_stops_the_run(
    server: ScriptedServer, protocol: str, client: str
) -> None:
    """Each reply claims 400 real tokens but a total of -1000: summed, the run's total
    would go down forever and the 1000-token budget would never stop it."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        city = f"City{len(server.requests)}"
        out = call_body(protocol, "lookup", {"city": city})
        return with_usage(out, prompt_tokens=-1000, completion_tokens=400, total_tokens=-1000)

    server.default = reply
    result = run_agent(server.base_url, protocol, client=client, max_total_tokens=1000, max_steps=8)
    assert result.stop_reason == "token_budget"
    assert result.usage.total_tokens >= 1000
    assert result.usage.prompt_tokens == 0
    assert all(s.usage.total_tokens == 400 for s in result.steps)
    assert len(result.steps) == 3


# --- content as a list of parts --------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_content_sent_as_a_list_of_parts_is_read(
    server: ScriptedServer, protocol: str, client: str
) -> None:
    first = call_body(protocol, "lookup", {"city": "Paris"})
    text = first["choices"][0]["message"]["content"]
    if text is not None:  # text protocol: the Thought/Action block, split in two parts
        half = len(text) // 2
        first["choices"][0]["message"]["content"] = [
            {"type": "text", "text": text[:half]},
            {"type": "text", "text": text[half:]},
        ]
    final = final_body(protocol, "Paris has 5000 people.")
    answer = final["choices"][0]["message"]["content"]
    final["choices"][0]["message"]["content"] = [
        {"type": "text", "text": answer[:10]},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": answer[10:]},
    ]
    server.push(first, final)
    result = run_agent(server.base_url, protocol, client=client)
    assert result.answer == "Paris has 5000 people."
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert result.steps[0].actions[0].status == "ok"


def test_a_list_of_parts_without_text_is_an_empty_reply(server: ScriptedServer) -> None:
    server.push(
        completion([{"type": "image_url", "image_url": {"url": "data:,"}}]),  # type: ignore[arg-type]
        final_body("function_calling", "done"),
    )
    result = run_agent(server.base_url, max_consecutive_errors=2)
    assert result.answer == "done"
    assert [s.kind for s in result.steps] == ["format_error", "final"]


# --- calls per reply -------------------------------------------------------------------------


def counting_tool() -> tuple[Tool, list[int]]:
    seen: list[int] = []

    def count(x: int) -> str:
        """Count a call.

        Args:
            x: anything.
        """
        seen.append(x)
        return f"counted {x}"

    return Tool.from_function(count), seen


def test_calls_beyond_max_calls_per_step_are_not_run() -> None:
    tool, seen = counting_tool()
    agent = agent_for([tool], [calls("count", 1000), reply("done")])
    result = agent.run("go")
    actions = result.steps[0].actions
    assert len(actions) == 1000  # every call is answered, in order
    assert sorted(seen) == list(range(16))
    assert [a.status for a in actions[:16]] == ["ok"] * 16
    assert all(a.status == "skipped" for a in actions[16:])
    assert "at most 16 run per reply" in actions[16].observation
    assert any("max_calls_per_step" in e for e in [n.message for n in result.steps[0].notices])
    assert result.answer == "done"


def test_max_calls_per_step_is_an_option_and_applies_to_text_replies() -> None:
    tool, seen = counting_tool()
    text = "\n".join(f'Thought: t\nAction: count\nAction Input: {{"x": {i}}}' for i in range(5))
    agent = Agent(
        "m",
        [tool],
        protocol="text",
        client=ScriptedModel([reply(text), reply("Final Answer: done")]),
        multi_action="all",
    )
    result = agent.run("go", max_calls_per_step=2)
    assert sorted(seen) == [0, 1]
    assert [a.status for a in result.steps[0].actions] == ["ok", "ok"] + ["skipped"] * 3


def test_the_tool_budget_counts_only_the_calls_that_would_run() -> None:
    tool, seen = counting_tool()
    agent = agent_for([tool], [calls("count", 30), reply("done")])
    result = agent.run("go", max_tool_calls=16)
    assert result.answer == "done"
    assert len(seen) == 16


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
