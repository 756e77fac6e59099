"""A planted API key never comes out: not in traces, reprs, error messages, logs or the CLI.

Each test runs real requests through the ``openai`` SDK against a loopback server (which
does receive the key, in the ``Authorization`` header, as a real one would) and then
searches every output it can reach for the key, or for any 8 characters of its secret part.
Servers that echo the key back (in a 401's body, in an HTML error page, in a parameter
error) are the hard case: the engine must mask what it repeats.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.replies import FakeSleep, call_body, final_body

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelAPIError,
    RetryPolicy,
    RunResult,
)
from react_engine.cli import main
from react_engine.testing import MockResponse, ScriptedServer
from react_engine.testing.tools import calculator, get_weather
from react_engine.transport.endpoint import connect
from react_engine.transport.openai_model import OpenAIChatModel
from react_engine.transport.wire import mask_key, mask_secret, mask_url

SECRET_PART = "7f3c9a51e2b84d06aa19c3e5b7d2f408"
KEY = f"sk-live-PLANTED-{SECRET_PART}"
PROTOCOLS = ["function_calling", "text"]


def leaks(text: str) -> bool:
    """The key, or any 8 consecutive characters of its secret part, appear in ``text``."""
    if KEY in text:
        return True
    return any(SECRET_PART[i : i + 8] in text for i in range(len(SECRET_PART) - 7))


def assert_clean(**outputs: Any) -> None:
    for name, value in outputs.items():
        text = value if isinstance(value, str) else repr(value)
        assert not leaks(text), f"the API key leaks through {name}: {text[:300]!r}"


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
        if record.exc_info:
            parts.append("".join(traceback.format_exception(*record.exc_info)))
    return "\n".join(parts)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx2", "httpcore2", "react_engine"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def agent_for(server: ScriptedServer, protocol: str, **kwargs: Any) -> Agent:
    kwargs.setdefault("retry", RetryPolicy(max_attempts=2, sleep=FakeSleep()))
    return Agent(
        "mock-model",
        [get_weather, calculator],
        protocol=protocol,
        base_url=server.base_url,
        api_key=KEY,
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **kwargs,
    )


def test_the_helpers_would_catch_a_leak() -> None:
    assert leaks(KEY) and leaks(f"Bearer {KEY[:-3]}") and leaks(SECRET_PART[5:13])
    assert not leaks(mask_key(KEY)) and not leaks(mask_secret(f"key={KEY}!", KEY))
    assert mask_secret(f"key={KEY}!", KEY) == f"key={mask_key(KEY)}!"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_successful_run_shows_the_key_nowhere(
    server: ScriptedServer, protocol: str, debug_logs: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    server.push(
        call_body(protocol, "get_weather", {"location": "Paris"}),
        final_body(protocol, "Overcast in Paris."),
    )
    agent = agent_for(server, protocol)
    result = agent.run("Weather in Paris?")
    assert result.answer == "Overcast in Paris."
    trace = tmp_path / "trace.jsonl"
    result.write_trace(str(trace))

    assert_clean(
        trace=trace.read_text(encoding="utf-8"),
        jsonl=result.to_jsonl(),
        result=repr(result),
        agent=repr(agent),
        agent_str=str(agent),
        config=repr(agent.config),
        model=repr(agent._model),
        logs=log_text(debug_logs),
        request_bodies=server.requests,
    )
    assert mask_key(KEY) in repr(agent)  # masked, not dropped: keys can be told apart
    # The test is not vacuous: the SDK and the HTTP client did log at DEBUG.
    names = {r.name.split(".")[0] for r in debug_logs.records}
    assert {"openai", "httpx2", "httpcore2"} <= names


def test_reprs_mask_a_key_taken_from_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    agent = Agent("mock-model", base_url=server.base_url)
    with openai.OpenAI(base_url=server.base_url, api_key=KEY) as client:
        wrapped = OpenAIChatModel(client)
        assert_clean(agent=repr(agent), model=repr(wrapped), model_vars=vars(agent).get("config"))
        assert mask_key(KEY) in repr(wrapped)


ECHOES = {
    "401_json_echo": (
        MockResponse(
            401,
            {
                "error": {
                    "message": f"Incorrect API key provided: {KEY}. Find your key at ...",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        ),
        401,
    ),
    "403_param_echo": (
        MockResponse(403, {"error": {"message": "forbidden", "param": f"Bearer {KEY}"}}),
        403,
    ),
    "400_plain_text_echo": (
        MockResponse(
            400, f"bad header Authorization: Bearer {KEY}", {"content-type": "text/plain"}
        ),
        400,
    ),
    "429_echo": (MockResponse(429, {"error": {"message": f"key {KEY} is over quota"}}), 429),
    "500_json_echo_nested": (
        MockResponse(500, {"detail": {"auth": KEY, "trace": ["a", KEY]}}),
        500,
    ),
    "502_html_echo": (
        MockResponse(502, f"<html><pre>upstream rejected Bearer {KEY}</pre></html>"),
        502,
    ),
    "200_garbled_echo": (MockResponse(body=f'{{"choices": [{{"oops": "{KEY}'), None),
}


def _fail_with(exc: ModelAPIError) -> dict[str, Any]:
    assert exc.result is not None
    return {
        "message": str(exc),
        "repr": repr(exc),
        "args": exc.args,
        "body": exc.body,
        "traceback": "".join(traceback.format_exception(exc)),
        "result_error": exc.result.error,
        "result_trace": exc.result.to_jsonl(),
    }


@pytest.mark.parametrize("client", ["sync", "async"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("echo", sorted(ECHOES))
def test_error_messages_mask_a_key_the_server_echoes(
    server: ScriptedServer,
    echo: str,
    protocol: str,
    client: str,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    response, status = ECHOES[echo]
    server.push(call_body(protocol, "get_weather", {"location": "Paris"}), response, response)
    agent = agent_for(server, protocol)
    with pytest.raises(ModelAPIError) as info:
        if client == "sync":
            agent.run("Weather in Paris?")
        else:
            asyncio.run(agent.arun("Weather in Paris?"))
    err = info.value
    assert err.status_code == status
    assert err.result is not None and len(err.result.steps) == 1
    assert_clean(**_fail_with(err), logs=log_text(debug_logs))
    if status is not None and echo != "200_garbled_echo":
        # Masked where it was echoed, so the message still says what went wrong.
        assert mask_key(KEY) in str(err)


@pytest.mark.parametrize("client", ["sync", "async"])
def test_connection_errors_and_timeouts_do_not_show_the_key(
    client: str, debug_logs: pytest.LogCaptureFixture, server: ScriptedServer
) -> None:
    server.push(MockResponse(delay=1.0, body={}))
    for base_url, timeout in (("http://127.0.0.1:9/v1", 5.0), (server.base_url, 0.2)):
        sdk: openai.OpenAI | openai.AsyncOpenAI
        if client == "sync":
            sdk = openai.OpenAI(base_url=base_url, api_key=KEY, timeout=timeout)
        else:
            sdk = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, timeout=timeout)
        agent = Agent(
            "mock-model",
            client=sdk,
            api_key=KEY,
            retry=RetryPolicy(max_attempts=1),
            capability_cache=CapabilityCache(),
        )

        async def go(agent: Agent = agent, sdk: Any = sdk) -> RunResult:
            try:
                return await agent.arun("q")
            finally:
                await sdk.close()

        with pytest.raises(ModelAPIError) as info:
            if client == "sync":
                try:
                    agent.run("q")
                finally:
                    sdk.close()
            else:
                asyncio.run(go())
        assert_clean(**_fail_with(info.value), agent=repr(agent))
    assert_clean(logs=log_text(debug_logs))


def _cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_BASE_URL", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("REACT_ENGINE_CAPABILITY_CACHE", str(tmp_path / "caps.json"))
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "live"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_cli_shows_the_key_nowhere(
    server: ScriptedServer,
    protocol: str,
    as_json: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    _cli_env(monkeypatch, tmp_path)
    server.push(
        call_body(protocol, "get_weather", {"location": "Paris"}),
        final_body(protocol, "Overcast in Paris."),
    )
    trace = tmp_path / "trace.jsonl"
    argv = ["run", "Weather in Paris?", "--base-url", server.base_url, "--model", "mock-model"]
    argv += ["--protocol", protocol, "--trace", str(trace)]
    code = main([*argv, "--json"] if as_json else argv)
    out = capsys.readouterr()
    assert code == 0, out
    assert "Overcast in Paris." in out.out
    assert_clean(
        stdout=out.out,
        stderr=out.err,
        trace=trace.read_text(encoding="utf-8"),
        logs=log_text(debug_logs),
    )


@pytest.mark.parametrize("echo", ["401_json_echo", "502_html_echo", "400_plain_text_echo"])
def test_the_cli_error_output_masks_an_echoed_key(
    server: ScriptedServer,
    echo: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    _cli_env(monkeypatch, tmp_path)
    response, _ = ECHOES[echo]
    server.push(response, response, response, response)
    trace = tmp_path / "trace.jsonl"
    code = main(
        [
            "run",
            "Weather in Paris?",
            "--base-url",
            server.base_url,
            "--model",
            "mock-model",
            "--protocol",
            "function_calling",
            "--max-retries",
            "0",
            "--trace",
            str(trace),
            "--json",
        ]
    )
    out = capsys.readouterr()
    assert code != 0
    assert out.err.strip()  # the error was reported
    assert_clean(
        stdout=out.out,
        stderr=out.err,
        trace=trace.read_text(encoding="utf-8") if trace.exists() else "",
        logs=log_text(debug_logs),
    )


# --- credentials in the base URL ---------------------------------------------------------------

URL_SECRET = "hunter2-in-the-url"


def test_mask_url_masks_the_password_and_the_query_values_only() -> None:
    cases = {
        "http://user:pw@host:8/v1": "http://user:***@host:8/v1",
        "https://ghp_token@host/v1": "https://***@host/v1",
        "https://host/v1?key=sk-abc&api-version=1": "https://host/v1?key=***&api-version=***",
        "https://host/v1?sk-bare#frag": "https://host/v1?***#***",
        "http://u:p@ss@host/a@b": "http://u:***@host/a@b",  # the last @ before the path
        "http://127.0.0.1:8080/v1": "http://127.0.0.1:8080/v1",
        "": "",
    }
    for url, masked in cases.items():
        assert mask_url(url) == masked
        assert mask_url(masked) == masked  # a masked URL masks to itself


def test_the_cache_keeps_no_url_credentials_and_finds_the_server_by_them(tmp_path: Path) -> None:
    path = tmp_path / "caps.json"
    url = f"http://user:{URL_SECRET}@127.0.0.1:9/v1?key={URL_SECRET}"
    CapabilityCache(path).remember(url, "m", function_calling=False)
    assert URL_SECRET not in path.read_text(encoding="utf-8")
    again = CapabilityCache(path)
    assert again.get(url, "m") == {"function_calling": False}  # the same server, read back
    assert [e[0] for e in again.entries()] == ["http://user:***@127.0.0.1:9/v1?key=***"]


def test_base_url_credentials_are_masked_in_the_banner_trace_probe_and_cache(
    server: ScriptedServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``react-engine run`` (its banner, the fallback event in its trace), ``probe`` (text
    and JSON) and the capability cache they write, with ``user:password@`` in the URL."""
    _cli_env(monkeypatch, tmp_path)
    url = server.base_url.replace("http://", f"http://user:{URL_SECRET}@")
    refused = MockResponse(400, {"error": "library/gemma:2b does not support tools"})
    # The run's two replies (tools refused, then the text protocol's), then the probes'.
    server.push(refused, final_body("text", "Sunny."), *[final_body("text", "blue")] * 2)
    trace = tmp_path / "trace.jsonl"
    assert main(["run", "Weather?", "--base-url", url, "--model", "m", "--trace", str(trace)]) == 0
    run = capsys.readouterr()
    assert main(["probe", "--base-url", url, "--model", "m"]) == 0
    probe = capsys.readouterr().out
    assert main(["probe", "--base-url", url, "--model", "m", "--json"]) == 0
    probe_json = json.loads(capsys.readouterr().out)
    shown = {
        "banner": run.err,
        "answer": run.out,
        "trace": trace.read_text(encoding="utf-8"),
        "probe": probe,
        "probe --json": probe_json["base_url"],
        "cache": (tmp_path / "caps.json").read_text(encoding="utf-8"),
        "agent": repr(Agent("m", base_url=url, api_key=KEY)),
        "model": repr(connect(url, KEY, asynchronous=True)),
    }
    assert "Sunny." in run.out and "rejected tools" in shown["trace"]
    for where, text in shown.items():
        assert URL_SECRET not in text, f"the URL's password is shown in the {where}: {text}"
    for where in ("banner", "trace", "probe", "probe --json", "cache", "agent", "model"):
        assert "user:***@127.0.0.1" in shown[where], where
