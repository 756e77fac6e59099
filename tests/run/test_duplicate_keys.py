"""A key written twice with different values is a guess, and a guess never runs.

``{"path": "/tmp/a", "path": "/home"}`` decodes (as every JSON reader does) to its last
value; the model may have meant either, so a tool that deletes files must not run with
one of them. The same value written twice is harmless and runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from react_engine import Agent, tool
from react_engine.testing import ScriptedModel, reply, tool_call_reply

deleted: list[str] = []


@tool
def remove(path: str, recursive: bool = False) -> str:
    """Delete a file."""
    deleted.append(path)
    return "deleted"


def _run(protocol: str, arguments: str) -> Any:
    deleted.clear()
    if protocol == "text":
        first = reply(f"Thought: clean up\nAction: remove\nAction Input: {arguments}")
        last = reply("Thought: done\nFinal Answer: done")
    else:
        first, last = tool_call_reply(("remove", arguments)), reply("done")
    model = ScriptedModel([first, last])
    return Agent("m", client=model, tools=[remove], protocol=protocol).run("clean up")


CONFLICTS = [
    '{"path": "/tmp/a", "path": "/home"}',
    '{"path": "/tmp/a", "recursive": false, "recursive": true}',
    '{"path": "/tmp/a", "opts": {"x": 1, "x": 2}}',
]


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("arguments", CONFLICTS)
def test_a_key_given_two_values_is_not_run(protocol: str, arguments: str) -> None:
    result = _run(protocol, arguments)
    (call,) = result.tool_calls
    assert deleted == []
    assert call.status == "invalid_arguments"
    assert [c.removeprefix("json:") for c in call.lossy] == ["duplicate_key"]
    assert "a key written twice" in call.observation  # told why, so it can write it again


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_key_written_twice_with_one_value_runs(protocol: str) -> None:
    result = _run(protocol, '{"path": "/tmp/a", "path": "/tmp/a"}')
    (call,) = result.tool_calls
    assert call.status == "ok" and deleted == ["/tmp/a"]
    assert not any(c.endswith("duplicate_key") for c in call.repairs)


WRITTEN = {
    "single quotes (repaired)": ("text", "Action: remove\nAction Input: {'path': '/tmp/a', 'path': '/home'}"),
    "JSON blob": ("text", '{"action": "remove", "action_input": {"path": "/tmp/a", "path": "/home"}}'),
    "Hermes, text": ("text", '<tool_call>{"name": "remove", "arguments": {"path": "/tmp/a", "path": "/home"}}</tool_call>'),
    "Hermes": ("function_calling", '<tool_call>{"name": "remove", "arguments": {"path": "/tmp/a", "path": "/home"}}</tool_call>'),
    "GLM-4.5": ("function_calling", "<tool_call>remove\n<arg_key>path</arg_key>\n<arg_value>/tmp/a</arg_value>\n<arg_key>path</arg_key>\n<arg_value>/home</arg_value>\n</tool_call>"),
    "Qwen3 XML": ("function_calling", "<tool_call>\n<function=remove>\n<parameter=path>\n/tmp/a\n</parameter>\n<parameter=path>\n/home\n</parameter>\n</function>\n</tool_call>"),
    "MiniMax": ("function_calling", '<minimax:tool_call><invoke name="remove"><parameter name="path">/tmp/a</parameter><parameter name="path">/home</parameter></invoke></minimax:tool_call>'),
    "Python call": ("function_calling", 'remove(path="/tmp/a", path="/home")'),
    "Mistral": ("function_calling", '[TOOL_CALLS]remove[ARGS]{"path": "/tmp/a", "path": "/home"}'),
    "Kimi K2": ("function_calling", "<|tool_calls_section_begin|><|tool_call_begin|>functions.remove:0<|tool_call_argument_begin|>{\"path\": \"/tmp/a\", \"path\": \"/home\"}<|tool_call_end|><|tool_calls_section_end|>"),
}  # fmt: skip
"""The same guess written in the other forms the readers take: repaired JSON, JSON call
objects in the text, and each family's own format (salvaged under function calling)."""


@pytest.mark.parametrize(("protocol", "text"), list(WRITTEN.values()), ids=list(WRITTEN))
def test_a_key_given_two_values_in_any_written_form_is_not_run(protocol: str, text: str) -> None:
    deleted.clear()
    model = ScriptedModel([reply(text), reply("Final Answer: done")] * 2)
    result = Agent("m", client=model, tools=[remove], protocol=protocol, max_steps=2).run("go")
    assert deleted == []
    assert result.tool_calls and all(c.status == "invalid_arguments" for c in result.tool_calls)
    assert all(
        [c.removeprefix("json:") for c in call.lossy] == ["duplicate_key"]
        for call in result.tool_calls
    )


