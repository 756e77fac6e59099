"""A tool call has four types along the pipeline, one per stage.

``ToolCall`` on the wire in both directions, ``ToolCallChunk`` a streamed fragment of one,
``PendingCall`` a call read (by a protocol, the text parser, the salvage of written calls
and the reader of JSON call objects alike) and ``ActionRecord`` a call that ran. The test
reads the library's source (no import: optional extras need not be installed) for every
class with a name field and an arguments field, so that a fifth call type fails it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import react_engine
from react_engine.parsing import parse_react
from react_engine.parsing.common import call_objects
from react_engine.parsing.salvage import read_salvaged
from react_engine.types import ActionRecord, PendingCall, ToolCall, ToolCallChunk

PACKAGE = Path(react_engine.__file__).parent
PIPELINE = ("types.py", "transport", "protocols", "parsing", "run", "store", "tools")
"""The library's layers a reply passes through to the next request (the tooling beside
them, compare and eval, has its own records of calls: a task file's, BFCL's answers)."""

NAME_FIELDS = {"name", "tool", "tool_name", "function"}
ARGUMENT_FIELDS = {"arguments", "args", "raw_arguments", "raw_input", "input"}

CALL_TYPES = {
    "types.py:ToolCall",
    "types.py:ToolCallChunk",
    "types.py:PendingCall",
    "types.py:ActionRecord",
}

STEP_READINGS = {
    "parsing/blobs.py:Item": "an action or a final answer at a position of the reply, "
    "while the sections are read (its input may come in a later section); the actions "
    "kept become PendingCall",
    "protocols/structured.py:_Read": "what one decoded step object says: a call, a final "
    "answer or an error; a call becomes PendingCall",
}
"""Readings of one step inside a parser, which may hold an answer instead of a call: not
call types (nothing outside the parser sees them)."""


def _fields(node: ast.ClassDef) -> set[str]:
    names = {
        s.target.id
        for s in node.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
    for s in node.body:  # plain classes: the attributes __init__ sets
        if isinstance(s, ast.FunctionDef) and s.name == "__init__":
            for a in ast.walk(s):
                targets = a.targets if isinstance(a, ast.Assign) else []
                if isinstance(a, ast.AnnAssign):
                    targets = [a.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                        names.add(t.attr)
    return names


def _call_like_classes() -> set[str]:
    found = set()
    for part in PIPELINE:
        root = PACKAGE / part
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                fields = _fields(node)
                if fields & NAME_FIELDS and fields & ARGUMENT_FIELDS:
                    found.add(f"{path.relative_to(PACKAGE).as_posix()}:{node.name}")
    return found


def test_a_tool_call_has_four_types_along_the_pipeline() -> None:
    found = _call_like_classes()
    assert found - set(STEP_READINGS) == CALL_TYPES
    assert found & set(STEP_READINGS) == set(STEP_READINGS)  # the list above stays true


def test_the_scan_sees_a_fifth_call_type() -> None:
    source = "class SomeCall:\n    name: str\n    arguments: str\n"
    (node,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]
    fields = _fields(node)
    assert fields & NAME_FIELDS and fields & ARGUMENT_FIELDS


def test_every_reader_produces_the_one_read_call_type() -> None:
    (parsed,) = parse_react('Action: get_time\nAction Input: {"zone": "UTC"}').actions
    (salvaged,) = read_salvaged(
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>', {"get_time"}
    ).calls
    objects = call_objects({"thought": "t", "action": "get_time", "zone": "UTC"})
    assert objects is not None
    for call in (parsed, salvaged, *objects):
        assert type(call) is PendingCall
    assert (salvaged.format, salvaged.span[0]) == ("hermes", 0)
    assert (objects[0].thought, objects[0].arguments) == ("t", {"zone": "UTC"})
    assert objects[0].repairs == ["flat_arguments"]


def test_the_wire_call_is_one_type_both_ways() -> None:
    reply_call = ToolCall(None, "get_time", "{}")  # a reply's call may lack an id
    assert ToolCallChunk(0, None, "get_time", "{}").index == 0
    assert ActionRecord("c1", "get_time", {}, "{}").exact is False
    assert reply_call.id is None
