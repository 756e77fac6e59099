"""Dangerous tools: approvals (sync, async, failing, ambiguous) and the per-run budgets.

Complements the basic approval, tool-budget and token-budget tests in ``test_agent.py``:
here the approver is async or broken, answers something other than ``True``, and the
budgets are checked under both protocols, before any dangerous call runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from react_engine import (
    ActionRecord,
    Agent,
    ScriptedModel,
    Tool,
    reply,
    tool_call_reply,
)
from react_engine.types import Usage

PROTOCOLS = ["function_calling", "text"]


class Wipe:
    """A dangerous tool that records what it really deleted."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

        def wipe(path: str) -> str:
            """Delete a path.

            Args:
                path: what to delete.
            """
            self.deleted.append(path)
            return f"deleted {path}"

        self.tool = Tool.from_function(wipe, requires_approval=True)


def call(protocol: str, *paths: str, usage: Usage | None = None) -> Any:
    if protocol == "function_calling":
        return tool_call_reply(*[("wipe", {"path": p}) for p in paths], usage=usage)
    text = "\n".join(
        f'Thought: clean up.\nAction: wipe\nAction Input: {{"path": "{p}"}}' for p in paths
    )
    return reply(text, usage=usage)


def final(protocol: str, answer: str) -> Any:
    return reply(answer if protocol == "function_calling" else f"Final Answer: {answer}")


def make(protocol: str, script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel, Wipe]:
    wipe = Wipe()
    model = ScriptedModel(script)
    agent = Agent("gpt-4o-mini", [wipe.tool], protocol=protocol, client=model, **kwargs)
    return agent, model, wipe


def sent_after_first_step(model: ScriptedModel) -> str:
    """Everything the model was shown after its first step, as one string."""
    return "\n".join(str(m["content"]) for m in model.payloads[1]["messages"][2:])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_approver_decides_each_call(protocol: str) -> None:
    asked: list[tuple[str, Any]] = []

    async def approve(record: ActionRecord) -> bool:
        await asyncio.sleep(0)
        asked.append((record.tool, record.arguments))
        return record.arguments == {"path": "/tmp/scratch"}

    agent, model, wipe = make(
        protocol,
        [call(protocol, "/", "/tmp/scratch"), final(protocol, "ok")],
        approve=approve,
        multi_action="all",  # both calls reach the approver
    )
    result = asyncio.run(agent.arun("clean up"))
    assert wipe.deleted == ["/tmp/scratch"]
    assert sorted(asked, key=str) == [
        ("wipe", {"path": "/"}),
        ("wipe", {"path": "/tmp/scratch"}),
    ]
    denied, allowed = result.steps[0].actions
    assert denied.status == "denied"
    assert denied.observation == "Error: the user did not approve this call"
    assert allowed.status == "ok" and allowed.observation == "deleted /tmp/scratch"
    assert denied.observation in sent_after_first_step(model)  # the model sees the refusal
    assert result.answer == "ok"


class ApproverBroke(RuntimeError):
    pass


def _raising_sync(record: ActionRecord) -> bool:
    raise ApproverBroke("the approval UI crashed")


async def _raising_async(record: ActionRecord) -> bool:
    await asyncio.sleep(0)
    raise ApproverBroke("the approval service is down")


@pytest.mark.parametrize("approver", [_raising_sync, _raising_async], ids=["sync", "async"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_approver_that_raises_denies_the_call_and_the_run_goes_on(
    protocol: str, approver: Any, caplog: pytest.LogCaptureFixture
) -> None:
    agent, model, wipe = make(
        protocol, [call(protocol, "/"), final(protocol, "could not")], approve=approver
    )
    result = agent.run("clean up")
    assert wipe.deleted == []
    action = result.steps[0].actions[0]
    assert action.status == "denied"
    assert "approval check failed (ApproverBroke)" in action.observation
    assert action.observation in sent_after_first_step(model)
    assert result.answer == "could not"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert any("approval callback failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("verdict", ["n", "no", "yes", 1, None, [], object()])
def test_only_true_approves(verdict: Any) -> None:
    """An approver wired to ``input()`` returns the string ``"n"``, which is truthy."""
    agent, _, wipe = make(
        "function_calling",
        [call("function_calling", "/"), final("function_calling", "ok")],
        approve=lambda record: verdict,
    )
    result = agent.run("clean up")
    assert wipe.deleted == []
    assert result.steps[0].actions[0].status == "denied"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_approver_means_no_dangerous_call(protocol: str) -> None:
    agent, _, wipe = make(protocol, [call(protocol, "/"), final(protocol, "ok")])
    result = agent.run("clean up")
    assert wipe.deleted == []
    assert "no approver is configured" in result.steps[0].actions[0].observation


def test_approval_is_not_asked_for_calls_that_cannot_run() -> None:
    asked: list[Any] = []
    agent, _, wipe = make(
        "function_calling",
        [
            tool_call_reply(("wipe", {"path": 7}), ("wipe", {}), ("wipe_all", {"path": "/"})),
            final("function_calling", "ok"),
        ],
        approve=lambda record: asked.append(record) or True,
    )
    result = agent.run("clean up")
    assert asked == []
    assert [a.status for a in result.steps[0].actions] == [
        "invalid_arguments",
        "invalid_arguments",
        "unknown_tool",
    ]
    assert wipe.deleted == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_budget_stops_before_the_dangerous_call_is_even_proposed(protocol: str) -> None:
    asked: list[Any] = []
    agent, _, wipe = make(
        protocol,
        [call(protocol, "/a"), call(protocol, "/b"), call(protocol, "/c"), final(protocol, "ok")],
        approve=lambda record: asked.append(record.arguments) or True,
        max_tool_calls=2,
    )
    result = agent.run("clean up")
    # The budget is spent after /b: the model is asked for its final answer, its call of
    # /c is refused as no answer (never run, never even proposed for approval), and its
    # next reply is the answer.
    assert result.stop_reason == "tool_budget"
    assert result.answer == "ok"
    assert wipe.deleted == ["/a", "/b"]
    assert asked == [{"path": "/a"}, {"path": "/b"}]
    assert [a.status for s in result.steps for a in s.actions] == ["ok", "ok"]
    assert [s.kind for s in result.steps] == ["action", "action", "format_error", "final"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_token_budget_is_a_cost_ceiling_checked_before_each_request(protocol: str) -> None:
    agent, model, wipe = make(
        protocol,
        [
            call(protocol, "/a", usage=Usage(400, 100, 500, 0, 1)),
            call(protocol, "/b", usage=Usage(500, 100, 600, 0, 1)),
            call(protocol, "/c", usage=Usage(500, 100, 600, 0, 1)),
        ],
        approve=lambda record: True,
        max_total_tokens=1000,
    )
    result = agent.run("clean up")
    assert result.stop_reason == "token_budget"
    assert result.usage.total_tokens == 1100
    assert len(model.payloads) == 2  # no third request once the ceiling is passed
    # The step that crossed the ceiling still ran what it had asked for, and it is kept.
    assert wipe.deleted == ["/a", "/b"]
    assert len(result.steps) == 2
