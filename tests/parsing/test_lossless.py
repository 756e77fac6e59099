"""The core rule: a call runs with exactly the arguments the model wrote, after
lossless repairs only, or it does not run and the model is told why.

* every repair code any reader reports is classified, in one table
  (:mod:`react_engine.parsing.repairs`), and ``docs/reliability.md`` shows that table;
* full-width ``：`` ``，`` and curly quotes decode to exactly what was meant, and a
  reading that is ambiguous is refused;
* the red team: 36 broken-argument shapes under every protocol, plus 5 that only
  the structured protocol reads, run no tool (0 of 41; on main at 9bfd26e, 33 of 41
  ran: ``RED_TEAM_ON_MAIN``), over HTTP through the public :class:`Agent`;
* the trace shows which repairs were lossy, and a lossy repair still reads an answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.repair_table import JSON_REPAIR_CODES, PARSE_REPAIR_CODES, markdown_table

from react_engine import Agent, RunResult, Tool
from react_engine.parsing import repair_json
from react_engine.parsing.repairs import REPAIRS, is_lossy, lossy_repairs
from react_engine.parsing.salvage import FORMATS
from react_engine.testing import ScriptedServer, completion, tool_calls_completion
from react_engine.transport.capabilities import CapabilityRegistry
from react_engine.transport.learned import CapabilityCache

PROTOCOLS = ["function_calling", "text", "structured"]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"

# --- the table ----------------------------------------------------------------------------------

PROTOCOL_CODES = {
    # shared.decode_arguments
    "empty_arguments",
    "double_encoded_arguments",
    # structured
    "action_blob",
    "flat_step",
    "missing_arguments",
    "arguments_key",
    "arguments_as_string",
    "null_arguments",
    "cut_by_length",
}
POLICY_CODES = {
    # policy._text_inputs (parsing/arguments.py)
    "bare_input_to_parameter",
    "key_value_arguments",
    # policy: final answers only
    "answer_labels",
    "unlabeled_answer",
}


def test_every_code_is_classified_once() -> None:
    known = (
        set(JSON_REPAIR_CODES)
        | {c for c in PARSE_REPAIR_CODES if not c.startswith("json:")}
        | {f"salvaged:{name}" for name in FORMATS}  # register_format adds each row
        | {"salvaged:react_text", "loose_arguments"}
        | PROTOCOL_CODES
        | POLICY_CODES
    )
    assert known == set(REPAIRS), "a code without a class, or a class for no code"
    assert {c.removeprefix("json:") for c in PARSE_REPAIR_CODES} <= set(REPAIRS)


@pytest.mark.parametrize(
    ("code", "lossy"),
    [
        ("json:smart_quotes", False),
        ("json:fullwidth_delimiter", False),
        ("json:missing_closing_bracket", False),
        ("code_fence", False),
        ("fullwidth_colon", False),
        ("json:unescaped_quote", True),
        ("json:missing_comma", True),
        ("json:unquoted_value", True),
        ("json:missing_quote", True),
        ("loose_arguments", True),
        ("a_code_nobody_wrote", True),  # unknown: lossy, the safe side
    ],
)
def test_the_classes_the_issue_names(code: str, lossy: bool) -> None:
    assert is_lossy(code) is lossy


def test_docs_show_the_table(update_goldens: bool) -> None:
    """``docs/reliability.md`` holds :func:`markdown_table` between its two markers;
    ``--update-goldens`` rewrites it there."""
    start, end = "<!-- repairs:start -->\n", "\n<!-- repairs:end -->"
    text = DOCS.read_text("utf-8")
    assert start in text and end in text, "the markers of the repair table"
    head, rest = text.split(start, 1)
    shown, tail = rest.split(end, 1)
    if update_goldens and shown != markdown_table():
        DOCS.write_text(head + start + markdown_table() + end + tail, "utf-8")
        return
    assert shown == markdown_table()


# --- running agents over HTTP -------------------------------------------------------------------


class Files:
    """Tools that record every call they really receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        def delete_path(path: str) -> str:
            """Delete a file (one parameter: plain text is taken as the path).

            Args:
                path: what to delete.
            """
            self.calls.append(("delete_path", {"path": path}))
            return f"deleted {path}"

        def delete_tree(path: str, recursive: bool = False) -> str:
            """Delete a directory.

            Args:
                path: what to delete.
                recursive: delete everything in it.
            """
            self.calls.append(("delete_tree", {"path": path, "recursive": recursive}))
            return f"deleted {path}"

        def request_leave(userId: str, days: str) -> str:
            """Ask for days off.

            Args:
                userId: who asks.
                days: how many days.
            """
            self.calls.append(("request_leave", {"userId": userId, "days": days}))
            return "requested"

        self.tools = [Tool.from_function(f) for f in (delete_path, delete_tree, request_leave)]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


