"""A new protocol is one module plus one registry line; selection and adaptation are tables.

The toy protocol in ``support/toy_protocol.py`` knows nothing of the agent: registered by
name, it runs through the same loop, and the shared policy (tool_choice, forced answers,
call ids) holds for it without a line of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.toy_protocol import ToyProtocol

from react_engine import Agent, Capabilities, ConfigurationError, ScriptedModel
from react_engine.cli.commands import build_parser
from react_engine.protocols import FunctionCallingProtocol, TextReActProtocol
from react_engine.protocols import registry as selection
from react_engine.protocols.registry import ProtocolOptions, adapt, choose, protocol_names, register
from react_engine.testing.tools import get_weather


@pytest.fixture
def toy() -> Iterator[None]:
    saved = dict(selection.PROTOCOLS)
    register(ToyProtocol)  # the one registry line
    yield
    selection.PROTOCOLS.clear()
    selection.PROTOCOLS.update(saved)


def toy_agent(script: list[str], **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    return Agent("any-model", [get_weather], protocol="toy", client=model, **options), model


def test_a_registered_protocol_runs_through_the_one_loop(toy: None) -> None:
    agent, model = toy_agent(
        ['CALL get_weather {"location": "Paris"}', "ANSWER Paris is overcast, 14°C."]
    )
    result = agent.run("Weather in Paris?")
    assert result.protocol == "toy" and result.protocol_reason == "explicit"
    assert result.answer == "Paris is overcast, 14°C."
    [call] = result.tool_calls
    assert call.tool == "get_weather" and call.status == "ok"
    assert call.id.startswith("call_")  # the policy gave the toy's id-less call an id
    assert "14" in call.observation
    # the observation went back in the toy's own format
    assert model.payloads[1]["messages"][-1]["content"].startswith("RESULT get_weather: ")


def test_the_policy_holds_for_a_new_protocol(toy: None) -> None:
    agent, _ = toy_agent(
        ['CALL get_weather {"location": "Paris"}', "ANSWER I cannot check the weather."],
        tool_choice="none",
    )
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert result.tool_calls == []
    assert "no tool may be used" in (result.steps[0].feedback or "")
    assert "tool_choice_enforced" in [n.message for n in result.steps[0].notices]

    agent, _ = toy_agent(
        ["ANSWER from memory", 'CALL get_weather {"location": "Paris"}', "ANSWER sunny"],
        tool_choice="required",
    )
    result = agent.run("Weather in Paris?")
    assert [s.kind for s in result.steps] == ["format_error", "action", "final"]
    assert "a tool must be used before the final answer" in (result.steps[0].feedback or "")


def test_a_format_error_counts_against_the_error_budget(toy: None) -> None:
    agent, _ = toy_agent(["hello", "hello", "ANSWER ok"], max_consecutive_errors=3)
    result = agent.run("q")
    assert [s.kind for s in result.steps] == ["format_error", "format_error", "final"]


def test_the_registry_lists_names_for_the_agent_and_the_cli(toy: None) -> None:
    assert protocol_names()[:1] == ("auto",)
    assert {"function_calling", "text", "structured", "toy"} <= set(protocol_names())
    args = build_parser().parse_args(["run", "--protocol", "toy", "q"])
    assert args.protocol == "toy"


def test_an_unknown_name_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown protocol 'nope'"):
        Agent("m", protocol="nope", client=ScriptedModel())
    with pytest.raises(ConfigurationError):
        register(ToyProtocol, name="auto")


def test_auto_chooses_by_capability() -> None:
    fc, why = choose("auto", ProtocolOptions(Capabilities(function_calling=True)), "registry: x")
    assert isinstance(fc, FunctionCallingProtocol) and why == "registry: x"
    text, _ = choose("auto", ProtocolOptions(Capabilities(function_calling=False)), "r")
    assert isinstance(text, TextReActProtocol)
    zh, _ = choose("text", ProtocolOptions(Capabilities(), template="zh"), "r")
    assert isinstance(zh, TextReActProtocol) and zh.template.name == "zh"


def test_the_reaction_table() -> None:
    opts = ProtocolOptions(Capabilities(function_calling=True, stop=True))
    fc = FunctionCallingProtocol()
    switched = adapt("tools", current=fc, spec="auto", options=opts, model="m", url="u")
    assert switched is not None and isinstance(switched.protocol, TextReActProtocol)
    assert switched.learned == {"function_calling": False}
    assert switched.protocol_reason == "fallback: the server rejected tools"
    assert "m at u rejected tools" in switched.event
    # a protocol the user chose is kept: the rejection is the user's to see
    assert (
        adapt("tools", current=fc, spec="function_calling", options=opts, model="m", url="u")
        is None
    )
    dropped = adapt("stop", current=fc, spec="auto", options=opts, model="m", url="u")
    assert dropped is not None and dropped.protocol is None
    assert dropped.capabilities.stop is False and dropped.learned == {"stop": False}
    # a capability already off: nothing left to drop, the error stands
    off = ProtocolOptions(Capabilities(stop=False))
    assert adapt("stop", current=fc, spec="auto", options=off, model="m", url="u") is None
    assert set(selection.REACTIONS) == {
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "constrained_decoding",
        "temperature",
        "reasoning_content",
        "reasoning_content_missing",
        "stream_tools",
    }
    # a required field is turned on, not off
    wanted = adapt(
        "reasoning_content_missing", current=fc, spec="auto", options=opts, model="m", url="u"
    )
    assert wanted is not None and wanted.learned == {"reasoning_echo": True}
    assert wanted.capabilities.reasoning_echo is True and wanted.protocol is None
    on = ProtocolOptions(Capabilities(reasoning_echo=True))
    assert (
        adapt("reasoning_content_missing", current=fc, spec="auto", options=on, model="m", url="u")
        is None
    )


def test_a_registration_holds_the_class_or_its_path(toy: None) -> None:
    """``register`` takes the class (named by its ``name``) or ``"module:Class"``, imported
    when a run first builds it; a wrong one is a configuration error, never a crash."""
    entry = register("support.toy_protocol:ToyProtocol", name="toy_by_path")
    assert entry.cls is ToyProtocol
    agent = Agent("m", protocol="toy_by_path", client=ScriptedModel(["ANSWER by path"]))
    assert agent.run("q").answer == "by path"
    with pytest.raises(ConfigurationError, match="not a path like"):
        register("support.toy_protocol", name="nope")
    with pytest.raises(ConfigurationError, match="not a Protocol class"):
        register(ScriptedModel, name="nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a name"):
        register("support.toy_protocol:ToyProtocol")
    register("no_such_module_here:X", name="missing")
    with pytest.raises(ConfigurationError, match="cannot import no_such_module_here"):
        Agent("m", protocol="missing", client=ScriptedModel()).run("q")
    named_wrong = register("support.toy_protocol:get_weather", name="wrong")
    with pytest.raises(ConfigurationError, match="names no Protocol class"):
        assert named_wrong.cls is None
