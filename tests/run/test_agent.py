"""The agent loop under function calling, against the scripted model.

Every test asserts on what the engine sent (the exact request payloads) and on the trace.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from react_engine import (
    Agent,
    ErrorBudgetExhausted,
    ModelRequestError,
    ModelUnavailableError,
    RetryPolicy,
    ScriptedModel,
    ToolAnnotations,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.testing.tools import calculator, get_weather
from react_engine.types import Usage
from react_engine.wording import Notice, NoticeCode


class FakeSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make_agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kwargs.setdefault("tools", [get_weather, calculator])
    kwargs.setdefault("protocol", "function_calling")
    agent = Agent("gpt-4o-mini", client=model, **kwargs)
    return agent, model


def test_weather_example_parallel_calls_paired_in_order() -> None:
    agent, model = make_agent(
        [
            tool_call_reply(
                ("get_weather", {"location": "Beijing"}, "call_a"),
                ("get_weather", {"location": "Guangzhou"}, "call_b"),
                content="I need the weather in both cities.",
                usage=Usage(100, 20, 120, 0, 1),
            ),
            reply(
                "Beijing is sunny, 24°C; Guangzhou is rainy, 29°C.",
                usage=Usage(150, 15, 165, 100, 1),
            ),
        ]
    )
    result = agent.run("What's the weather in Beijing and Guangzhou?")
    assert result.answer == "Beijing is sunny, 24°C; Guangzhou is rainy, 29°C."
    assert result.stop_reason == "final_answer"
    assert result.protocol == "function_calling"
    assert result.protocol_reason == "explicit"
    assert result.usage.total_tokens == 285
    assert result.usage.cached_tokens == 100
    assert result.usage.requests == 2

    first, second = model.payloads
    assert first["model"] == "gpt-4o-mini"
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "calculator"]
    assert first["tool_choice"] == "auto"
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][1] == {
        "role": "user",
        "content": "What's the weather in Beijing and Guangzhou?",
    }
    # The second request: the assistant's calls, then one tool message per call, in order.
    assistant, tool_a, tool_b = second["messages"][2:]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "I need the weather in both cities."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert tool_a["tool_call_id"] == "call_a" and "Beijing" in tool_a["content"]
    assert tool_b["tool_call_id"] == "call_b" and "Guangzhou" in tool_b["content"]
    # The request's prefix is the previous request: prompt caches hit.
    assert second["messages"][:2] == first["messages"]

    step = result.steps[0]
    assert step.thought == "I need the weather in both cities."
    assert [(a.tool, a.arguments, a.id, a.status) for a in step.actions] == [
        ("get_weather", {"location": "Beijing"}, "call_a", "ok"),
        ("get_weather", {"location": "Guangzhou"}, "call_b", "ok"),
    ]
    assert json.loads(step.actions[0].observation)["condition"] == "sunny"
    assert step.usage.total_tokens == 120
    assert result.steps[1].kind == "final"


def test_parallel_calls_run_concurrently() -> None:
    running: list[int] = []
    overlap: list[int] = []

    @tool(annotations=ToolAnnotations(read_only=True))
    async def slow(n: int) -> int:
        """Sleep a little."""
        running.append(n)
        overlap.append(len(running))
        await asyncio.sleep(0.2)
        running.remove(n)
        return n

    agent, _ = make_agent(
        [tool_call_reply(*[("slow", {"n": i}) for i in range(5)]), reply("done")],
        tools=[slow],
    )
    result = agent.run("go")
    assert [a.observation for a in result.steps[0].actions] == ["0", "1", "2", "3", "4"]
    assert max(overlap) == 5  # all five at once, not one after another


def test_ids_generated_when_missing_or_repeated() -> None:
    agent, model = make_agent(
        [
            tool_call_reply(
                ("get_weather", {"location": "Paris"}, None),
                ("get_weather", {"location": "London"}, "dup"),
                ("get_weather", {"location": "Tokyo"}, "dup"),
            ),
            reply("ok"),
        ]
    )
    result = agent.run("weather?")
    ids = [a.id for a in result.steps[0].actions]
    assert len(set(ids)) == 3 and all(ids)
    assert ids[1] == "dup"
    assert set([n.message for n in result.steps[0].notices]) == {
        "generated_call_id",
        "duplicate_call_id",
    }
    sent = model.payloads[1]["messages"]
    assert [c["id"] for c in sent[2]["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in sent[3:6]] == ids


@pytest.mark.parametrize(
    ("call", "status", "needle"),
    [
        (
            ("get_wether", {"location": "Paris"}),
            "unknown_tool",
            "Valid tools: calculator, get_weather",
        ),
        (("get_weather", "{location: 'Paris',}"), "ok", "Paris"),  # lossless repairs still run
        # ... a guessed value never does: where does the unquoted Paris end?
        (("get_weather", "{location: Paris}"), "invalid_arguments", "without quotes"),
        # ... but cut-off JSON is not closed by the repair: it never runs
        (("get_weather", '{"location": "Par'), "invalid_arguments", "truncated"),
        (("get_weather", "not json at all {"), "invalid_arguments", "not valid JSON"),
        (("get_weather", "[1, 2]"), "invalid_arguments", "must be a JSON object"),
        (("get_weather", {"city": "Paris"}), "invalid_arguments", "location: Field required"),
        (("get_weather", {"location": "Atlantis"}), "error", "no weather data for 'Atlantis'"),
        (("calculator", {"expression": "1/0"}), "error", "ZeroDivisionError"),
    ],
)
def test_errors_become_observations_bound_to_the_call(
    call: tuple[str, Any], status: str, needle: str
) -> None:
    agent, model = make_agent([tool_call_reply((*call, "call_x")), reply("sorry")])
    result = agent.run("q")
    action = result.steps[0].actions[0]
    assert action.status == status
    assert needle in action.observation
    tool_msg = model.payloads[1]["messages"][3]
    assert tool_msg == {"role": "tool", "tool_call_id": "call_x", "content": action.observation}
    assert result.answer == "sorry"


def test_tool_timeout_becomes_an_observation() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never returns in time."""
        await asyncio.sleep(5)
        return "late"

    agent, _ = make_agent([tool_call_reply(("hang", {})), reply("gave up")], tools=[hang])
    result = agent.run("q")
    assert result.steps[0].actions[0].status == "timeout"
    assert "did not finish within 0.05s" in result.steps[0].actions[0].observation


