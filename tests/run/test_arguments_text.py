"""A call's arguments go back to the model as it wrote them, and are encoded at most once.

Arguments arrive as JSON text and are decoded once to run the tool. When that text was a
valid JSON object as written, every later request sends the very same text back (no
re-encoding, which would change spacing, escapes and number spellings); arguments that
needed a repair are encoded once per run, since a step's messages are rendered once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from react_engine import Agent, tool
from react_engine.testing import ScriptedModel, reply, tool_call_reply
from react_engine.types import AssistantMessage

WRITTEN = [
    '{"city":"Paris"}',
    '{ "city" : "Oslo" ,"days": 2 }',
    '{"city": "Z\\u00fcrich"}',
    '{"city": "Rome", "days": 1.50}',
    '{"days": 1e1, "city": "Lima"}',
]
"""Five valid JSON objects as a model may write them: none is what ``json.dumps`` writes."""


@tool
def forecast(city: str, days: float = 1) -> str:
    """The weather."""
    return f"sunny in {city}"


def _script(arguments: list[str]) -> ScriptedModel:
    steps: list[Any] = [
        tool_call_reply(("forecast", a, f"call_{i}")) for i, a in enumerate(arguments)
    ]
    return ScriptedModel([*steps, reply("done")])


def _sent_back(model: ScriptedModel) -> list[list[str]]:
    """For each request, the arguments of the past calls it carries, in order."""
    return [
        [
            c.arguments
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls
        ]
        for request in model.requests
    ]


def _payload_arguments(payload: dict[str, Any]) -> list[str]:
    return [
        c["function"]["arguments"] for m in payload["messages"] for c in m.get("tool_calls") or ()
    ]


def test_the_models_own_text_goes_back_byte_for_byte_over_five_steps() -> None:
    assert all(json.dumps(json.loads(a), ensure_ascii=False) != a for a in WRITTEN)
    model = _script(WRITTEN)
    result = Agent("m", client=model, tools=[forecast], protocol="function_calling").run("weather?")
    assert result.answer == "done"
    assert [a.status for a in result.tool_calls] == ["ok"] * 5
    assert _sent_back(model) == [WRITTEN[:k] for k in range(6)]
    assert [_payload_arguments(p) for p in model.payloads] == [WRITTEN[:k] for k in range(6)]
    assert all(a.exact for a in result.tool_calls)


def _counting_dumps(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every value ``json.dumps`` encodes as wire JSON (not the loop detection's sorted,
    canonical key), recorded."""
    encoded: list[Any] = []
    real = json.dumps

    def dumps(value: Any, *args: Any, **kwargs: Any) -> str:
        if not kwargs.get("sort_keys"):
            encoded.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", dumps)
    return encoded


def test_exact_arguments_are_never_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _script(WRITTEN)
    agent = Agent("m", client=model, tools=[forecast], protocol="function_calling")
    encoded = _counting_dumps(monkeypatch)
    agent.run("weather?")
    assert [v for v in encoded if isinstance(v, dict) and "city" in v] == []


def test_repaired_arguments_are_encoded_once_in_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    written = [*WRITTEN[:2], "{'city': 'Kyoto'}", *WRITTEN[3:]]  # repaired: not sent as written
    model = _script(written)
    agent = Agent("m", client=model, tools=[forecast], protocol="function_calling")
    encoded = _counting_dumps(monkeypatch)
    result = agent.run("weather?")
    assert [a.status for a in result.tool_calls] == ["ok"] * 5
    assert [v for v in encoded if isinstance(v, dict) and "city" in v] == [{"city": "Kyoto"}]
    later = _sent_back(model)[3:]
    assert all(sent[2] == '{"city": "Kyoto"}' for sent in later)
    assert all(sent[:2] + sent[3:] == WRITTEN[:2] + WRITTEN[3 : len(sent)] for sent in later)


def test_a_schema_tool_gets_the_checked_arguments_without_a_model_in_between() -> None:
    from react_engine.tools.base import Tool

    given: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
    }
    echo = Tool.from_schema("echo", schema, lambda arguments: given.append(arguments) or "ok")
    written = '{"b": "x", "a": "5"}'  # "5" for an integer: the schema check's one coercion
    model = ScriptedModel([tool_call_reply(("echo", written)), reply("done")])
    result = Agent("m", client=model, tools=[echo], protocol="function_calling").run("go")
    assert result.tool_calls[0].status == "ok"
    # the dict the schema check made, in the model's order (a pydantic model's dump put
    # its declared fields first): no model built only to be dumped again
    assert given == [{"b": "x", "a": 5}] and list(given[0]) == ["b", "a"]
    assert isinstance(echo.check({"a": 1}), dict)


def test_a_schema_tool_that_changes_its_arguments_leaves_the_record_as_written() -> None:
    from react_engine.tools.base import Tool

    def mutate(arguments: dict[str, Any]) -> str:
        arguments["tags"].append("added")
        arguments["where"]["city"] = "Nowhere"
        arguments.pop("n")
        return "ok"

    schema = {"type": "object", "properties": {"tags": {}, "where": {}, "n": {}}}
    tool_ = Tool.from_schema("mutate", schema, mutate)
    written = '{"tags": ["a"], "where": {"city": "Paris"}, "n": 1}'
    model = ScriptedModel([tool_call_reply(("mutate", written)), reply("done")])
    result = Agent("m", client=model, tools=[tool_], protocol="function_calling").run("go")
    (call,) = result.tool_calls
    assert call.status == "ok"
    assert call.arguments == json.loads(written)  # what the model wrote, not what the tool did