def test_repair_json_reports_a_key_given_two_values() -> None:
    from react_engine import repair_json

    assert repair_json('{"a": 1, "a": 2}').repairs == ("duplicate_key",)
    assert repair_json("{'a': 1, 'a': 2}").repairs == ("single_quotes", "duplicate_key")
    assert repair_json('{"a": [1, {"b": 1, "b": 2}]}').repairs == ("duplicate_key",)
    assert repair_json('{"a": 1, "a": 1}').repairs == ()  # the same value: harmless
    assert repair_json('{"a": 1, "b": 2}').repairs == ()


CALL_OBJECTS = {
    "the arguments twice": '{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/home"}}',
    "the name twice": '{"name": "get_time", "name": "remove", "arguments": {"path": "/home"}}',
    "an argument twice, no arguments key": '{"name": "remove", "path": "/tmp/a", "path": "/home"}',
    "tool_calls twice": '{"tool_calls": [{"name": "remove", "arguments": {"path": "/tmp/a"}}], "tool_calls": [{"name": "remove", "arguments": {"path": "/home"}}]}',
    "in a list": '[{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/home"}}]',
    "in a wrapper's list": '{"tool_calls": [{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/home"}}]}',
    "Hermes": '<tool_call>{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/home"}}</tool_call>',
    "Mistral": '[TOOL_CALLS][{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/home"}}]',
    "an action blob": '```json\n{"action": "remove", "action_input": {"path": "/tmp/a"}, "action_input": {"path": "/home"}}\n```',
    "OpenAI's function object": '{"type": "function", "function": {"name": "remove", "arguments": "{\\"path\\": \\"/tmp/a\\"}", "arguments": "{\\"path\\": \\"/home\\"}"}}',
}  # fmt: skip
"""A call object itself giving a key two values: which arguments (or which tool, or which
list of calls) the model meant is a guess. The readers of calls written in the text read
the last, and ran ``remove("/home")``: only a key given two values inside the arguments
was marked."""


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("text", list(CALL_OBJECTS.values()), ids=list(CALL_OBJECTS))
def test_a_call_object_giving_a_key_two_values_is_not_run(protocol: str, text: str) -> None:
    deleted.clear()
    model = ScriptedModel([reply(text), reply("Final Answer: done")] * 2)
    result = Agent("m", client=model, tools=[remove], protocol=protocol, max_steps=2).run("go")
    assert deleted == []
    assert result.tool_calls and all(c.status == "invalid_arguments" for c in result.tool_calls)
    for call in result.tool_calls:
        assert [c.removeprefix("json:") for c in call.lossy] == ["duplicate_key"]
        assert "a key written twice" in call.observation


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_call_object_giving_a_key_one_value_twice_runs(protocol: str) -> None:
    deleted.clear()
    text = '{"name": "remove", "arguments": {"path": "/tmp/a"}, "arguments": {"path": "/tmp/a"}}'
    model = ScriptedModel([reply(text), reply("Final Answer: done")])
    result = Agent("m", client=model, tools=[remove], protocol=protocol, max_steps=2).run("go")
    assert deleted == ["/tmp/a"]
    assert [c.status for c in result.tool_calls] == ["ok"]


def test_the_readers_return_what_they_repaired_beside_plain_values() -> None:
    from react_engine.parsing.duplicates import assign, decode
    from react_engine.parsing.salvage.readers import call_from_json, python_call

    assert decode('{"a": 1, "a": 2}') == ({"a": 2}, 16, True)
    assert decode('[{"a": 1, "a": 1}]', 0)[2] is False  # the same value twice: harmless
    target: dict[str, Any] = {}
    assert not assign(target, "a", 1) and not assign(target, "a", 1)
    assert assign(target, "a", 2) and target == {"a": 2}
    twice = '{"name": "f", "arguments": {"a": 1}, "arguments": {"a": 2}}'
    ((_, arguments, repairs),) = call_from_json(twice) or []
    assert type(arguments) is dict and repairs == ("duplicate_key",)
    assert call_from_json('{"name": "f", "arguments": /srv/x}') == [
        ("f", "/srv/x", ("loose_arguments",))
    ]
    called = python_call('f(a=1, a="x")', frozenset({"f"}))
    assert called is not None and called[2] == ("duplicate_key",)
    assert type(called[1]) is dict and called[1] == {"a": "x"}
