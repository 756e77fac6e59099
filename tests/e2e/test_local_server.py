"""End-to-end tests of the embedded llama.cpp server serving SmolLM2-135M-Instruct.

These talk to the real model over loopback HTTP through the ``openai`` SDK, exactly as
the engine does. The assertions are about shapes and guarantees the engine relies on
(stop sequences, determinism, tool-call structure, process lifetime), never about the
quality of what a 135M-parameter model says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from react_engine.errors import ConfigurationError
from react_engine.local import (
    MODEL_ALIAS,
    LocalEndpoint,
    LocalServer,
    LocalServerError,
    find_model_path,
    local_server,
)

pytestmark = pytest.mark.e2e

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a location.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["location"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    },
]

REACT_SYSTEM = (
    "Answer the question. Use this format:\n"
    "Thought: what to do\n"
    "Action: one of [get_weather, calculator]\n"
    "Action Input: a JSON object\n"
    "Observation: the result\n"
    "Final Answer: the answer"
)


@pytest.fixture
def client(local_endpoint: LocalEndpoint) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=local_endpoint.base_url, api_key=local_endpoint.api_key, max_retries=0
    ) as client:
        yield client


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- the model file ------------------------------------------------------------------


def test_find_model_path_finds_the_packaged_gguf(local_model_path: Path) -> None:
    path = find_model_path()
    assert path == local_model_path
    assert path.is_file()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000  # the 135M model, not a stub


def test_model_path_override(
    local_model_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REACT_ENGINE_LOCAL_MODEL", str(local_model_path))
    assert find_model_path() == local_model_path.resolve()
    monkeypatch.setenv("REACT_ENGINE_LOCAL_MODEL", str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigurationError, match="REACT_ENGINE_LOCAL_MODEL"):
        find_model_path()


def test_non_loopback_host_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="loopback"):
        LocalServer(host="0.0.0.0")


# --- the running server --------------------------------------------------------------


def test_server_lists_its_model(local_endpoint: LocalEndpoint, client: openai.OpenAI) -> None:
    assert local_endpoint.base_url == f"http://127.0.0.1:{local_endpoint.port}/v1"
    assert "smollm2" in local_endpoint.model
    ids = {model.id for model in client.models.list()}
    assert ids == {MODEL_ALIAS}
    assert os.getpgid(local_endpoint.pid) == local_endpoint.pid  # its own process group


def test_wrong_api_key_is_rejected(local_endpoint: LocalEndpoint) -> None:
    with (
        openai.OpenAI(base_url=local_endpoint.base_url, api_key="sk-wrong", max_retries=0) as c,
        pytest.raises(openai.AuthenticationError),
    ):
        c.models.list()


def _text_request(endpoint: LocalEndpoint, question: str) -> dict[str, Any]:
    return {
        "model": endpoint.model,
        "messages": [
            {"role": "system", "content": REACT_SYSTEM},
            {"role": "user", "content": f"Question: {question}"},
        ],
        "temperature": 0,
        "seed": 42,
        "stop": ["\nObservation:", "Observation:"],
        "max_tokens": 48,
    }


def test_plain_chat_with_stop_is_deterministic(
    local_endpoint: LocalEndpoint, client: openai.OpenAI
) -> None:
    request = _text_request(local_endpoint, "What is the weather in Beijing?")
    first = client.chat.completions.create(**request)
    second = client.chat.completions.create(**request)
    text = first.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert "Observation:" not in text
    assert second.choices[0].message.content == text
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage is not None
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def test_stop_sequence_cuts_the_reply(local_endpoint: LocalEndpoint, client: openai.OpenAI) -> None:
    request = {
        "model": local_endpoint.model,
        "messages": [{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
        "temperature": 0,
        "seed": 42,
        "max_tokens": 64,
    }
    full = client.chat.completions.create(**request).choices[0].message.content or ""
    assert "5" in full, full
    cut = client.chat.completions.create(**request, stop=["5"])
    text = cut.choices[0].message.content or ""
    assert "5" not in text
    assert full.startswith(text)
    assert cut.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("question", "tool_choice", "expected_name"),
    [
        (
            "What is the weather in Beijing?",
            {"type": "function", "function": {"name": "get_weather"}},
            "get_weather",
        ),
        (
            "What is 12 * 7?",
            {"type": "function", "function": {"name": "calculator"}},
            "calculator",
        ),
    ],
    ids=["named-get_weather", "named-calculator"],
)
def test_named_tool_choice_returns_a_tool_call(
    local_endpoint: LocalEndpoint,
    client: openai.OpenAI,
    question: str,
    tool_choice: Any,
    expected_name: str,
) -> None:
    reply = client.chat.completions.create(
        model=local_endpoint.model,
        messages=[{"role": "user", "content": question}],
        tools=TOOLS,
        tool_choice=tool_choice,
        temperature=0,
        seed=42,
        max_tokens=128,
    )
    choice = reply.choices[0]
    calls = choice.message.tool_calls
    assert calls, choice.message
    call = calls[0]
    assert call.type == "function"
    assert call.id
    assert call.function.name == expected_name
    if choice.finish_reason != "length":  # a call cut by max_tokens has partial arguments
        arguments = json.loads(call.function.arguments)
        assert isinstance(arguments, dict)
    assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_required_with_one_tool_returns_a_call(
    local_endpoint: LocalEndpoint, client: openai.OpenAI
) -> None:
    reply = client.chat.completions.create(
        model=local_endpoint.model,
        messages=[{"role": "user", "content": "What is 2 + 3?"}],
        tools=TOOLS[1:],
        tool_choice="required",
        temperature=0,
        max_tokens=64,
    )
    calls = reply.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "calculator"
    if reply.choices[0].finish_reason != "length":  # a call cut by max_tokens is partial
        assert isinstance(json.loads(calls[0].function.arguments), dict)


def test_tool_results_reach_the_model(local_endpoint: LocalEndpoint, client: openai.OpenAI) -> None:
    """The stock chat format silently drops role "tool" messages; ours shows them."""

    def prompt_tokens(result: str) -> int:
        reply = client.chat.completions.create(
            model=local_endpoint.model,
            messages=[
                {"role": "user", "content": "What is the weather in Paris?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": '{"location": "Paris"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": result},
            ],
            temperature=0,
            max_tokens=1,
        )
        assert reply.usage is not None
        return reply.usage.prompt_tokens

    assert prompt_tokens("18 degrees and sunny, with a light wind from the west") > prompt_tokens(
        "18"
    )


def test_auto_tool_choice_returns_a_tool_call_or_a_message(
    local_endpoint: LocalEndpoint, client: openai.OpenAI
) -> None:
    reply = client.chat.completions.create(
        model=local_endpoint.model,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=TOOLS,
        tool_choice="auto",
        temperature=0,
        seed=42,
        max_tokens=128,
    )
    message = reply.choices[0].message
    if message.tool_calls:
        names = {tool["function"]["name"] for tool in TOOLS}
        for call in message.tool_calls:
            assert call.function.name in names
            assert isinstance(json.loads(call.function.arguments), dict)
    else:
        assert isinstance(message.content, str)


@pytest.mark.parametrize("tool_choice", ["required", "auto", None], ids=["call", "auto", "plain"])
def test_a_streamed_reply_is_the_whole_reply_with_its_usage(
    local_endpoint: LocalEndpoint, client: openai.OpenAI, tool_choice: str | None
) -> None:
    """Streamed, with or without tools, a reply is what the same request returns whole
    (the call in one ``tool_calls`` delta, the text as it is written), and the usage chunk
    that ``stream_options.include_usage`` asks for carries the same counts."""
    request: dict[str, Any] = {
        "model": local_endpoint.model,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "temperature": 0,
        "seed": 42,
        "max_tokens": 48,
    }
    if tool_choice is not None:
        request |= {"tools": TOOLS[:1], "tool_choice": tool_choice}
    whole = client.chat.completions.create(**request)
    chunks = list(
        client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    *replies, last = chunks
    assert last.choices == [] and last.usage == whole.usage
    assert all(c.usage is None for c in replies)
    text = "".join(c.choices[0].delta.content or "" for c in replies)
    calls = [call for c in replies for call in c.choices[0].delta.tool_calls or []]
    message = whole.choices[0].message
    assert text == (message.content or "")
    assert [
        (c.function and c.function.name, c.function and c.function.arguments) for c in calls
    ] == [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert replies[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    if tool_choice == "required":
        assert calls and calls[0].id and calls[0].index == 0
    else:
        assert len([c for c in replies if c.choices[0].delta.content]) > 1, "written as it comes"
    unasked = list(client.chat.completions.create(**request, stream=True))
    assert all(c.usage is None for c in unasked) and len(unasked) == len(replies)


# --- process lifetime ----------------------------------------------------------------


def test_process_is_gone_after_the_block(local_model_path: Path) -> None:
    with local_server(model_path=local_model_path) as endpoint:
        pid = endpoint.pid
        assert _alive(pid)
    assert not _alive(pid)


def test_process_is_gone_after_an_exception_in_the_block(local_model_path: Path) -> None:
    pid = None
    with pytest.raises(RuntimeError, match="boom"), local_server(model_path=local_model_path) as ep:
        pid = ep.pid
        raise RuntimeError("boom")
    assert pid is not None and not _alive(pid)


def test_process_is_gone_after_ctrl_c_in_the_block(local_model_path: Path) -> None:
    server = LocalServer(model_path=local_model_path)
    pid = None
    with pytest.raises(KeyboardInterrupt), server as endpoint:
        pid = endpoint.pid
        raise KeyboardInterrupt
    assert pid is not None and not _alive(pid)
    assert not server.running
    server.stop()  # idempotent


def test_process_is_gone_when_the_engine_is_killed(local_model_path: Path) -> None:
    """A SIGKILLed parent runs no cleanup; the server notices it was orphaned and exits."""
    script = (
        "import os, sys\n"
        "from react_engine.local import LocalServer\n"
        f"ep = LocalServer(model_path={str(local_model_path)!r}).start()\n"
        "print(ep.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == -9, done.stderr
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)


def test_a_server_that_dies_while_starting_raises_with_its_log(
    local_model_path: Path, tmp_path: Path
) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"GGUF but not really" * 10)
    server = LocalServer(model_path=bogus, log_path=tmp_path / "server.log")
    with pytest.raises(LocalServerError) as info:
        server.start()
    error = info.value
    assert error.returncode not in (None, 0)
    assert error.log_path == tmp_path / "server.log"
    assert error.log_tail and error.log_tail in str(error)
    assert not server.running


def test_prefix_reuse_keeps_replies_a_function_of_the_request(
    local_endpoint: LocalEndpoint, client: openai.OpenAI
) -> None:
    """The launcher reuses a cached prompt prefix only in whole batches, so a request
    answered after one that shares its long prefix (the reuse path) gets the same reply as
    after an unrelated one (evaluated from scratch)."""
    shared = _text_request(local_endpoint, "What is the weather in Beijing?")
    target = _text_request(local_endpoint, "What is 12 * 7? Use the calculator.")
    unrelated = {
        "model": local_endpoint.model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "temperature": 0,
        "max_tokens": 8,
    }
    client.chat.completions.create(**shared)  # caches the system prompt
    after_shared = client.chat.completions.create(**target).choices[0].message.content
    client.chat.completions.create(**unrelated)  # replaces the cache
    after_unrelated = client.chat.completions.create(**target).choices[0].message.content
    assert after_shared and after_shared == after_unrelated
