"""Tool-call arguments that must never reach a tool as given.

* arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` are an ``invalid_arguments``
  observation (never a bare ``RecursionError``), and a trace always serialises;
* arguments cut off (an unclosed string or object at the end) or not JSON at all are an
  ``invalid_arguments`` observation, under both protocols and through salvage;
* parsing and repair never empty a value the model wrote (fences inside strings,
  ``tool_name``/``tool_arguments`` keys, ``Action 1 Input:``).

Every case runs through the whole agent on a :class:`ScriptedModel`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from react_engine import Agent, RunResult, ScriptedModel, Tool, reply, tool_call_reply
from react_engine.errors import JSONRepairError
from react_engine.nesting import MAX_ARGUMENT_DEPTH, MAX_TRACE_DEPTH
from react_engine.parsing import parse_react, repair_json
from react_engine.types import Step, to_jsonable

PROTOCOLS = ["function_calling", "text"]


class Tools:
    """Tools that record every call they really receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

        def get_weather(location: str) -> str:
            """The weather somewhere.

            Args:
                location: a city.
            """
            self.calls.append(("get_weather", location))
            return f"sunny in {location}"

        def delete_path(path: str) -> str:
            """Delete a file or directory.

            Args:
                path: what to delete.
            """
            self.calls.append(("delete_path", path))
            return f"deleted {path}"

        def store(data: dict[str, Any]) -> str:
            """Store a document.

            Args:
                data: the document.
            """
            self.calls.append(("store", data))
            return "stored"

        def run_code(foo: str) -> str:
            """Run code.

            Args:
                foo: the code.
            """
            self.calls.append(("run_code", foo))
            return "ran"

        self.tools = [Tool.from_function(f) for f in (get_weather, delete_path, store, run_code)]


def run(protocol: str, *replies: Any) -> tuple[RunResult, Tools]:
    tools = Tools()
    final = reply("done") if protocol == "function_calling" else reply("Final Answer: done")
    model = ScriptedModel([*replies, final])
    agent = Agent("m", tools.tools, client=model, protocol=protocol, max_consecutive_errors=3)
    result = agent.run("q")
    return result, tools


def call(protocol: str, tool: str, arguments: str) -> Any:
    """One call with ``arguments`` as the model wrote them, in the protocol's own form."""
    if protocol == "function_calling":
        return tool_call_reply((tool, arguments))
    return reply(f"Thought: I will use {tool}.\nAction: {tool}\nAction Input: {arguments}")


def nested(depth: int) -> str:
    """An arguments object ``depth`` levels deep (the object itself is level 1)."""
    inner = depth - 1
    return '{"data": ' + '{"a": ' * (inner - 1) + "{}" + "}" * (inner - 1) + "}"


def only_action(result: RunResult) -> Any:
    actions = [a for s in result.steps for a in s.actions]
    assert len(actions) == 1
    return actions[0]


# --- deep nesting ------------------------------------------------------------------------------


def test_nested_helper_has_the_depth_it_says() -> None:
    from react_engine.nesting import exceeds_depth

    value = json.loads(nested(7))
    assert not exceeds_depth(value, 7) and exceeds_depth(value, 6)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 900, 1000, 5000])
def test_arguments_nested_too_deep_are_an_observation_and_the_trace_serialises(
    protocol: str, depth: int
) -> None:
    result, tools = run(protocol, call(protocol, "store", nested(depth)))
    assert result.answer == "done"
    action = only_action(result)
    assert action.status == "invalid_arguments"
    assert "nested" in action.observation
    assert tools.calls == []  # the tool never ran
    assert isinstance(action.arguments, str)
    for line in result.to_jsonl().splitlines():
        json.loads(line)
    json.dumps(to_jsonable(result.steps), indent=2)  # what the CLI's --json prints


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_arguments_at_the_depth_limit_still_run(protocol: str) -> None:
    result, tools = run(protocol, call(protocol, "store", nested(MAX_ARGUMENT_DEPTH)))
    assert only_action(result).status == "ok"
    assert len(tools.calls) == 1
    json.loads(result.to_jsonl().splitlines()[1])


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 900])
def test_deep_salvaged_calls_are_refused(depth: int) -> None:
    hermes = f'<tool_call>{{"name": "store", "arguments": {nested(depth)}}}</tool_call>'
    result, tools = run("function_calling", reply(hermes))
    action = only_action(result)
    assert action.status == "invalid_arguments" and action.salvaged
    assert tools.calls == []
    result.to_jsonl()


def test_tool_validate_refuses_deep_arguments_from_any_protocol() -> None:
    tool = Tools().tools[2]
    from react_engine.tools import ToolArgumentsError

    with pytest.raises(ToolArgumentsError, match="nested deeper"):
        tool.check(json.loads(nested(MAX_ARGUMENT_DEPTH + 1)))
    tool.check(json.loads(nested(MAX_ARGUMENT_DEPTH)))


