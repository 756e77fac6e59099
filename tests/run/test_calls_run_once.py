"""A call runs once, with what the model wrote, and never blind.

Through the public API, with the model behind the shipped ``ScriptedServer`` (the real
``openai`` SDK over loopback HTTP) under each protocol a rule applies to:

* ``Action: send_reminder()`` then an ``Action Input`` is one call with the real
  arguments, never a call with the defaults plus one with the arguments (text protocol,
  and a function-calling reply whose call was salvaged from its text); two different
  argument sets for one action run nothing;
* in a reply with several calls (parallel ``tool_calls``, several Actions, a JSON
  list of actions) a later call whose arguments hold a placeholder never runs, read-only
  calls run together, and only the first call to a tool that is not read-only runs
  (``multi_action="independent"``, the default); what is held back is reported to the
  model and recorded in the trace;
* tool effects: MCP's annotations on ``@tool``, ``Tool.from_schema`` and the tools of a
  real MCP server (``tests/support/mcp_server.py``).

The structured protocol has no place here: a step is one JSON object holding one call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    ConfigurationError,
    RunResult,
    ScriptedModel,
    TextReActProtocol,
    Tool,
    ToolAnnotations,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.protocols.policy import placeholder
from react_engine.testing import ScriptedServer, completion
from react_engine.testing.server import tool_calls_completion
from react_engine.tools.mcp import MCPServerStdio, mcp_tools

SERVER = Path(__file__).parents[1] / "support" / "mcp_server.py"

Call = tuple[str, dict[str, Any]]


class Desk:
    """Tools that record what really ran: two that only read, two that change things."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []

        @tool(annotations=ToolAnnotations(read_only=True))
        def grep(pattern: str) -> str:
            """Find the files that mention a pattern."""
            self.ran.append(("grep", pattern))
            return "src/engine.py"

        @tool(annotations=ToolAnnotations(read_only=True))
        def read(path: str) -> str:
            """Read a file."""
            self.ran.append(("read", path))
            return f"contents of {path}"

        @tool(annotations=ToolAnnotations(destructive=True))
        def delete(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete", path))
            return f"deleted {path}"

        @tool
        def send_reminder(to: str = "all", text: str = "please act") -> str:
            """Send a reminder to a user (everyone by default)."""
            self.ran.append(("send_reminder", {"to": to, "text": text}))
            return f"reminder sent to {to}"

        self.tools = [grep, read, delete, send_reminder]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def protocol_for(style: str) -> Any:
    """The agent's ``protocol=`` for a reply style."""
    return {
        "function_calling": "function_calling",
        "salvaged": "function_calling",
        "text": "text",
        "zh": TextReActProtocol(template="zh"),
        "json_list": TextReActProtocol(template="json"),
    }[style]


def calls_body(style: str, *calls: Call) -> dict[str, Any]:
    """One reply making ``calls``, written as a model writes them under ``style``."""
    if style == "function_calling":
        return tool_calls_completion(*calls)
    if style == "json_list":
        listed = [{"action": name, "action_input": args} for name, args in calls]
        blob = json.dumps(listed, ensure_ascii=False)
        return completion(f"Thought: all at once.\nAction:\n```json\n{blob}\n```")
    label, input_label = (
        ("行动：", "行动输入：") if style == "zh" else ("Action: ", "Action Input: ")
    )
    lines = ["思考：一起做。" if style == "zh" else "Thought: all at once."]
    for name, args in calls:
        lines += [label + name, input_label + json.dumps(args, ensure_ascii=False)]
    return completion("\n".join(lines))


def final_body(style: str, answer: str = "done") -> dict[str, Any]:
    if style in ("function_calling", "salvaged"):
        return completion(answer)
    if style == "zh":
        return completion(f"思考：好了。\n最终答案：{answer}")
    return completion(f"Thought: done.\nFinal Answer: {answer}")


def run(server: ScriptedServer, style: str, tools: list[Tool], **options: Any) -> RunResult:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test-effects") as sdk:
        agent = Agent(
            "mock-model",
            tools,
            protocol=protocol_for(style),
            client=sdk,
            capability_cache=CapabilityCache(),
            **options,
        )
        return agent.run("go")


def told(server: ScriptedServer, request: int = 1) -> str:
    """Everything the model was sent in request ``request`` after the question."""
    return json.dumps(server.requests[request]["messages"][2:], ensure_ascii=False)


# --- an empty call then its Action Input is one call ---------------------------------------------

REMINDER = {"to": "user_2", "text": "请批假"}


@pytest.mark.parametrize("style", ["text", "zh", "salvaged"])
@pytest.mark.parametrize("empty", ["()", "[]", " {}"])
def test_an_empty_call_then_its_action_input_is_one_call(
    server: ScriptedServer, style: str, empty: str
) -> None:
    desk = Desk()
    label, input_label = (
        ("行动：", "行动输入：") if style == "zh" else ("Action: ", "Action Input: ")
    )
    written = (
        f"Thought: remind 李四.\n{label}send_reminder{empty}\n"
        f"{input_label}{json.dumps(REMINDER, ensure_ascii=False)}"
    )
    server.push(completion(written), final_body(style))
    result = run(server, style, desk.tools)
    assert desk.ran == [("send_reminder", REMINDER)]  # never a reminder to "all"
    (action,) = result.steps[0].actions
    assert (action.tool, action.arguments, action.status) == ("send_reminder", REMINDER, "ok")
    assert action.salvaged == (style == "salvaged")
    assert "input_after_empty_call" in result.steps[0].repairs
    assert result.answer == "done"


@pytest.mark.parametrize("style", ["text", "salvaged"])
def test_an_empty_action_input_then_another_is_one_call(server: ScriptedServer, style: str) -> None:
    desk = Desk()
    written = f"Action: send_reminder\nAction Input: {{}}\nAction Input: {json.dumps(REMINDER)}"
    server.push(completion(written), final_body(style))
    result = run(server, style, desk.tools)
    assert desk.ran == [("send_reminder", REMINDER)]
    assert len(result.steps[0].actions) == 1


@pytest.mark.parametrize("style", ["text", "salvaged"])
def test_two_different_argument_sets_for_one_action_run_nothing(
    server: ScriptedServer, style: str
) -> None:
    desk = Desk()
    written = 'Thought: remind.\nAction: send_reminder(to="all")\nAction Input: {"to": "user_2"}'
    server.push(completion(written), final_body(style))
    result = run(server, style, desk.tools)
    assert desk.ran == []
    (action,) = result.steps[0].actions
    assert action.status == "invalid_arguments"
    assert "two different sets of arguments" in action.observation
    assert "two different sets of arguments" in told(server)  # the model is told why
    assert "ambiguous_action_input" in result.steps[0].repairs


@pytest.mark.parametrize("style", ["text", "salvaged"])
def test_the_same_arguments_on_the_action_line_and_as_input_are_one_call(
    server: ScriptedServer, style: str
) -> None:
    desk = Desk()
    written = 'Action: send_reminder(to="user_2")\nAction Input: {"to": "user_2"}'
    server.push(completion(written), final_body(style))
    result = run(server, style, desk.tools)
    assert desk.ran == [("send_reminder", {"to": "user_2", "text": "please act"})]
    assert len(result.steps[0].actions) == 1


# --- several calls in one reply -------------------------------------------------------------------

MULTI = ["function_calling", "text", "json_list"]


@pytest.mark.parametrize("style", MULTI)
@pytest.mark.parametrize(
    "path", ["<the file Grep finds>", "/repo/<the file grep finds>", "{{grep.output}}"]
)
def test_a_blind_later_call_never_runs(server: ScriptedServer, style: str, path: str) -> None:
    desk = Desk()
    server.push(
        calls_body(style, ("grep", {"pattern": "TODO"}), ("read", {"path": path})),
        final_body(style),
    )
    result = run(server, style, desk.tools)
    assert desk.ran == [("grep", "TODO")]  # Read never ran on the placeholder
    grep, read = result.steps[0].actions
    assert grep.status == "ok"
    assert read.status == "skipped" and read.arguments == {"path": path}
    assert "placeholder" in read.observation and "next step" in read.observation
    assert "placeholder" in told(server)  # the model learns it was not run, and why
    assert any(
        "not run: read (blind" in event for event in [n.message for n in result.steps[0].notices]
    )


@pytest.mark.parametrize("style", MULTI)
def test_independent_read_only_calls_all_run(server: ScriptedServer, style: str) -> None:
    desk = Desk()
    server.push(
        calls_body(style, ("grep", {"pattern": "TODO"}), ("read", {"path": "README.md"})),
        final_body(style),
    )
    result = run(server, style, desk.tools)
    assert sorted(desk.ran) == [("grep", "TODO"), ("read", "README.md")]
    assert [a.status for a in result.steps[0].actions] == ["ok", "ok"]
    assert not any("not run" in event for event in [n.message for n in result.steps[0].notices])


@pytest.mark.parametrize("style", MULTI)
def test_of_two_destructive_calls_only_the_first_runs(server: ScriptedServer, style: str) -> None:
    desk = Desk()
    server.push(
        calls_body(
            style,
            ("grep", {"pattern": "tmp"}),
            ("delete", {"path": "a.tmp"}),
            ("delete", {"path": "b.tmp"}),
        ),
        # told that b.tmp was not deleted, the model asks again: now it runs
        calls_body(style, ("delete", {"path": "b.tmp"})),
        final_body(style),
    )
    result = run(server, style, desk.tools)
    first, second = result.steps[0].actions[1:]
    assert first.status == "ok"
    assert second.status == "skipped"
    assert "only one such call runs per reply" in second.observation
    assert "only one such call runs per reply" in told(server)
    assert any(
        "not run: delete (one call with effects" in e
        for e in [n.message for n in result.steps[0].notices]
    )
    assert sorted(desk.ran[:2]) == [("delete", "a.tmp"), ("grep", "tmp")]
    assert desk.ran[2:] == [("delete", "b.tmp")]
    assert result.answer == "done"


@pytest.mark.parametrize("style", MULTI)
def test_a_read_after_a_change_waits_for_the_next_step(server: ScriptedServer, style: str) -> None:
    desk = Desk()
    server.push(
        calls_body(style, ("delete", {"path": "a.tmp"}), ("read", {"path": "a.tmp"})),
        final_body(style),
    )
    result = run(server, style, desk.tools)
    assert desk.ran == [("delete", "a.tmp")]
    assert "it came after delete" in result.steps[0].actions[1].observation


def test_a_json_list_of_actions_follows_the_same_rule_and_the_trace_says_so(
    server: ScriptedServer,
) -> None:
    desk = Desk()
    listed = [
        {"action": "delete", "action_input": {"path": "a.tmp"}},
        {"action": "send_reminder", "action_input": {"to": "user_2"}},
    ]
    server.push(completion(json.dumps(listed)), final_body("text"))
    result = run(server, "text", desk.tools)
    assert desk.ran == [("delete", "a.tmp")]
    step = result.steps[0]
    # read as a JSON-blob action, or by the shared reader of JSON calls (salvaged:json)
    assert "json_blob" in step.repairs or "salvaged:json" in step.repairs
    assert [a.status for a in step.actions] == ["ok", "skipped"]
    (event,) = [n.message for n in step.notices]
    assert event.startswith("2 tool calls in one reply (multi_action='independent')")
    assert "send_reminder (one call with effects per reply)" in event


@pytest.mark.parametrize("style", MULTI)
def test_one_action_per_reply_is_multi_action_first(server: ScriptedServer, style: str) -> None:
    desk = Desk()
    server.push(
        calls_body(style, ("grep", {"pattern": "TODO"}), ("read", {"path": "README.md"})),
        final_body(style),
    )
    result = run(server, style, desk.tools, multi_action="first")
    assert desk.ran == [("grep", "TODO")]
    assert [a.status for a in result.steps[0].actions] == ["ok", "skipped"]
    assert "one call runs per reply (multi_action='first')" in told(server)


@pytest.mark.parametrize("style", ["function_calling", "text"])
def test_multi_action_all_runs_every_call_but_a_blind_one(
    server: ScriptedServer, style: str
) -> None:
    desk = Desk()
    server.push(
        calls_body(
            style,
            ("delete", {"path": "a.tmp"}),
            ("delete", {"path": "b.tmp"}),
            ("delete", {"path": "<the path grep finds>"}),
        ),
        final_body(style),
    )
    result = run(server, style, desk.tools, multi_action="all")
    assert sorted(desk.ran) == [("delete", "a.tmp"), ("delete", "b.tmp")]
    assert [a.status for a in result.steps[0].actions] == ["ok", "ok", "skipped"]


@pytest.mark.parametrize("bad", ["some", 2, None, True, False])
def test_a_wrong_multi_action_is_a_configuration_error(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="multi_action must be 'independent'"):
        Agent("m", [], multi_action=bad)


# --- tool effects: annotations -------------------------------------------------------------------


def test_tools_carry_mcp_annotations_with_mcps_defaults() -> None:
    @tool
    def plain(x: int) -> int:
        """A tool that says nothing."""
        return x

    assert plain.annotations == ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=True
    )

    @tool(annotations=ToolAnnotations(read_only=True, open_world=False))
    def look(x: int) -> int:
        """Look."""
        return x

    assert look.annotations.read_only and not look.annotations.open_world
    assert look.annotations.destructive  # a hint not given keeps MCP's default

    hints = ToolAnnotations(destructive=False, idempotent=True)
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    put = Tool.from_schema("put", schema, lambda args: "ok", annotations=hints)
    assert put.annotations is hints
    given = SimpleNamespace(read_only_hint=True, destructive_hint="no")
    assert ToolAnnotations.from_mcp(given) == ToolAnnotations(read_only=True)