def test_error_budget_stops_with_the_transcript() -> None:
    bad = tool_call_reply(("nope", {}))
    agent, _ = make_agent([bad, bad, bad], max_consecutive_errors=2)
    with pytest.raises(ErrorBudgetExhausted) as info:
        agent.run("q")
    err = info.value
    assert err.result.stop_reason == "error_budget"
    assert len(err.result.steps) == 3
    assert all(s.actions[0].status == "unknown_tool" for s in err.result.steps)
    assert err.attempts == 3
    assert err.last_reply is not None


def test_a_success_resets_the_error_budget() -> None:
    bad = tool_call_reply(("nope", {}))
    good = tool_call_reply(("calculator", {"expression": "1+1"}))
    agent, _ = make_agent([bad, bad, good, bad, bad, reply("2")], max_consecutive_errors=2)
    assert agent.run("q").answer == "2"


def test_loop_detection_warns_then_forces_a_final_answer() -> None:
    same = tool_call_reply(("calculator", {"expression": "2+2"}))
    agent, model = make_agent([same, same, same, same, reply("4")], loop_limit=3)
    result = agent.run("q")
    assert result.answer == "4"
    assert result.stop_reason == "loop"
    obs = [s.actions[0].observation for s in result.steps[:4]]
    assert obs[0] == "4" and "Warning" not in obs[1]
    assert "[Warning: you have called calculator with these same arguments 3 times" in obs[2]
    assert result.steps[3].actions[0].status == "skipped"
    assert model.payloads[-1]["tool_choice"] == "none"


def test_step_budget_forces_a_final_answer_with_tool_choice_none() -> None:
    calls = [tool_call_reply(("calculator", {"expression": f"{i}+1"})) for i in range(3)]
    agent, model = make_agent([*calls, reply("best effort")], max_steps=3)
    result = agent.run("q")
    assert result.answer == "best effort"
    assert result.stop_reason == "max_steps"
    assert len(model.payloads) == 4
    assert [p["tool_choice"] for p in model.payloads] == ["auto", "auto", "auto", "none"]
    assert "tools" in model.payloads[-1]  # kept, so the prompt prefix is unchanged
    assert model.payloads[-1]["messages"][-1]["role"] == "user"


