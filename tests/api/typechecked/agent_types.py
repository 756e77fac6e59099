"""Type-checked, never run: ``tests/api/test_typing.py`` runs ``mypy --strict`` on this file.

Each ``assert_type`` must hold, and each line marked ``# E: <code>`` must be a mypy error
of that code (and no other line may be one): the agent is generic in its output type, and
its options are typed keywords.
"""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from react_engine import Agent, RunResult
from react_engine.run.conversation import Conversation
from react_engine.run.events import RunDone


class Person(BaseModel):
    name: str
    age: int


async def typed_results() -> None:
    agent = Agent("m", output_type=Person, max_steps=3, temperature=0)
    assert_type(agent, Agent[Person])
    result = agent.run("Who?")
    assert_type(result, RunResult[Person])
    assert_type(result.output, Person | None)
    if result.output is not None:
        assert_type(result.output.age, int)
    assert_type(await agent.arun("Who?"), RunResult[Person])
    assert_type(agent.resume("run-1"), RunResult[Person])
    assert_type(await agent.aresume("run-1", approvals={"c1": True}), RunResult[Person])
    conversation = agent.conversation()
    assert_type(conversation, Conversation[Person])
    assert_type(conversation.ask("And her age?"), RunResult[Person])
    assert_type(await conversation.aask("And his?"), RunResult[Person])
    # The output type is the agent's: a run cannot retype its result (build an agent with
    # that output_type instead), so a type checker refuses a run's own output_type.
    agent.run("How many?", output_type=int)  # E: call-arg
    conversation.ask("Which?", output_type=list[int])  # E: call-arg


def text_results() -> None:
    agent = Agent("m", deadline=5.0)
    assert_type(agent, Agent[str])
    assert_type(agent.run("Hi").output, str | None)
    assert_type(Agent("m", output_type=str), Agent[str])
    # An output type that is no class is taken, as Any.
    assert_type(Agent("m", output_type=int | None), Agent[Any])


def bare_annotations(agent: Agent, result: RunResult) -> None:
    # A bare annotation means Any, as before the agent was generic: users' code still checks.
    assert_type(agent, Agent[Any])
    assert_type(result.output, Any | None)
    typed: Agent = Agent("m", output_type=Person)
    assert_type(typed.run("q"), RunResult[Any])


def misspelt_options() -> None:
    Agent("m", max_stesp=3)  # E: call-overload
    Agent("m").run("q", deadlin=3)  # E: call-arg
    Agent("m", max_steps="3")  # E: call-overload
    Agent("m", multi_action=True)  # E: call-overload
    wrong: RunResult[Person] = Agent("m").run("q")  # E: assignment
    del wrong


async def streamed_results() -> None:
    agent = Agent("m", output_type=Person)
    async for event in agent.iter("Who?"):
        if isinstance(event, RunDone):
            assert_type(event.result, RunResult[Person])
    for event in agent.run_stream("Who?"):
        if event.kind == "done":
            assert_type(event.result.output, Person | None)
    typed = Agent("m", output_type=int)
    for other in typed.run_stream("How old?"):
        if isinstance(other, RunDone):
            assert_type(other.result, RunResult[int])


def options_from_a_dict(options: dict[str, Any]) -> None:
    # Code that spreads a dict of options type-checks as before (the dict may hold an
    # output_type, so the result is a RunResult[Any]).
    assert_type(Agent("m", **options).run("q", **options), RunResult[Any])