FINAL = {
    "function_calling": "done",
    "text": "Thought: done\nFinal Answer: done",
    "structured": '{"thought": "done", "action": {"final_answer": "done"}}',
}


def run(server: ScriptedServer, protocol: str, first: dict[str, Any]) -> tuple[RunResult, Files]:
    """One run whose first reply is ``first`` and whose next ones answer."""
    files = Files()
    assert server.remaining == 0, "the previous run used its whole script"
    server.default = completion(FINAL[protocol])
    server.push(first)
    agent = Agent(
        "mock-model",
        files.tools,
        protocol=protocol,
        base_url=server.base_url,
        api_key="sk-test",
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        max_consecutive_errors=3,
    )
    return agent.run("clean up"), files


def call_reply(protocol: str, tool: str, arguments: str, *, cut: bool = False) -> dict[str, Any]:
    """A reply calling ``tool`` with ``arguments`` written as they are, in the protocol's own
    format; ``cut``: the reply ends where the arguments do (with ``finish_reason="stop"``)."""
    if protocol == "function_calling":
        return tool_calls_completion((tool, arguments))
    if protocol == "text":
        return completion(f"Thought: I will use {tool}.\nAction: {tool}\nAction Input: {arguments}")
    wrapper = f'{{"thought": "I will use {tool}.", "action": {{"tool": "{tool}", "arguments": '
    return completion(wrapper + arguments + ("" if cut else "}}"))


# --- full-width punctuation ----------------------------------------------------------------------

LEAVE = {"userId": "user_2", "days": "10"}


@pytest.mark.parametrize(
    "written",
    [
        "{“userId”：“user_2”，“days”：“10”}",
        '{"userId"："user_2"，"days"："10"}',
        '{"userId"：“user_2”，"days"："10"}',
        "{“userId”: “user_2”, “days”: “10”}",
    ],
)
def test_fullwidth_punctuation_decodes_exactly(written: str) -> None:
    result = repair_json(written)
    assert result.value == LEAVE
    assert not lossy_repairs(result.repairs)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "written", ["{“userId”：“user_2”，“days”：“10”}", '{"userId"："user_2"，"days"："10"}']
)
def test_fullwidth_punctuation_runs_with_exactly_what_was_meant(
    server: ScriptedServer, protocol: str, written: str
) -> None:
    result, files = run(server, protocol, call_reply(protocol, "request_leave", written))
    assert files.calls == [("request_leave", LEAVE)]
    action = result.steps[0].actions[0]
    assert action.status == "ok" and action.lossy == []
    assert "json:fullwidth_delimiter" in action.repairs


@pytest.mark.parametrize(
    "written",
    [
        '{"path"："/srv/x"，"/etc"}',  # a key with no value, or "，" inside the string?
        '{"text": "他说"你好"，然后走了"}',  # quotes inside Chinese text
    ],
)
def test_ambiguous_fullwidth_reading_is_refused(written: str) -> None:
    try:
        result = repair_json(written)
    except ValueError:
        return  # not read at all: refused
    assert lossy_repairs(result.repairs), result


# --- the red team ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    name: str
    arguments: str
    cut: bool = False
    """The reply ends where the arguments do."""

    @property
    def tool(self) -> str:
        return "delete_tree" if "recur" in self.arguments else "delete_path"


