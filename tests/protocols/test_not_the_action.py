"""Only the model's action runs: calls written where they are not the action never run.

The red team's five shapes (issue 36; the first is also issue 33's first point), each with
a destructive ``rm`` offered, under every protocol, with a model that ignores ``stop``
(the scripted model sends the whole reply) and streamed from the loopback server (which
ignores ``stop`` too). On main at 954ddcb each ran ``rm("/srv/a")`` under function
calling, and each but the call after ``Final Answer:`` under text (that one became an answer
holding the call's markup). Then JSON ``null`` as an Action Input, which ran
``rm(path="null")``, and the text input that stays what the model wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from react_engine import Agent, CapabilityCache, RetryPolicy, ScriptedModel, ToolAnnotations, tool
from react_engine.parsing.placement import placement
from react_engine.parsing.salvage import read_salvaged
from react_engine.run.events import Event, RunDone
from react_engine.testing import ScriptedServer, completion

CALL = '<tool_call>{"name": "rm", "arguments": {"path": "/srv/a"}}</tool_call>'

SHAPES = {
    "after_invented_observation": "The answer is 4.\nObservation: " + CALL,
    "declining_prose": "Here is how you'd call it: " + CALL + " — but I won't.",
    "after_final_answer": "Final Answer: 4\n" + CALL,
    "fenced_python_then_prose": '```python\nrm(path="/srv/a")\n```\nThat would delete it.',
    "unclosed": '<tool_call>{"name": "rm", "arguments": {"path": "/srv/a"}}',
}
PROTOCOLS = ["function_calling", "text", "structured", "minimal"]
FINAL = {
    "function_calling": "It is 4.",
    "text": "Thought: done\nFinal Answer: It is 4.",
    "structured": '{"thought": "done", "final_answer": "It is 4."}',
    "minimal": "ANSWER It is 4.",
}


def rm_tool(ran: list[str]) -> Any:
    @tool(annotations=ToolAnnotations(destructive=True))
    def rm(path: str) -> str:
        """Delete the file at ``path``."""
        ran.append(path)
        return "deleted"

    return rm


async def no_sleep(_: float) -> None:
    return None


def run_scripted(protocol: str, first: str) -> tuple[list[str], Any]:
    ran: list[str] = []
    model = ScriptedModel([first], default=FINAL[protocol])
    agent = Agent(
        "some-model", [rm_tool(ran)], client=model, protocol=protocol, max_consecutive_errors=5
    )
    return ran, agent.run("Delete nothing; what is 2 + 2?")


def run_streamed(protocol: str, first: str) -> tuple[list[str], Any]:
    ran: list[str] = []
    with ScriptedServer(completion(first), *[completion(FINAL[protocol])] * 4) as server:
        agent = Agent(
            "mock-model",
            [rm_tool(ran)],
            base_url=server.base_url,
            api_key="sk-test",
            protocol=protocol,
            capability_cache=CapabilityCache(),
            retry=RetryPolicy(max_attempts=3, sleep=no_sleep),
            max_consecutive_errors=5,
        )
        events: list[Event] = list(agent.run_stream("Delete nothing; what is 2 + 2?"))
    done = events[-1]
    assert isinstance(done, RunDone)
    return ran, done.result


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_call_that_is_not_the_action_never_runs(protocol: str, shape: str) -> None:
    ran, result = run_scripted(protocol, SHAPES[shape])
    assert ran == []
    first = result.steps[0]
    if shape == "fenced_python_then_prose" and protocol == "function_calling":
        # a fenced example is prose: the reply is the answer, as any reply showing code
        assert result.answer == SHAPES[shape] and first.kind == "final"
        return
    assert result.answer == "It is 4."
    # not run, and the model was told: a format error, or the call refused with a reason
    if first.kind == "format_error":
        assert first.feedback
    else:
        assert first.kind == "action" and shape == "unclosed"
        assert [a.status for a in first.actions] == ["invalid_arguments"]
        assert "closing tag is missing" in first.actions[0].observation


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_streamed_from_a_server_that_ignores_stop_it_never_runs(protocol: str, shape: str) -> None:
    ran, result = run_streamed(protocol, SHAPES[shape])
    assert ran == []
    example = shape == "fenced_python_then_prose" and protocol == "function_calling"
    assert result.answer == (SHAPES[shape] if example else "It is 4.")


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize(
    "shape", ["after_invented_observation", "declining_prose", "after_final_answer"]
)
def test_the_model_is_told_why_the_call_did_not_run(protocol: str, shape: str) -> None:
    _, result = run_scripted(protocol, SHAPES[shape])
    feedback = result.steps[0].feedback or ""
    assert result.steps[0].kind == "format_error"
    if protocol == "function_calling":
        assert "was not run" in feedback


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_the_same_calls_written_as_the_action_still_run(protocol: str) -> None:
    for reply in (
        CALL,
        "Let me delete it.\n" + CALL,
        '```python\nrm(path="/srv/a")\n```',
        'I will delete it:\n```python\nrm(path="/srv/a")\n```',
    ):
        ran, _ = run_scripted(protocol, reply)
        assert ran == ["/srv/a"], reply


def test_the_reader_says_why_each_call_is_not_the_action() -> None:
    for shape, reason in [
        ("after_invented_observation", "after_observation"),
        ("declining_prose", "described"),
        ("after_final_answer", "after_final_answer"),
    ]:
        found = read_salvaged(SHAPES[shape], ["rm"])
        assert not found.calls and found.withheld == reason
    quoted = 'He wrote "' + CALL + '" in the chat.'
    assert read_salvaged(quoted, ["rm"]).withheld == "quoted"
    assert read_salvaged("> " + CALL, ["rm"]).withheld == "quoted"
    # an unclosed call is read, and refused with a reason (the policy turns it into an error)
    (unclosed,) = read_salvaged(SHAPES["unclosed"], ["rm"]).calls
    assert unclosed.cut and "closing tag" in str(unclosed.cut)


def test_a_group_of_calls_shares_the_verdict_of_its_prose() -> None:
    text = "For example:\n" + CALL + "\n" + CALL + "\nLet me check.\n" + CALL
    spans = [c.span for c in read_salvaged(text, ["rm"], examples=True).calls]
    assert placement(text, spans) == ["described", "described", None]


# --- Action Input that is JSON but no object and no string --------------------------------


@pytest.mark.parametrize("protocol", ["text", "function_calling"])
def test_action_input_null_is_never_the_string_null(protocol: str) -> None:
    ran, result = run_scripted(protocol, "Thought: delete\nAction: rm\nAction Input: null")
    assert ran == []
    (action,) = result.steps[0].actions
    assert action.status == "invalid_arguments"
    assert "not null" in action.observation  # the model is told


@pytest.mark.parametrize("written", ["true", "12", "[1, 2]", "```\nnull\n```", "`null`"])
def test_no_json_value_becomes_text_for_a_string_parameter(written: str) -> None:
    ran, result = run_scripted("text", f"Thought: delete\nAction: rm\nAction Input: {written}")
    assert ran == []
    assert [a.status for a in result.steps[0].actions] == ["invalid_arguments"]


def test_a_number_for_an_integer_parameter_is_that_number() -> None:
    seen: list[Any] = []

    @tool
    def square(n: int) -> int:
        """The square of ``n``."""
        seen.append(n)
        return n * n

    model = ScriptedModel(
        ["Thought: square it\nAction: square\nAction Input: 12"], default=FINAL["text"]
    )
    result = Agent("some-model", [square], client=model, protocol="text").run("12 squared?")
    assert seen == [12]
    assert result.steps[0].actions[0].arguments == {"n": 12}


@pytest.mark.parametrize("protocol", ["text", "function_calling"])
def test_text_input_is_the_text_the_model_wrote(protocol: str) -> None:
    ran, _ = run_scripted(protocol, "Thought: delete\nAction: rm\nAction Input: rm -rf /")
    assert ran == ["rm -rf /"]  # seed 002's string action_input: the text as written
    ran, _ = run_scripted(protocol, 'Thought: delete\nAction: rm\nAction Input: "null"')
    assert ran == ["null"]  # a JSON string is text the model wrote


def test_under_text_a_declined_call_in_a_thought_is_refused_with_the_reason() -> None:
    reply = "Thought: I will only show it.\nHere is how you'd call it: " + CALL + " but I won't."
    ran, result = run_scripted("text", reply)
    assert ran == []
    assert result.steps[0].kind == "format_error"
    assert "was not run, because it is written in prose" in (result.steps[0].feedback or "")