def test_mcp_annotations_are_read_from_the_server_and_used() -> None:
    async def main() -> tuple[dict[str, ToolAnnotations], RunResult]:
        async with MCPServerStdio(sys.executable, [str(SERVER)]) as server:
            listed = {t.name: t.annotations for t in mcp_tools(server)}
        model = ScriptedModel(
            [
                tool_call_reply(
                    ("add", {"a": 1, "b": 2}),
                    ("delete_note", {"key": "a"}),
                    ("delete_note", {"key": "b"}),
                    ("add", {"a": 3, "b": 4}),
                ),
                reply("done"),
            ]
        )
        agent = Agent(
            "m", mcp_servers=[MCPServerStdio(sys.executable, [str(SERVER)])], client=model
        )
        return listed, await agent.arun("go")

    listed, result = asyncio.run(main())
    assert listed["add"] == ToolAnnotations(read_only=True, open_world=False)
    assert listed["delete_note"] == ToolAnnotations(
        read_only=False, destructive=True, idempotent=True, open_world=False
    )
    assert listed["touch"] == ToolAnnotations()  # the server said nothing: MCP's defaults
    add_1, delete_a, delete_b, add_2 = result.steps[0].actions
    assert (delete_a.status, delete_a.observation) == ("ok", "deleted a: first note")
    assert (add_1.status, add_1.observation) == ("ok", "3")
    assert delete_b.status == "skipped"
    assert add_2.status == "skipped" and "it came after delete_note" in add_2.observation