def test_tool_call_budget() -> None:
    agent, model = make_agent(
        [
            tool_call_reply(("calculator", {"expression": "1"})),
            tool_call_reply(
                ("calculator", {"expression": "2"}), ("calculator", {"expression": "3"})
            ),
            reply("6"),
        ],
        max_tool_calls=2,
    )
    result = agent.run("q")
    # The call within the budget runs, the one past it does not, and the spent budget
    # asks for the final answer (tools off) instead of ending the run without one.
    assert result.stop_reason == "tool_budget"
    assert result.answer == "6"
    assert [a.status for a in result.steps[1].actions] == ["ok", "skipped"]
    assert "budget" in str(result.steps[1].actions[1].error or "")
    assert model.payloads[-1]["tool_choice"] == "none"


def test_token_budget() -> None:
    agent, model = make_agent(
        [tool_call_reply(("calculator", {"expression": "1"}), usage=Usage(900, 200, 1100, 0, 1))],
        max_total_tokens=1000,
    )
    result = agent.run("q")
    assert result.stop_reason == "token_budget"
    assert len(model.payloads) == 1


def test_deadline() -> None:
    @tool
    def slow_calc() -> int:
        """Slow."""
        time.sleep(0.3)
        return 1

    agent, _ = make_agent(
        [tool_call_reply(("slow_calc", {})), tool_call_reply(("slow_calc", {}))],
        tools=[slow_calc],
        deadline=0.2,
    )
    result = agent.run("q")
    assert result.stop_reason == "deadline"
    assert result.steps[0].actions[0].status == "timeout"


def test_retries_on_429_honour_retry_after_and_on_500() -> None:
    sleep = FakeSleep()
    agent, model = make_agent(
        [
            ModelUnavailableError("rate limited", status_code=429, retry_after=7.0),
            ModelUnavailableError("boom", status_code=500),
            reply("fine"),
        ],
        retry=RetryPolicy(max_attempts=4, initial_backoff=1.0, jitter=0.0, sleep=sleep),
    )
    result = agent.run("q")
    assert result.answer == "fine"
    assert sleep.waits == [7.0, 2.0]
    assert len(model.payloads) == 3
    assert model.payloads[0] == model.payloads[2]  # the same request again


def test_retries_are_bounded_and_the_error_is_typed() -> None:
    sleep = FakeSleep()
    agent, _ = make_agent(
        [ModelUnavailableError("down", status_code=503)] * 5,
        retry=RetryPolicy(max_attempts=3, sleep=sleep),
    )
    with pytest.raises(ModelUnavailableError) as info:
        agent.run("q")
    assert info.value.attempts == 3
    assert "after 3 attempts" in str(info.value)
    assert info.value.result is not None
    assert info.value.result.stop_reason == "error"


def test_client_errors_are_not_retried() -> None:
    sleep = FakeSleep()
    agent, model = make_agent(
        [ModelRequestError("bad key", status_code=401, body="invalid api key")],
        retry=RetryPolicy(sleep=sleep),
    )
    with pytest.raises(ModelRequestError):
        agent.run("q")
    assert sleep.waits == []
    assert len(model.payloads) == 1


@pytest.mark.parametrize("choice", ["required", "none", "get_weather"])
def test_tool_choice_per_run(choice: str) -> None:
    script: list[Any] = [reply("x")]
    if choice != "none":
        script.insert(0, tool_call_reply(("get_weather", {"location": "Paris"})))
    agent, model = make_agent(script)
    result = agent.run("q", tool_choice=choice, max_steps=1)
    assert result.answer == "x"
    expected: Any = (
        {"type": "function", "function": {"name": "get_weather"}}
        if choice == "get_weather"
        else choice
    )
    assert model.payloads[0]["tool_choice"] == expected
    assert agent.config.tool_choice == "auto"  # per run only


