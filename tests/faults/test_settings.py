"""Bad settings and bad figures from a server.

A wrong sampling setting, agent option, tool name or tool timeout is the caller's mistake,
refused with a typed error (a ``ConfigurationError``, a ``UserError``) when the settings,
the agent or the tool are made, before any request is paid for. A server's token count that is no count
(``1e308``) is read as 0 and named in the step's events, never carried into the totals.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from support.faults import agent_for, sleeper

from react_engine import (
    Agent,
    AgentConfig,
    ConfigurationError,
    ModelSettings,
    ScriptedModel,
    Tool,
    ToolDefinitionError,
    UserError,
    reply,
)
from react_engine.testing import ScriptedServer, completion


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("temperature", "hot", "temperature must be a number or None, not 'hot' (str)"),
        ("temperature", math.nan, "temperature must be at least 0, not nan"),
        ("temperature", math.inf, "temperature must be at least 0, not inf"),
        ("temperature", -0.5, "temperature must be at least 0, not -0.5"),
        ("temperature", True, "temperature must be a number or None, not True (bool)"),
        ("top_p", 1.5, "top_p must be between 0 and 1, not 1.5"),
        ("max_tokens", -3, "max_tokens must be at least 1, not -3"),
        ("max_tokens", 0, "max_tokens must be at least 1, not 0"),
        ("max_tokens", 12.5, "max_tokens must be an int or None, not 12.5 (float)"),
        ("seed", "42", "seed must be an int or None, not '42' (str)"),
        ("timeout", 0, "settings.timeout must be a positive, finite number of seconds"),
        ("timeout", "30", "settings.timeout must be a positive, finite number of seconds"),
        ("extra_body", ["enable_thinking"], "extra_body must be a mapping"),
    ],
)
def test_bad_settings_are_refused_when_made(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ModelSettings(**{field: value})
    assert str(caught.value).startswith(message)


def test_good_settings_are_kept() -> None:
    settings = ModelSettings(temperature=0, seed=-1, max_tokens=1, timeout=0.5, extra_body={})
    assert (settings.temperature, settings.seed, settings.max_tokens) == (0, -1, 1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": 5}, "base_url must be a str"),
        ({"base_url": "localhost:8080/v1"}, "must be an http:// or https:// URL"),
        ({"base_url": "http://127.0.0.1:9/v1", "api_key": 12345}, "api_key must be a str"),
    ],
)
def test_a_bad_endpoint_is_a_configuration_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Agent("m", **options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"api_key": 5}, "api_key must be a str, not int"),
        ({"api_key": b"sk-bytes-secret-0123"}, "api_key must be a str, not bytes"),
        ({"trace_content": "no"}, "trace_content must be True, False or None (a bool), not 'no'"),
        ({"trace_content": "false"}, "trace_content must be True, False or None (a bool)"),
        ({"trace_content": 1}, "trace_content must be True, False or None (a bool), not 1 (int)"),
    ],
)
def test_api_key_and_trace_content_are_checked_with_a_client_too(
    options: dict[str, Any], message: str
) -> None:
    """With ``client=`` the key is not used, but a wrong one is still refused when the
    agent is made (it was a foreign ``TypeError`` from ``repr``, and ``"false"`` turned
    content on in spans); a key's value is never shown, only its type."""
    with pytest.raises(ConfigurationError) as caught:
        agent_for([], [], **options)
    assert str(caught.value).startswith(message)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("value", [None, True, False])
def test_trace_content_takes_a_bool_or_none(value: bool | None) -> None:
    assert agent_for([], [], trace_content=value).trace_content is value


def test_an_absurd_token_count_is_not_carried_into_the_totals() -> None:
    body = completion("It is sunny.")
    body["usage"] = {"prompt_tokens": 12, "completion_tokens": 1e308, "total_tokens": 1e308}
    with ScriptedServer(body) as server:
        agent = Agent("m", base_url=server.base_url, api_key="sk-test", protocol="function_calling")
        result = agent.run("Weather?")
    assert result.answer == "It is sunny."
    assert result.usage.completion_tokens == 0
    assert result.usage.total_tokens == 12
    assert any("completion_tokens" in e for e in [n.message for n in result.steps[0].notices])


# --- options of the wrong type ---------------------------------------------------------------


BAD_OPTIONS = [
    {"max_steps": "3"},
    {"max_steps": 2.5},
    {"max_steps": True},
    {"settings": None},
    {"settings": {"temperature": 0}},
    # ModelSettings(timeout=-1) is refused when it is made: tests/faults/test_settings.py
    {"retry": None},
    {"tool_timeout": -1},
    {"tool_timeout": math.nan},
    {"tool_timeout": "5"},
    {"deadline": math.nan},
    {"deadline": math.inf},
    {"deadline": 0},
    {"max_observation_chars": 0},
    {"max_tool_calls": "2"},
    {"max_calls_per_step": 0},
    {"max_consecutive_errors": None},
    {"loop_limit": 0},
    {"tool_choice": None},
    {"multi_action": "yes"},
]


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=lambda o: repr(o))
def test_bad_options_are_configuration_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as info:
        agent_for([], [], **options)
    assert next(iter(options)) in str(info.value)
    agent = agent_for([], [reply("fine")])
    with pytest.raises(ConfigurationError):
        agent.run("go", **options)
    assert agent.run("go").answer == "fine"  # nothing was spent on the bad run


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"model": 123}, "model must be"),
        ({"protocol": None}, "unknown protocol"),
        ({"tools": "get_weather"}, "tools must be"),
        ({"tools": 42}, "tools must be"),
        ({"tools": [42]}, "every tool must be"),
        ({"instructions": 3}, "instructions must be"),
        ({"approve": "yes"}, "approve must be callable"),
    ],
)
def test_bad_agent_arguments_are_configuration_errors(kwargs: dict[str, Any], says: str) -> None:
    arguments: dict[str, Any] = {"model": "m", "client": ScriptedModel([])} | kwargs
    with pytest.raises(ConfigurationError, match=says):
        Agent(**arguments)


def test_a_question_that_is_not_a_string_is_a_configuration_error() -> None:
    agent = agent_for([], [reply("fine")])
    with pytest.raises(ConfigurationError, match="question must be a str"):
        agent.run(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="history must be a list"):
        asyncio.run(agent.arun("go", history=()))  # type: ignore[arg-type]


def test_a_single_tool_is_not_a_tool_list() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    for single in (sleeper(0), ping):
        with pytest.raises(ConfigurationError, match="tools must be a list"):
            agent_for(single, [])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["get_weather\n", "get weather", "1tool", "a" * 65, "ok\x00"])
def test_bad_tool_names_are_rejected(name: str) -> None:
    def f(x: int) -> int:
        """F.

        Args:
            x: anything.
        """
        return x

    with pytest.raises(ToolDefinitionError):
        Tool.from_function(f, name=name)


@pytest.mark.parametrize("timeout", [-1, 0, math.nan, "5"])
def test_bad_tool_timeouts_are_rejected(timeout: Any) -> None:
    def f(x: int) -> int:
        """F.

        Args:
            x: anything.
        """
        return x

    with pytest.raises(ToolDefinitionError, match="timeout"):
        Tool.from_function(f, timeout=timeout)


def test_configuration_errors_are_user_errors() -> None:
    assert issubclass(ConfigurationError, UserError)
    assert AgentConfig().max_calls_per_step == 16