# --- the placeholder detector ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "<the file Grep finds>",
        "<file_path>",
        "<PATH>",
        "<文件路径>",
        "{{grep.output}}",
        "${{user_id}}",
        "[result of grep]",
        "  [file path from the search]  ",
    ],
)
def test_placeholders_are_found(value: str) -> None:
    assert placeholder(value) == value.strip()


@pytest.mark.parametrize(
    "value",
    [
        "<div>",
        "</p>",
        '<a href="x">',
        "<b>{{ name }}</b>",
        "[x]",
        "[1, 2]",
        '["a", "b"]',
        "a < b and c > d",
        "/repo/<the file grep finds>",  # inside a value: only when it names an earlier call
        "Hello {{ name }}, welcome",
        "",
    ],
)
def test_values_are_not_placeholders(value: str) -> None:
    assert placeholder(value) is None


def test_a_placeholder_inside_a_value_counts_when_it_names_an_earlier_call() -> None:
    assert placeholder("/repo/<the file Grep finds>", ["grep"]) == "<the file Grep finds>"
    assert placeholder("cat {{search.result}}", ["search"]) == "{{search.result}}"
    assert placeholder("/repo/<the file grep finds>", ["read"]) is None
    assert placeholder("<b>grep</b> output", ["grep"]) is None  # a tag is no placeholder