def test_required_tool_choice_makes_a_bare_answer_a_format_error() -> None:
    agent, _ = make_agent(
        [
            reply("no tools for me"),
            tool_call_reply(("calculator", {"expression": "1"})),
            reply("1"),
        ],
        tool_choice="auto",
    )
    result = agent.run("q", tool_choice="required", max_steps=1)
    assert result.answer == "1" and result.stop_reason == "max_steps"
    assert result.steps[0].kind == "format_error"
    assert "a tool must be used before the final answer" in (result.steps[0].feedback or "")


def test_empty_reply_is_fed_back() -> None:
    agent, model = make_agent([reply(None), reply("answer")])
    result = agent.run("q")
    assert result.answer == "answer"
    assert result.steps[0].kind == "format_error"
    assert model.payloads[1]["messages"][-1]["content"].startswith("Your reply was empty")


def test_observation_truncation_and_summarize_hook() -> None:
    @tool(annotations=ToolAnnotations(read_only=True))
    def big() -> str:
        """Lots of text."""
        return "x" * 10_000

    @tool(summarize=lambda rows: f"{len(rows)} rows", annotations=ToolAnnotations(read_only=True))
    def rows() -> list[int]:
        """Rows."""
        return list(range(50))

    agent, _ = make_agent(
        [tool_call_reply(("big", {}), ("rows", {})), reply("ok")],
        tools=[big, rows],
        max_observation_chars=500,
    )
    result = agent.run("q")
    big_obs, rows_obs = (a.observation for a in result.steps[0].actions)
    assert len(big_obs) <= 500
    assert "truncated" in big_obs and "of 10000 characters" in big_obs
    assert rows_obs == "50 rows"


def test_observations_are_compact_unicode_json() -> None:
    @tool
    def city() -> dict[str, Any]:
        """A city."""
        return {"name": "北京", "temp": 24}

    agent, _ = make_agent([tool_call_reply(("city", {})), reply("ok")], tools=[city])
    assert agent.run("q").steps[0].actions[0].observation == '{"name":"北京","temp":24}'


