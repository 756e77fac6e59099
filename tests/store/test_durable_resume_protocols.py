"""A run resumed under another model and protocol than it began with.

The run calls ``act(1)``, ``act(2)``, ``act(3)`` and answers. Its first process, on model A
under protocol P, gets two replies and dies on its third request (the model's transport
raises). Another agent, on model B under protocol Q, resumes it: the two committed replies
are read again by P (no request for them), their calls are not run again, and B is asked
under Q with the history rendered for Q (call ids made fit for it, as for any history).
Each pair of protocols, both ways, on both backends of the run store.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support import postgres

from react_engine import Agent
from react_engine.store import open_store
from react_engine.testing import ScriptedModel, tool_call_reply
from react_engine.tools import tool
from react_engine.types import ModelResponse

pg_uri, target = postgres.pg_uri, postgres.target  # the fixtures: a SQLite file, a database

PROTOCOLS = ("function_calling", "text", "structured")
PAIRS = [(p, q) for p in PROTOCOLS for q in PROTOCOLS if p != q]


class Died(Exception):
    """The first process's end, on its third request."""


def call(protocol: str, n: int) -> ModelResponse | str:
    """A reply calling ``act(n)``, written as ``protocol`` asks."""
    if protocol == "function_calling":
        return tool_call_reply(("act", {"n": n}))
    if protocol == "text":
        return f'Thought: step {n}\nAction: act\nAction Input: {{"n": {n}}}'
    return json.dumps({"thought": f"step {n}", "action": {"tool": "act", "arguments": {"n": n}}})


def answer(protocol: str, text: str) -> str:
    if protocol == "function_calling":
        return text
    if protocol == "text":
        return f"Thought: done\nFinal Answer: {text}"
    return json.dumps({"thought": "done", "action": {"final_answer": text}})


def rendered(payload: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in payload["messages"])


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_run_resumed_under_another_model_and_protocol(
    target: str, first: str, second: str
) -> None:
    ran: list[int] = []

    @tool
    def act(n: int) -> str:
        """Do step n."""
        ran.append(n)
        return f"done {n}"

    store = open_store(target)
    model_a = ScriptedModel([call(first, 1), call(first, 2), Died("the process died")])
    agent_a = Agent("model-a", [act], client=model_a, protocol=first, store=store)
    with pytest.raises(Died):
        agent_a.run("do the three steps", run_id="r")
    assert ran == [1, 2] and len(model_a.requests) == 3

    model_b = ScriptedModel([call(second, 3), answer(second, "all three done")])
    agent_b = Agent("model-b", [act], client=model_b, protocol=second, store=open_store(target))
    result = agent_b.resume("r")

    assert result.answer == "all three done" and result.stop_reason == "final_answer"
    assert ran == [1, 2, 3]  # no call ran twice
    assert len(model_a.requests) == 3 and len(model_b.requests) == 2  # none asked again
    assert [s.protocol for s in result.steps] == [first, first, second, second]
    assert [a.observation for a in result.tool_calls] == ["done 1", "done 2", "done 3"]

    sent = model_b.payloads[0]  # the first request of the resumed run, under Q, to B
    assert sent["model"] == "model-b"
    text = rendered(sent)
    assert "do the three steps" in text
    if second == "function_calling":
        assert "tools" in sent  # native tools: the calls as tool_calls, results as tool
        asked = [c for m in sent["messages"] for c in m.get("tool_calls") or ()]
        answered = [m for m in sent["messages"] if m["role"] == "tool"]
        assert [json.loads(c["function"]["arguments"]) for c in asked] == [{"n": 1}, {"n": 2}]
        assert [m["content"] for m in answered] == ["done 1", "done 2"]
        assert [m["tool_call_id"] for m in answered] == [c["id"] for c in asked]
        assert len({c["id"] for c in asked}) == 2
    else:
        assert "tools" not in sent  # the calls and results written in the prompt
        assert not any(m["role"] == "tool" or m.get("tool_calls") for m in sent["messages"])
        for n in (1, 2):
            assert f"done {n}" in text
        assert text.count("act") >= 2

    stored = asyncio.run(store.result("r")) or {}
    assert stored["answer"] == "all three done"


def test_an_auto_agent_resumes_under_the_protocol_the_run_was_on(target: str) -> None:
    @tool
    def act(n: int) -> str:
        """Do step n."""
        return f"done {n}"

    model_a = ScriptedModel([call("text", 1), Died("the process died")])
    first = Agent("m", [act], client=model_a, protocol="text", store=open_store(target))
    with pytest.raises(Died):
        first.run("go", run_id="r")
    model_b = ScriptedModel([answer("text", "ok")])
    again = Agent("m", [act], client=model_b, store=open_store(target))  # protocol="auto"
    result = again.resume("r")
    assert result.answer == "ok"
    assert [s.protocol for s in result.steps] == ["text", "text"]
    assert "tools" not in model_b.payloads[0]