SHAPES = [
    # tokens merged
    Shape("merged_strings", '{"path": "/srv/x" "/etc"}'),
    Shape("merged_plus", '{"path": "/srv/x" + "/etc"}'),
    Shape("split_string", '{"path": "/srv/" "x"}'),
    Shape("missing_comma_pair", '{"path": "/srv/x" "recursive": true}'),
    Shape("missing_comma_literal", '{"recursive": true "path": "/srv/x"}'),
    Shape("missing_colon", '{"path" "/srv/x"}'),
    Shape("equals_for_colon", '{"path" = "/srv/x"}'),
    Shape("quoted_then_bare", '{"path": "/srv/x" /etc}'),
    # quotes that may or may not end a string
    Shape("inner_quotes", '{"path": "/srv/"x""}'),
    Shape("inner_quote_mid", '{"path": "/srv/"x"/y"}'),
    Shape("doubled_closing_quote", '{"path": "/srv/x""}'),
    Shape("single_inner_quote", "{\"path\": '/srv/x'/etc'}"),
    Shape("curly_inner_quote", '{"path": “/srv/x”/etc”}'),
    Shape("fullwidth_ambiguous", '{"path"："/srv/x"，"/etc"}'),
    # unquoted text
    Shape("bare_path", '{"path": /srv/x}'),
    Shape("bare_command", '{"path": rm -rf /}'),
    Shape("bare_key_and_value", "{path: /srv/x}"),
    Shape("bare_two_words", '{"path": /srv/x /etc}'),
    Shape("bare_word_flag", '{"path": "/srv/x", "recursive": yes}'),
    Shape("bare_word_in_array", '{"path": ["/srv/x", /etc]}'),
    # cut off (finish_reason "stop")
    Shape("cut_in_string", '{"path": "/srv/important/sub', cut=True),
    Shape("cut_after_comma", '{"path": "/srv/x",', cut=True),
    Shape("cut_in_escape", '{"path": "/srv/x\\', cut=True),
    Shape("cut_in_literal", '{"path": "/srv/x", "recursive": tru', cut=True),
    Shape("cut_in_key", '{"path": "/srv/x", "recur', cut=True),
    Shape("cut_string_alone", '"/srv/important/sub', cut=True),
    # escapes JSON does not know
    Shape("ambiguous_escape", '{"path": "C:\\new\\Users"}'),
    Shape("unknown_escape", '{"path": "/srv/\\x"}'),
    # brackets
    Shape("wrong_closer", '{"path": "/srv/x"]'),
    Shape("wrong_closer_nested", '{"path": ["/a", "/b"}'),
    Shape("stray_closer", '{"path": "/srv/x"}/etc"}'),
    Shape("stray_closer_inside", '{"path": "/srv/x"], "recursive": true}'),
    Shape("comment_eats_closers", '{"path": "/srv/x" // "/etc"}'),
    # more than one value
    Shape("second_value", '{"path": "/srv/x"} "/etc"'),
    Shape("two_objects", '{"path": "/srv/x"}, {"path": "/etc"}'),
    Shape("double_comma", '{"path": "/srv/x",, "recursive": true}'),
]

STRUCTURED_ONLY = {
    # the two first found: a reply cut mid-string with finish_reason "stop", and rm -rf /
    "flat_step_cut": '{"tool": "delete_path", "arguments": {"path": "/srv/important/sub',
    "unquoted_arguments": (
        '{"thought": "clean up", "action": {"tool": "delete_path", "arguments": rm -rf /}}'
    ),
    "blob_cut": '{"action": "delete_path", "action_input": "/srv/important/sub',
    "blob_unquoted": '{"action": "delete_path", "action_input": rm -rf /}',
    "arguments_string_cut": (
        '{"thought": "x", "action": {"tool": "delete_path", "arguments": '
        '"{\\"path\\": \\"/srv/important/sub'
    ),
}

RED_TEAM_ON_MAIN = 33
"""How many of the 41 shapes ran a tool (under at least one protocol) on main at 9bfd26e,
measured with this file: 29 of the 36 (19 under function calling, 22 under text, 26
under structured) and 4 of the 5 structured-only ones. Now: 0."""