def test_multi_turn_history_keeps_tool_results() -> None:
    agent, model = make_agent(
        [
            tool_call_reply(("get_weather", {"location": "Beijing"}, "c1")),
            reply("Sunny in Beijing."),
            reply("Yes, take sunglasses."),
        ]
    )
    conv = agent.conversation()
    conv.ask("Weather in Beijing?")
    second = conv.ask("Should I take sunglasses?")
    assert second.answer == "Yes, take sunglasses."
    roles = [m["role"] for m in model.payloads[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert model.payloads[-1]["messages"][3]["tool_call_id"] == "c1"
    assert len(conv.steps) == 3


def test_async_twin() -> None:
    agent, _ = make_agent([tool_call_reply(("calculator", {"expression": "6*7"})), reply("42")])
    result = asyncio.run(agent.arun("6*7?"))
    assert result.answer == "42"
    assert result.steps[0].actions[0].observation == "42"


def test_trace_jsonl_has_every_step_and_no_key(tmp_path: Any) -> None:
    secret = "sk-test-SECRET-1234567890"
    model = ScriptedModel([tool_call_reply(("calculator", {"expression": "1+1"})), reply("2")])
    agent = Agent("gpt-4o-mini", tools=[calculator], client=model, api_key=secret)
    result = agent.run("1+1?")
    path = tmp_path / "trace.jsonl"
    result.write_trace(str(path))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in records] == ["run", "step", "step", "result"]
    assert records[1]["actions"][0]["tool"] == "calculator"
    assert records[-1]["answer"] == "2"
    assert secret not in path.read_text()
    assert secret not in repr(agent)


def test_approval_callback() -> None:
    @tool(requires_approval=True)
    def wipe(path: str) -> str:
        """Delete a path."""
        return f"deleted {path}"

    seen: list[str] = []

    def approve(call: Any) -> bool:
        seen.append(call.arguments["path"])
        return call.arguments["path"] == "/tmp/ok"

    agent, _ = make_agent(
        [tool_call_reply(("wipe", {"path": "/"}), ("wipe", {"path": "/tmp/ok"})), reply("done")],
        tools=[wipe],
        approve=approve,
        multi_action="all",  # both calls reach the approver
    )
    result = agent.run("clean up")
    denied, allowed = result.steps[0].actions
    assert denied.status == "denied" and "did not approve" in denied.observation
    assert allowed.status == "ok" and allowed.observation == "deleted /tmp/ok"
    assert sorted(seen) == ["/", "/tmp/ok"]


def test_on_step_sees_every_step_live() -> None:
    seen: list[str] = []
    agent, _ = make_agent(
        [tool_call_reply(("calculator", {"expression": "1"})), reply("1")],
        on_step=lambda step: seen.append(step.kind),
    )
    agent.run("q")
    assert seen == ["action", "final"]


def test_trace_lines_survive_readers_that_split_on_unicode_separators() -> None:
    agent, _ = make_agent([reply("a\u2028b\u2029c\x85d")])
    result = agent.run("line\u2028separator?")
    text = result.to_jsonl()
    lines = text.splitlines()  # str.splitlines() splits on U+2028, U+2029 and U+0085 too
    assert [json.loads(line)["type"] for line in lines] == ["run", "step", "result"]
    assert json.loads(lines[-1])["answer"] == "a\u2028b\u2029c\x85d"


def test_a_sync_tool_past_its_timeout_does_not_hold_a_blocking_run() -> None:
    import threading

    release = threading.Event()

    returned: list[bool] = []

    @tool(timeout=0.1)
    def stuck() -> str:
        """Blocks until released."""
        returned.append(release.wait(30))
        return "late"

    agent, _ = make_agent([tool_call_reply(("stuck", {})), reply("moved on")], tools=[stuck])
    try:
        result = agent.run("q")
        still_stuck = returned == []
    finally:
        release.set()
    assert result.answer == "moved on"
    assert result.steps[0].actions[0].status == "timeout"
    assert still_stuck  # the run ended before the stuck thread did: it did not wait


@pytest.mark.parametrize(
    "written",
    [
        'functions.get_weather:\n{"location": "Beijing", "unit": "celsius"}',
        '<tool_call>{"name": "get_weather", "arguments": {"location": "Beijing"}}</tool_call>',
    ],
)
def test_a_call_written_as_text_is_not_taken_for_the_forced_final_answer(written: str) -> None:
    # The model now gets one more forced request after the first such reply (see below);
    # written twice, the run still ends without an answer.
    agent, model = make_agent(
        [
            tool_call_reply(("get_weather", {"location": "Beijing"})),
            reply(written),
            reply(written),
        ],
        max_steps=1,
    )
    result = agent.run("q")
    assert model.payloads[-1]["tool_choice"] == "none"
    assert result.stop_reason == "max_steps"
    assert result.answer is None
    assert result.steps[-1].kind == "format_error"


# --- think blocks under function calling ------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "<think>\nThey asked about Paris.\n</think>\n\nParis is sunny.",
        "<thinking>They asked about Paris.</thinking>Paris is sunny.",
        "<reasoning>They asked about Paris.</reasoning>\nParis is sunny.",
        # DeepSeek-R1's template opens the block in the prompt: only the close is in the reply.
        "They asked about Paris.\n</think>\n\nParis is sunny.",
    ],
)
def test_a_think_block_is_thought_not_answer(content: str) -> None:
    agent, _ = make_agent([reply(content)])
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is sunny."
    assert result.steps[-1].thought == "They asked about Paris."
    assert result.steps[-1].text == content  # the transcript keeps the reply as written


def test_the_servers_reasoning_is_kept_apart_from_a_think_block() -> None:
    agent, _ = make_agent([reply("<think>inline</think>Paris is sunny.", reasoning="separate")])
    result = agent.run("Weather in Paris?")
    assert result.answer == "Paris is sunny."
    assert result.steps[-1].thought == "inline"
    assert result.steps[-1].reasoning == "separate"


def test_a_think_block_is_stripped_from_the_forced_final_answer() -> None:
    agent, _ = make_agent(
        [
            tool_call_reply(("get_weather", {"location": "Paris"})),
            reply("<think>The tool said sunny.</think>\nParis is sunny, 24°C."),
        ],
        max_steps=1,
    )
    result = agent.run("Weather in Paris?")
    assert result.stop_reason == "max_steps"
    assert result.answer == "Paris is sunny, 24°C."
    assert result.steps[-1].thought == "The tool said sunny."


