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
    assert call.status == "invalid_arguments" and "duplicate_key" in call.lossy
    assert "a key written twice" in call.observation  # told why, so it can write it again


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_key_written_twice_with_one_value_runs(protocol: str) -> None:
    result = _run(protocol, '{"path": "/tmp/a", "path": "/tmp/a"}')
    (call,) = result.tool_calls
    assert call.status == "ok" and deleted == ["/tmp/a"]
    assert "duplicate_key" not in call.repairs
