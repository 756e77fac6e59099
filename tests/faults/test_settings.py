"""Bad settings and bad figures from a server.

A wrong sampling setting is the caller's mistake, refused with a typed error when the
settings are made, before any request is paid for. A server's token count that is no count
(``1e308``) is read as 0 and named in the step's events, never carried into the totals.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from react_engine import Agent, ConfigurationError, ModelSettings
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


def test_an_absurd_token_count_is_not_carried_into_the_totals() -> None:
    body = completion("It is sunny.")
    body["usage"] = {"prompt_tokens": 12, "completion_tokens": 1e308, "total_tokens": 1e308}
    with ScriptedServer(body) as server:
        agent = Agent("m", base_url=server.base_url, api_key="sk-test", protocol="function_calling")
        result = agent.run("Weather?")
    assert result.answer == "It is sunny."
    assert result.usage.completion_tokens == 0
    assert result.usage.total_tokens == 12
    assert any("completion_tokens" in e for e in result.steps[0].events)