def test_a_tool_call_replys_think_block_is_its_thought() -> None:
    agent, _ = make_agent(
        [
            tool_call_reply(
                ("get_weather", {"location": "Paris"}),
                content="<think>I need the weather.</think>\nLet me check.",
            ),
            reply("Paris is sunny."),
        ]
    )
    result = agent.run("Weather in Paris?")
    assert result.steps[0].kind == "action"
    assert result.steps[0].thought == "I need the weather.\n\nLet me check."
    assert result.answer == "Paris is sunny."


@pytest.mark.parametrize(
    "content",
    [
        "<think>Maybe I should call get_weather for Paris.</think>",
        "<think>Maybe I should call get_weather for Paris.",  # cut before the model finished
        '<think>get_weather(location="Paris")</think>\n',  # a draft call is not a call
    ],
)
def test_a_reply_that_is_only_reasoning_is_not_an_answer(content: str) -> None:
    agent, model = make_agent([reply(content), reply("Paris is sunny.")])
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert result.steps[0].thought is not None and "get_weather" in result.steps[0].thought
    assert result.steps[0].actions == []
    assert result.answer == "Paris is sunny."
    assert "Your reply was empty" in model.payloads[1]["messages"][-1]["content"]


def test_a_salvaged_calls_think_block_is_its_thought() -> None:
    agent, _ = make_agent(
        [
            reply(
                "<think>Paris first.</think>\n"
                '<tool_call>{"name": "get_weather", "arguments": {"location": "Paris"}}</tool_call>'
            ),
            reply("Paris is sunny."),
        ]
    )
    result = agent.run("Weather in Paris?")
    assert result.steps[0].actions[0].salvaged
    assert result.steps[0].thought == "Paris first."
    assert result.answer == "Paris is sunny."


def test_a_required_tool_choice_resets_to_auto_once_a_tool_ran() -> None:
    script = [
        tool_call_reply(("get_weather", {"location": "Paris"}, "c1")),
        reply("Overcast in Paris, 14°C."),
    ]
    agent, model = make_agent(list(script), tool_choice="required")
    result = agent.run("Weather in Paris?")
    assert result.answer == "Overcast in Paris, 14°C."
    assert [p.get("tool_choice") for p in model.payloads] == ["required", "auto"]

    agent, model = make_agent(
        [
            tool_call_reply(("get_weather", {"location": "Paris"}, "c1")),
            tool_call_reply(("get_weather", {"location": "London"}, "c2")),
            reply("Overcast in Paris, drizzle in London."),
        ],
        tool_choice="required",
        reset_tool_choice=False,
    )
    agent.run("Weather in Paris?", max_steps=2)
    assert [p.get("tool_choice") for p in model.payloads] == ["required", "required", "none"]


def test_a_repeated_call_is_answered_with_its_earlier_result() -> None:
    call = ("get_weather", {"location": "Paris"}, None)
    agent, _ = make_agent(
        [tool_call_reply(call), tool_call_reply(call), reply("Overcast, 14°C.")], loop_limit=1
    )
    result = agent.run("Weather in Paris?")
    first, second = result.steps[0].actions[0], result.steps[1].actions[0]
    assert first.status == "ok" and "Warning" not in first.observation  # no warning at limit 1
    # Not run again: the model is given the earlier result, the trace says what happened.
    assert second.status == "skipped"
    assert second.observation == first.observation
    assert second.error == Notice(NoticeCode.GIVEN_AGAIN)
    assert result.stop_reason == "loop" and result.answer == "Overcast, 14°C."


def test_on_call_announces_each_call_before_its_tool_runs() -> None:
    events: list[str] = []

    @tool(annotations=ToolAnnotations(read_only=True))
    def lookup(city: str) -> str:
        """Look a city up."""
        events.append(f"ran {city}")
        return "ok"

    agent, _ = make_agent(
        [
            tool_call_reply(("lookup", {"city": "A"}, "c1"), ("lookup", {"city": "B"}, "c2")),
            reply("done"),
        ],
        tools=[lookup],
        on_call=lambda record: events.append(f"calling {record.tool} {record.arguments}"),
        on_step=lambda step: events.append(f"step {step.index}"),
    )
    agent.run("q")
    assert events.index("calling lookup {'city': 'A'}") < events.index("ran A")
    assert events.index("calling lookup {'city': 'B'}") < events.index("ran B")
    assert events.index("ran B") < events.index("step 0")
