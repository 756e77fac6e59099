"""docs/extending.md, "A run-store backend": its code runs as written, and the backend it
registers keeps a run that waits for an approval and is resumed by another agent."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent
from react_engine.store import open_store
from react_engine.testing import ScriptedModel, tool_call_reply
from react_engine.tools import tool
from react_engine.types import ModelRequest

DOC = Path(__file__).parents[2] / "docs" / "extending.md"


def section_code(title: str) -> str:
    """The first python block of the section ``## title`` of docs/extending.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no python block in section {title!r}"
    return found.group(1)


@pytest.fixture
def example() -> dict[str, Any]:
    """The doc's backend, defined and registered under ``memory://``."""
    namespace: dict[str, Any] = {"__name__": "extending_example"}
    exec(compile(section_code("A run-store backend"), str(DOC), "exec"), namespace)
    return namespace


def by_turn(*script: Any) -> Callable[[ModelRequest], Any]:
    def reply(request: ModelRequest) -> Any:
        return script[sum(1 for m in request.messages if m.role == "assistant")]

    return reply


def test_the_docs_store_backend_keeps_and_resumes_a_run(example: dict[str, Any]) -> None:
    sent: list[str] = []

    @tool(requires_approval=True)
    def send_email(to: str) -> str:
        """Send the report."""
        sent.append(to)
        return f"sent to {to}"

    script = by_turn(tool_call_reply(("send_email", {"to": "team"}, "call_1")), "mailed")
    first = Agent(
        "m", [send_email], client=ScriptedModel(script), store="memory://doc", approve="defer"
    )
    waiting = first.run("Mail the report to the team")
    assert waiting.stop_reason == "awaiting_approval" and sent == []
    store = open_store("memory://doc")
    assert isinstance(store, example["MemoryRunStore"]) and store is first.store
    run_id = waiting.run_id or ""
    assert asyncio.run(store.info(run_id)).status == "awaiting_approval"

    second = Agent(
        "m", [send_email], client=ScriptedModel(script), store=open_store("memory://doc")
    )
    done = second.resume(run_id, approvals={"call_1": True})
    assert (done.answer, sent) == ("mailed", ["team"])
    kinds = [e.kind for e in asyncio.run(store.entries(run_id))]
    assert kinds.count("started") == kinds.count("done") == 1 and "approval" in kinds
    assert asyncio.run(store.info(run_id)).status == "final_answer"
    assert asyncio.run(store.question(run_id)) == "Mail the report to the team"