def _deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [900, 5000, 100_000])
def test_to_jsonl_serialises_anything_deep_that_gets_into_a_step(depth: int) -> None:
    step = Step(index=0, kind="action", protocol="text")
    from react_engine.types import ActionRecord, Usage

    step.actions.append(
        ActionRecord(id="c", tool="store", arguments=_deep(depth), raw_arguments="")
    )
    result = RunResult(
        question="q",
        answer=None,
        steps=[step],
        usage=Usage(),
        protocol="text",
        protocol_reason="explicit",
        stop_reason="error",
        model="m",
    )
    lines = result.to_jsonl().splitlines()
    record = json.loads(lines[1])
    assert "<cut: nested too deep>" in lines[1]
    assert record["actions"][0]["tool"] == "store"
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    json.dumps(to_jsonable(cyclic))
    shallow = _deep(MAX_TRACE_DEPTH - 10)
    assert to_jsonable(shallow) == shallow  # nothing is cut within the limit


# --- cut-off or unparseable arguments never run ---------------------------------------------------

TRUNCATED = [
    ("delete_path", '{"path": "/tmp/important/sub'),
    ("get_weather", '{"location": "Paris", "unit": '),
    ("get_weather", '{"location": "Paris", '),
    ("get_weather", "{"),
    ("get_weather", '{"location'),
]
ONLY_CLOSERS = [
    ("get_weather", '{"location": "Paris"'),
    ("get_weather", "{'location': 'Paris'"),
]
"""Only closing brackets missing, after a complete value: the closing-bracket rule runs
them in a reply not cut by length (docs/reliability.md)."""


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("tool", "arguments"), TRUNCATED)
def test_cut_off_arguments_never_run(protocol: str, tool: str, arguments: str) -> None:
    result, tools = run(protocol, call(protocol, tool, arguments))
    assert result.answer == "done"
    action = only_action(result)
    assert action.status == "invalid_arguments"
    assert tools.calls == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("tool", "arguments"), ONLY_CLOSERS)
@pytest.mark.parametrize("finish_reason", ["stop", "length"])
def test_only_closing_brackets_missing_run_unless_cut_by_length(
    protocol: str, tool: str, arguments: str, finish_reason: str
) -> None:
    written = call(protocol, tool, arguments)
    written.finish_reason = finish_reason
    result, tools = run(protocol, written)
    action = only_action(result)
    if finish_reason == "length":
        assert action.status == "invalid_arguments" and tools.calls == []
    else:
        assert action.status == "ok"
        assert tools.calls == [("get_weather", "Paris")]


