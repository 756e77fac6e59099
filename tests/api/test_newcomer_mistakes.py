"""The mistakes a newcomer makes first, answered in their own terms.

A misspelt option gets the name that was meant, never a dataclass's ``__init__`` error; the
sampling options other agent libraries take (``temperature=``, ``max_tokens=``, ``seed=``,
``top_p=``) are accepted as shorthands for ``settings=ModelSettings(...)``; a run's result
prints as one line; a tool the model would get no description of is warned about where it
is made. Everything goes through the public API.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from react_engine import (
    Agent,
    ConfigurationError,
    ModelSettings,
    ScriptedModel,
    Usage,
    reply,
    tool,
    tool_call_reply,
)
from react_engine.testing.tools import get_weather


def agent(model: ScriptedModel | None = None, name: str = "m", **options: Any) -> Agent:
    return Agent(name, [get_weather], client=model or ScriptedModel([reply("ok")]), **options)


def sent(model: ScriptedModel, field: str) -> list[Any]:
    """A field of every request the model was sent (``None`` where it was left out)."""
    return [payload.get(field) for payload in model.payloads]


# --- unknown options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "meant"),
    [
        ({"max_step": 3}, "max_steps"),
        ({"temprature": 0}, "temperature"),
        ({"tool_timout": 5}, "tool_timeout"),
        ({"instruction": "Be brief."}, "instructions"),  # an Agent keyword, not a config field
    ],
)
def test_a_misspelt_agent_option_gets_did_you_mean(options: dict[str, Any], meant: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        agent(**options)
    message = str(caught.value)
    (typo,) = options
    assert message == f"unknown Agent option {typo!r}: did you mean {meant!r}?"


def test_a_misspelt_run_option_gets_did_you_mean() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^unknown run option 'max_step': did you mean 'max_steps'\?$"
    ):
        agent().run("q", max_step=3)
    with pytest.raises(ConfigurationError, match="unknown run option 'deadlin'"):
        agent().conversation().ask("q", deadlin=3)


def test_a_misspelt_option_is_a_type_error_as_python_says_of_a_keyword() -> None:
    # Python's own word for an unexpected keyword is TypeError; the engine's error is one too,
    # and still a ConfigurationError (the library's tree) for code that catches that.
    with pytest.raises(
        TypeError, match=r"^unknown Agent option 'max_stesp': did you mean 'max_steps'\?$"
    ):
        Agent("m", client=ScriptedModel([reply("ok")]), max_stesp=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="did you mean 'deadline'"):
        agent().run("q", deadlin=3)  # type: ignore[call-overload]


def test_the_typed_options_are_the_config_fields_and_the_sampling_shorthands() -> None:
    # The keywords a type checker accepts (Options) are the ones the engine takes at run
    # time: a field added to AgentConfig and not to Options would be refused by mypy.
    import dataclasses
    import typing

    from react_engine.run.config import SAMPLING_SHORTHANDS, AgentConfig, Options

    fields = {f.name: f.type for f in dataclasses.fields(AgentConfig)}
    typed = typing.get_type_hints(Options)
    assert set(typed) == set(fields) - {"output_type"} | set(SAMPLING_SHORTHANDS)
    assert Options.__total__ is False  # every option may be left out
    config_hints = typing.get_type_hints(AgentConfig)
    for name in set(typed) - set(SAMPLING_SHORTHANDS):
        assert typed[name] == config_hints[name], name


def test_an_agent_option_given_to_a_run_says_where_it_belongs() -> None:
    with pytest.raises(ConfigurationError, match="'protocol' is an option of Agent"):
        agent().run("q", protocol="text")


def test_names_from_other_libraries_get_ours() -> None:
    with pytest.raises(ConfigurationError, match="'max_iterations': use max_steps"):
        agent(max_iterations=3)
    with pytest.raises(ConfigurationError, match="'system_prompt': use instructions"):
        agent(system_prompt="Be brief.")
    with pytest.raises(
        ConfigurationError,
        match=r"use deadline .*, tool_timeout .* or settings=ModelSettings\(timeout=...\)",
    ):
        agent(timeout=30)


def test_an_option_like_nothing_lists_the_options() -> None:
    with pytest.raises(ConfigurationError) as caught:
        agent(colour="blue")
    message = str(caught.value)
    assert message.startswith("unknown Agent option 'colour'; the Agent options are ")
    for name in ("max_steps", "deadline", "temperature", "protocol", "instructions"):
        assert name in message


def test_every_unknown_option_is_named_and_no_internals_leak() -> None:
    with pytest.raises(ConfigurationError) as caught:
        agent(max_step=3, tool_choise="auto")
    message = str(caught.value)
    assert "'max_steps'" in message and "'tool_choice'" in message
    assert "__init__" not in message and "unexpected keyword" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


# --- sampling shorthands ---------------------------------------------------------------------


def test_sampling_shorthands_reach_the_request() -> None:
    model = ScriptedModel([reply("ok")])
    a = agent(model, temperature=0, max_tokens=64, seed=7, top_p=0.9)
    assert a.config.settings == ModelSettings(temperature=0, max_tokens=64, seed=7, top_p=0.9)
    a.run("q")
    assert (sent(model, "temperature"), sent(model, "max_tokens")) == ([0], [64])
    assert (sent(model, "seed"), sent(model, "top_p")) == ([7], [0.9])


def test_shorthands_merge_into_the_settings_given_with_them() -> None:
    a = agent(
        settings=ModelSettings(seed=1, timeout=30, temperature=0.2), temperature=0.2, top_p=0.5
    )
    assert a.config.settings == ModelSettings(seed=1, timeout=30, temperature=0.2, top_p=0.5)


def test_a_run_shorthand_overrides_the_agents_setting_for_that_run_only() -> None:
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    a = agent(model, settings=ModelSettings(temperature=0, seed=3))
    a.run("q", temperature=0.7)
    a.run("q", settings=ModelSettings(max_tokens=10), max_tokens=10)
    a.run("q")
    assert sent(model, "temperature") == [0.7, None, 0]
    assert sent(model, "seed") == [3, None, 3]  # a run's settings= replaces the agent's
    assert sent(model, "max_tokens") == [None, 10, None]


def test_a_shorthand_that_contradicts_settings_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^temperature is given twice, as temperature=0 and in settings=ModelSettings\(temperature=0.5\): give it once$",
    ):
        agent(settings=ModelSettings(temperature=0.5), temperature=0)
    with pytest.raises(ConfigurationError, match="seed is given twice"):
        agent().run("q", settings=ModelSettings(seed=1), seed=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": "0.2"}, "temperature must be a number or None, not '0.2' (str)"),
        ({"temperature": -1}, "temperature must be at least 0, not -1"),
        ({"top_p": 1.5}, "top_p must be between 0 and 1, not 1.5"),
        ({"max_tokens": 0}, "max_tokens must be at least 1, not 0"),
        ({"seed": 1.5}, "seed must be an int or None, not 1.5 (float)"),
    ],
)
def test_bad_sampling_values_fail_when_the_agent_is_built(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        agent(**options)
    assert str(caught.value) == message


def test_bad_values_in_settings_fail_too() -> None:
    with pytest.raises(ConfigurationError, match=r"^top_p must be between 0 and 1, not nan$"):
        agent(settings=ModelSettings(top_p=float("nan")))


def test_a_model_without_sampling_is_sent_no_top_p() -> None:
    model = ScriptedModel([reply("ok")])
    agent(model, name="o3-mini", top_p=0.5, temperature=0).run("q")  # the registry: sampling false
    assert "top_p" not in model.payloads[0] and "temperature" not in model.payloads[0]


def test_top_p_is_on_the_chat_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    agent(top_p=0.25, tracer_provider=provider).run("q")
    (chat,) = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert chat.attributes is not None and chat.attributes["gen_ai.request.top_p"] == 0.25


# --- RunResult's repr ------------------------------------------------------------------------


def test_a_result_prints_as_one_short_line() -> None:
    long_answer = "It is overcast in Paris, 14 degrees, with a light westerly wind. " * 40
    usage = Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120, requests=1)
    model = ScriptedModel(
        [
            tool_call_reply(("get_weather", {"location": "Paris"}), usage=usage),
            reply(long_answer, usage=usage),
        ]
    )
    result = agent(model).run("Weather in Paris?")
    text = repr(result)
    assert str(result) == text and "\n" not in text and len(text) < 250
    assert text == (
        "RunResult(answer='It is overcast in Paris, 14 degrees, with a light westerly…', "
        "stop_reason='final_answer', protocol='function_calling', steps=2, "
        "usage=<240 tokens: 200 prompt, 40 completion, 2 requests>)"
    )
    assert "Observation" not in text and "get_weather" not in text  # no steps dumped


def test_a_failed_runs_repr_says_why() -> None:
    model = ScriptedModel([tool_call_reply(("get_weather", {"location": "Paris"}))] * 3)
    result = agent(model, max_steps=1, max_tool_calls=1).run("Weather in Paris?")
    assert result.answer is None
    assert repr(result).startswith(f"RunResult(answer=None, stop_reason={result.stop_reason!r}")
    assert result.error is not None and "error=" in repr(result)


# --- tools the model gets no description of --------------------------------------------------


def test_tool_on_a_function_without_a_docstring_warns_where_it_is_applied() -> None:
    with pytest.warns(UserWarning) as caught:

        @tool
        def lookup(word: str) -> str:
            return word

    (warning,) = caught
    assert warning.filename == __file__
    message = str(warning.message)
    assert message.startswith("tool 'lookup': the function ")
    assert "lookup has no docstring, so the model gets no description" in message
    assert lookup.description == ""


def test_a_plain_function_without_a_docstring_warns_too() -> None:
    def lookup(word: str) -> str:
        return word

    with pytest.warns(UserWarning, match="tool 'lookup'.*has no docstring") as caught:
        Agent("m", [lookup], client=ScriptedModel())
    assert caught[0].filename == __file__


def test_a_docstring_with_parameters_only_warns() -> None:
    with pytest.warns(UserWarning, match="only documents parameters"):

        @tool
        def lookup(word: str) -> str:
            """Args:
            word: The word.
            """
            return word


def test_a_described_tool_does_not_warn() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @tool
        def lookup(word: str) -> str:
            """Look a word up."""
            return word

        @tool(description="Look a word up.")
        def lookup2(word: str) -> str:
            return word

        Agent("m", [lookup, lookup2, get_weather], client=ScriptedModel())
    assert [str(w.message) for w in caught] == []
