"""The protocol layer: one owner per rule, kinds of template that are open.

The policy decides and the protocols only read and word: a rule moved out of one protocol
into the policy now holds for every protocol, the minimal one included.
"""

from __future__ import annotations

from typing import Any

import pytest

from react_engine import Agent, ScriptedModel, reply
from react_engine.errors import TemplateError
from react_engine.parsing import read_think
from react_engine.protocols.prompts import (
    TEMPLATE_KINDS,
    TemplateKind,
    add_template_kind,
    parse_template,
)
from react_engine.testing.tools import calculator, get_weather

HERMES = '<tool_call>{"name": "get_weather", "arguments": {"location": "Paris"}}</tool_call>'
FIRST_STEP = {
    "structured": '{"thought": "t", "action": {"tool": "get_weather", "arguments": '
    '{"location": "Paris"}}}',
    "minimal": 'CALL get_weather {"location": "Paris"}',
}
ANSWER = {
    "structured": '{"thought": "t", "action": {"final_answer": "sunny, 24°C"}}',
    "minimal": "ANSWER sunny, 24°C",
}


@pytest.mark.parametrize("protocol", ["structured", "minimal"])
def test_a_forced_reply_that_is_a_written_call_is_refused_as_such_by_every_protocol(
    protocol: str,
) -> None:
    """The policy owns the rule the text protocol used to apply itself: on a forced final
    request, a reply that is a call written as text is told that no tool can run now."""
    model = ScriptedModel([FIRST_STEP[protocol], HERMES, ANSWER[protocol]])
    agent = Agent("m", [get_weather, calculator], protocol=protocol, client=model, max_steps=1)
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]
    assert "write your final answer in words" in (result.steps[1].feedback or "")
    assert result.answer == "sunny, 24°C"


def test_a_salvaged_call_cut_inside_its_last_value_is_refused_by_the_policy() -> None:
    """The protocol says where the reply ends (``PendingCall.cut``, in its words); the
    policy refuses the call, whatever ended the reply."""
    cut = "<tool_call>\n<function=get_weather>\n<parameter=location>\n/tmp/Par"
    model = ScriptedModel([reply(cut), "It is sunny."])
    result = Agent("m", [get_weather], protocol="function_calling", client=model).run("q")
    [call] = result.tool_calls
    assert call.status == "invalid_arguments" and "never closed" in str(call.error or "")


def test_one_think_reader() -> None:
    text = "Sure. <think>hmm</think> The answer is 4."
    assert (read_think(text).reasoning, read_think(text).rest) == ("hmm", "Sure.  The answer is 4.")
    assert read_think(text).codes == ("think_block",)
    # Where the payload is JSON, tags inside it are its text, and prose before a block is
    # reasoning (the structured protocol's reading).
    json_reply = 'Let me see <think>x</think>{"thought": "a </think> b"}'
    got = read_think(json_reply, payload="{[`")
    assert (got.reasoning, got.rest) == ("Let me see\n\nx", '{"thought": "a </think> b"}')
    unclosed = read_think("<think>still thinking", payload="{[`")
    assert (unclosed.rest, unclosed.codes) == ("", ("unclosed_think",))


def test_template_kinds_are_open() -> None:
    assert {"text", "function_calling", "structured"} <= set(TEMPLATE_KINDS)
    with pytest.raises(TemplateError, match="unknown kind 'lines'"):
        parse_template({"kind": "lines", "system": "s"}, name="t")
    schema: dict[str, Any] = {"system": (frozenset({"tools"}), frozenset({"tools"}))}
    add_template_kind("lines", TemplateKind(schema))
    try:
        template = parse_template({"kind": "lines", "system": "Tools: {tools}"}, name="t")
        assert template.kind == "lines"
        with pytest.raises(TemplateError, match="must use tools"):
            parse_template({"kind": "lines", "system": "none"}, name="t")
    finally:
        del TEMPLATE_KINDS["lines"]
