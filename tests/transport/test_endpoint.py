"""One endpoint rule: ``transport.endpoint.connect`` turns a base URL and a key into a chat
model the same way for the agent, the CLI, the comparison and the evaluation.

The environment fallbacks, the check of the URL (shown masked), the refusal of no
endpoint at all and the key sent to a server that wants none are written in that module
only; every caller goes through it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from react_engine import Agent, ConfigurationError
from react_engine.transport.endpoint import NO_KEY, connect
from react_engine.transport.wire import mask_key

PACKAGE = Path(__file__).resolve().parents[2] / "react_engine"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return monkeypatch


@pytest.mark.parametrize("asynchronous", [False, True])
def test_arguments_then_the_environment(no_env: pytest.MonkeyPatch, asynchronous: bool) -> None:
    model = connect("http://127.0.0.1:9/v1", "sk-given", asynchronous=asynchronous)
    assert model.base_url == "http://127.0.0.1:9/v1"
    assert "sk-given" not in repr(model)  # masked
    no_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    no_env.setenv("OPENAI_API_KEY", "sk-from-env-123456")
    model = connect(asynchronous=asynchronous)
    assert model.base_url == "http://127.0.0.1:8/v1"
    assert "sk-from-env-123456" not in repr(model) and "sk-" in repr(model)
    no_env.delenv("OPENAI_API_KEY")
    keyless = connect(asynchronous=asynchronous)
    assert repr(keyless).endswith(f"api_key='{mask_key(NO_KEY)}')")


def test_no_endpoint_and_a_bad_url_are_configuration_errors(no_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="no endpoint: pass client=, base_url="):
        connect(asynchronous=True)
    with pytest.raises(ConfigurationError, match="http:// or https://") as bad:
        connect("ftp://me:hunter2@host/v1", asynchronous=False)
    assert "hunter2" not in str(bad.value) and "me:***@" in str(bad.value)
    no_env.setenv("OPENAI_BASE_URL", "localhost:8080/v1")
    with pytest.raises(ConfigurationError, match="'localhost:8080/v1'"):
        connect(asynchronous=True)


def test_the_agent_follows_it(no_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="no endpoint"):
        Agent("m")
    no_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:6/v1")
    assert Agent("m").base_url == "http://127.0.0.1:6/v1"
    with pytest.raises(ConfigurationError, match="http:// or https://"):
        Agent("m", base_url="127.0.0.1:6/v1")


def test_the_rule_is_written_once() -> None:
    """No other module reads the endpoint's environment or writes the placeholder key."""
    rule = re.compile(
        r"""environ(\.get)?\(\s*["']OPENAI_(BASE_URL|API_KEY)|sk-no-key-required"""
        r"""|\b(Async)?OpenAI\(\s*base_url"""
    )
    writing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if rule.search(path.read_text("utf-8"))
    )
    assert writing == ["transport/endpoint.py", "transport/openai_model.py"]
    callers = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\bconnect\([^)]*asynchronous=", path.read_text("utf-8"))
        and "endpoint import" in path.read_text("utf-8")
    }
    assert {"run/agent.py", "harness/runner.py", "cli/probe.py"} <= callers