def test_the_red_team_has_41_shapes() -> None:
    assert len(SHAPES) == 36 and len({s.name for s in SHAPES}) == 36
    assert len(STRUCTURED_ONLY) == 5
    for shape in SHAPES:  # each is broken, or it would not be a red-team shape
        with pytest.raises(ValueError):
            json.loads(shape.arguments)


def _refused(result: RunResult, files: Files) -> None:
    assert files.calls == [], "a tool ran on arguments the model never wrote"
    first = result.steps[0]
    # refused as a call (an error observation that says why) or as a reply (format error)
    if first.kind == "action":
        (action,) = first.actions
        assert action.status == "invalid_arguments", action
        assert action.observation.startswith("Error: ")
        assert set(action.lossy) <= set(action.repairs)
        assert all(c.removeprefix("json:") in REPAIRS for c in action.repairs), action.repairs
    else:
        assert first.kind == "format_error" and first.feedback
    assert result.answer == "done", "the run goes on after the refusal"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_broken_arguments_run_no_tool(server: ScriptedServer, protocol: str, shape: Shape) -> None:
    reply = call_reply(protocol, shape.tool, shape.arguments, cut=shape.cut)
    result, files = run(server, protocol, reply)
    _refused(result, files)


@pytest.mark.parametrize("text", STRUCTURED_ONLY.values(), ids=list(STRUCTURED_ONLY))
def test_broken_structured_replies_run_no_tool(server: ScriptedServer, text: str) -> None:
    result, files = run(server, "structured", completion(text))
    _refused(result, files)


def test_a_refusal_says_what_was_guessed(server: ScriptedServer) -> None:
    reply = call_reply("function_calling", "delete_path", '{"path": "/srv/x" "/etc"}')
    result, files = run(server, "function_calling", reply)
    action = result.steps[0].actions[0]
    assert files.calls == []
    assert action.lossy == ["json:unescaped_quote"]
    assert "could not be read exactly as written" in action.observation
    assert "may or may not end it" in action.observation
    # the trace keeps both lists
    record = json.loads(result.to_jsonl().splitlines()[1])
    assert record["actions"][0]["lossy"] == ["json:unescaped_quote"]
    assert "json:unescaped_quote" in record["actions"][0]["repairs"]


# --- what is still read ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "written",
    [
        "{'path': '/srv/x', 'recursive': True,}",  # quote style, Python literal, comma
        '{path: "/srv/x"}',  # a key without quotes
        '{"path": "/srv/x"}}',  # a closing brace too many at the end
    ],
)
def test_lossless_repairs_still_run(server: ScriptedServer, protocol: str, written: str) -> None:
    result, files = run(server, protocol, call_reply(protocol, "delete_tree", written))
    assert [args["path"] for _, args in files.calls] == ["/srv/x"]
    action = result.steps[0].actions[0]
    assert action.status == "ok" and action.lossy == [] and action.repairs


def test_a_lossy_repair_still_reads_a_final_answer(server: ScriptedServer) -> None:
    cut = '{"thought": "done", "action": {"final_answer": "Paris is sunny"'
    result, files = run(server, "structured", completion(cut))
    assert result.answer == "Paris is sunny"
    assert files.calls == []


def test_readme_says_what_is_never_guessed() -> None:
    readme = (DOCS.parent.parent / "README.md").read_text("utf-8")
    assert re.search(r"never guess", readme, re.I)


def test_an_otel_trace_names_the_lossy_repairs() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from react_engine import ScriptedModel, tool_call_reply
    from react_engine.testing import reply

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    files = Files()
    model = ScriptedModel(
        [tool_call_reply(("delete_path", '{"path": "/srv/x" "/etc"}')), reply("done")]
    )
    Agent("m", files.tools, client=model, tracer_provider=provider).run("clean up")
    (run,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    assert files.calls == []
    assert tuple((run.attributes or {})["react_engine.lossy_repairs"]) == ("json:unescaped_quote",)  # type: ignore[arg-type]
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