@pytest.mark.parametrize(("tool", "arguments"), TRUNCATED + ONLY_CLOSERS)
def test_cut_off_arguments_salvaged_from_text_never_run(tool: str, arguments: str) -> None:
    """Under function calling, a Thought/Action block (or a JSON action, or a
    ``<tool_call>`` tag) written as text and cut off: no tool runs."""
    for text in (
        f"Thought: go\nAction: {tool}\nAction Input: {arguments}",
        f'<tool_call>{{"name": "{tool}", "arguments": {arguments}',
        f'{{"action": "{tool}", "action_input": {arguments}',
    ):
        result, tools = run("function_calling", reply(text))
        assert tools.calls == [], text
        actions = [a for s in result.steps for a in s.actions]
        assert all(a.status == "invalid_arguments" for a in actions), text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sloppy_but_complete_arguments_still_run(protocol: str) -> None:
    result, tools = run(protocol, call(protocol, "get_weather", "{'location': 'Paris',}"))
    assert only_action(result).status == "ok"
    assert tools.calls == [("get_weather", "Paris")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_arguments_that_start_like_json_but_are_not_never_run(protocol: str) -> None:
    result, tools = run(protocol, call(protocol, "get_weather", '{"location": Paris" : }'))
    assert only_action(result).status == "invalid_arguments"
    assert tools.calls == []


def test_json_string_arguments_that_are_broken_never_run() -> None:
    blob = '{"action": "get_weather", "action_input": "{\\"location\\": \\"Par"}'
    for protocol in PROTOCOLS:
        result, tools = run(protocol, reply(blob))
        assert only_action(result).status == "invalid_arguments", protocol
        assert tools.calls == []


def test_repair_json_can_refuse_truncation() -> None:
    for text in ('{"path": "/tmp/imp', '{"a": [1, 2', '{"a": 1,', '["x", "y', '{"a": "b\\'):
        assert repair_json(text).repairs  # closed by default...
        with pytest.raises(JSONRepairError, match="truncated"):
            repair_json(text, allow_truncated=False)  # ... but not for tool arguments
    # complete but sloppy JSON is still repaired, also the wrong closing bracket
    assert repair_json("{'a': 1,}", allow_truncated=False).value == {"a": 1}
    assert repair_json('{"a": [1, 2}', allow_truncated=False).value == {"a": [1, 2]}


# --- no silent data loss --------------------------------------------------------------------------

FENCE = "```"


def test_a_fence_inside_a_json_string_does_not_close_the_fence() -> None:
    for text in (
        f'{FENCE}json\n{{"foo": "{FENCE}bar{FENCE}"}}\n{FENCE}',
        f'{FENCE}\n{{"foo": "{FENCE}bar{FENCE}"}}{FENCE}',
        f'Arguments: {FENCE}json\n{{"foo": "{FENCE}bar{FENCE}"}}\n{FENCE} as asked',
    ):
        assert repair_json(text).value == {"foo": f"{FENCE}bar{FENCE}"}, text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_fenced_action_input_keeps_a_fence_inside_its_string(protocol: str) -> None:
    fenced = f'{FENCE}json\n{{"foo": "{FENCE}bar{FENCE}"}}\n{FENCE}'
    text = f"Thought: run it\nAction: run_code\nAction Input: {fenced}"
    blob = f'{FENCE}json\n{{"action": "run_code", "action_input": {{"foo": "{FENCE}bar{FENCE}"}}}}\n{FENCE}'
    for content in (text, blob):
        _result, tools = run(protocol, reply(content))
        assert tools.calls == [("run_code", f"{FENCE}bar{FENCE}")], content


def test_a_deepseek_fenced_call_keeps_a_fence_inside_its_string() -> None:
    content = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>run_code\n"
        f'{FENCE}json\n{{"foo": "{FENCE}bar{FENCE}"}}\n{FENCE}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    _result, tools = run("function_calling", reply(content))
    assert tools.calls == [("run_code", f"{FENCE}bar{FENCE}")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "blob",
    [
        '{"tool_name": "get_weather", "tool_arguments": {"location": "Paris"}}',
        '{"tool": "get_weather", "tool_args": {"location": "Paris"}}',
        '{"function_name": "get_weather", "function_arguments": {"location": "Paris"}}',
        '{"action": "get_weather", "location": "Paris"}',
    ],
)
def test_json_actions_keep_their_arguments_whatever_the_keys(protocol: str, blob: str) -> None:
    _result, tools = run(protocol, reply(blob))
    assert tools.calls == [("get_weather", "Paris")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_argument_keys_are_reported_not_dropped(protocol: str) -> None:
    blob = '{"tool": "get_weather", "input_data": {"location": "Paris"}}'
    result, tools = run(protocol, reply(blob))
    action = only_action(result)
    assert action.status == "invalid_arguments"
    assert "input_data" in action.observation
    assert tools.calls == []


def test_numbered_action_input_labels_are_read() -> None:
    step = parse_react(
        'Thought: search\nAction 1: Google Search\nAction 1 Input: "capital of France"'
    )
    assert [(a.tool, a.arguments) for a in step.actions] == [("Google Search", "capital of France")]
    step = parse_react('Action 2: get_weather\nAction 2 Input: {"location": "Paris"}')
    assert [(a.tool, a.arguments) for a in step.actions] == [("get_weather", {"location": "Paris"})]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_numbered_action_input_reaches_the_tool(protocol: str) -> None:
    text = 'Thought: weather\nAction 1: get_weather\nAction 1 Input: {"location": "Paris"}'
    _result, tools = run(protocol, reply(text))
    assert tools.calls == [("get_weather", "Paris")]


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 900])
def test_deep_arguments_under_the_structured_protocol_are_refused(depth: int) -> None:
    tools = Tools()
    body = f'{{"thought": "store it", "tool": "store", "arguments": {nested(depth)}}}'
    model = ScriptedModel([reply(body), reply('{"thought": "ok", "final_answer": "done"}')])
    agent = Agent("m", tools.tools, client=model, protocol="structured")
    result = agent.run("q")
    assert only_action(result).status == "invalid_arguments"
    assert tools.calls == []
    result.to_jsonl()


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 5000])
def test_deep_double_encoded_arguments_are_refused(depth: int) -> None:
    result, tools = run("function_calling", tool_call_reply(("store", json.dumps(nested(depth)))))
    assert only_action(result).status == "invalid_arguments"
    assert tools.calls == []


def test_a_qwen_xml_call_cut_inside_its_last_parameter_never_runs() -> None:
    cut = "<tool_call>\n<function=delete_path>\n<parameter=path>\n/tmp/important/sub"
    result, tools = run("function_calling", reply(cut))
    action = only_action(result)
    assert action.status == "invalid_arguments" and action.salvaged
    assert tools.calls == []
    result, tools = run(
        "function_calling", reply(cut + "\n</parameter>\n</function>\n</tool_call>")
    )
    assert tools.calls == [("delete_path", "/tmp/important/sub")]
    for unclosed in (
        cut + "\n</parameter>",  # the value is closed, the <tool_call> is not: never run
        cut + "\n</function>",
    ):
        result, tools = run("function_calling", reply(unclosed))
        action = only_action(result)
        assert action.status == "invalid_arguments" and "closing tag" in action.observation
        assert tools.calls == [], unclosed
