"""What is measured: the engine and the bare loops, as runnable one-question subjects.

A :class:`Subject` answers the benchmark question once, sync (``run``) or async
(``arun``), against one base URL, and says whether the answer was the scripted one (a run
that went wrong must not pass for a fast one).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai

from react_engine import Agent, ModelRequest, ModelResponse, reply, tool_call_reply
from react_engine.transport.base import ChatModel
from react_engine.transport.wire import request_payload
from react_engine.types import ToolMessage, UserMessage

from . import baselines
from .task import _CITIES, _FINAL, MODEL, QUESTION, TOOL

__all__ = [
    "PROTOCOLS",
    "Subject",
    "Subjects",
    "capture_requests",
    "engine_offline",
    "subjects",
]

PROTOCOLS = ("function_calling", "text")
API_KEY = "sk-bench-not-a-secret"
TIMEOUT = 300.0
MAX_CONNECTIONS = 1000


@dataclass
class Subject:
    name: str
    """``engine``, ``bare`` (the seed's loop as written), ``bare-dict`` (seed 000 with the
    assistant message appended as a dict, the leanest FC loop) or ``bare-chat`` (seed 002
    with chat-shaped turns, a control: the engine's text message shape)."""
    protocol: str
    arun: Callable[[], Awaitable[Any]]
    run: Callable[[], Any]

    @property
    def key(self) -> str:
        return f"{self.name}/{self.protocol}"


def answer_of(value: Any) -> str | None:
    return getattr(value, "answer", value)


def is_expected(value: Any) -> bool:
    answer = answer_of(value)
    return isinstance(answer, str) and answer.strip().endswith(_FINAL[-20:])


def _engine(protocol: str, client: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
    return Agent(
        MODEL,
        [TOOL],
        protocol=protocol,
        client=client,
        template="json" if protocol == "text" else None,
    )


class Subjects(list[Subject]):
    """The subjects, and the two clients they share (close them in the loop that used them)."""

    def __init__(self, items: list[Subject], sync_client: Any, async_client: Any) -> None:
        super().__init__(items)
        self.sync_client = sync_client
        self.async_client = async_client

    async def aclose(self) -> None:
        await self.async_client.close()

    def close(self) -> None:
        self.sync_client.close()


def _async_http_client() -> Any:
    """The SDK's own httpx client with room for 1,000 kept-alive connections.

    With the default of 100, 1,000 concurrent runs close and reopen a TCP connection for
    most calls, and the benchmark would measure connection churn. The limits class is
    taken from the SDK's defaults, since the SDK may ship its own httpx fork.
    """
    from openai._constants import DEFAULT_CONNECTION_LIMITS

    limits = type(DEFAULT_CONNECTION_LIMITS)(
        max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
    )
    return openai.DefaultAsyncHttpxClient(limits=limits)


def subjects(base_url: str, protocols: tuple[str, ...] = PROTOCOLS) -> Subjects:
    """Every subject. The engine and the bare loops share one sync and one async client,
    built the same way: SDK defaults, except a timeout long enough for 1,000 concurrent
    runs on two busy cores (the default 5 s connect timeout fires while the event loop is
    busy) and, for the async client, 1,000 kept-alive connections. Create them inside the
    event loop that uses them."""
    sync_client = openai.OpenAI(base_url=base_url, api_key=API_KEY, timeout=TIMEOUT)
    async_client = openai.AsyncOpenAI(
        base_url=base_url, api_key=API_KEY, timeout=TIMEOUT, http_client=_async_http_client()
    )
    out: list[Subject] = []
    for protocol in protocols:
        async_agent = _engine(protocol, async_client)
        sync_agent = _engine(protocol, sync_client)
        out.append(
            Subject(
                "engine",
                protocol,
                lambda agent=async_agent: agent.arun(QUESTION),
                lambda agent=sync_agent: agent.run(QUESTION),
            )
        )
        if protocol == "function_calling":
            out.append(
                Subject(
                    "bare",
                    protocol,
                    lambda: baselines.abare_fc(async_client, QUESTION),
                    lambda: baselines.bare_fc(sync_client, QUESTION),
                )
            )
            out.append(
                Subject(
                    "bare-dict",
                    protocol,
                    lambda: baselines.abare_fc(async_client, QUESTION, as_dict=True),
                    lambda: baselines.bare_fc(sync_client, QUESTION, as_dict=True),
                )
            )
        else:
            out.append(
                Subject(
                    "bare",
                    protocol,
                    lambda: baselines.abare_text(async_client, QUESTION),
                    lambda: baselines.bare_text(sync_client, QUESTION),
                )
            )
            out.append(
                Subject(
                    "bare-chat",
                    protocol,
                    lambda: baselines.abare_chat(async_client, QUESTION),
                    lambda: baselines.bare_chat(sync_client, QUESTION),
                )
            )
    return Subjects(out, sync_client, async_client)


# --- the engine without HTTP: its own CPU per call ---------------------------------------------


def _offline_replies(protocol: str) -> tuple[ModelResponse, ...]:
    if protocol == "function_calling":
        calls = tuple(
            tool_call_reply(
                ("get_weather", {"location": c}, f"call_{c.lower()}"),
                content=f"I need the current weather in {c}.",
            )
            for c in _CITIES
        )
        return (*calls, reply(_FINAL))
    texts = []
    for c in _CITIES:
        blob = json.dumps({"action": "get_weather", "action_input": {"location": c}})
        texts.append(
            reply(f"Thought: I need the current weather in {c}.\nAction:\n```json\n{blob}\n```")
        )
    return (*texts, reply(f"Thought: I now know the final answer\nFinal Answer: {_FINAL}"))


class ReplayModel(ChatModel):
    """The scripted task in-process: builds the SDK payload (as :class:`OpenAIChatModel`
    does) and answers without HTTP, so the engine's own CPU can be told from the SDK's."""

    def __init__(self, protocol: str) -> None:
        self.base_url = "replay://bench"
        self._fc = protocol == "function_calling"
        self._replies = _offline_replies(protocol)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        request_payload(request)
        if self._fc:
            step = sum(1 for m in request.messages if isinstance(m, ToolMessage))
        else:
            step = sum(
                m.content.count("Observation:")
                for m in request.messages
                if isinstance(m, UserMessage)
            )
        return self._replies[min(step, 2)]


def engine_offline(protocol: str) -> Agent:
    return Agent(
        MODEL,
        [TOOL],
        protocol=protocol,
        client=ReplayModel(protocol),
        template="json" if protocol == "text" else None,
    )


# --- the requests themselves -----------------------------------------------------------------


def capture_requests() -> dict[str, list[dict[str, Any]]]:
    """The JSON bodies the SDK sent during one run of each subject (an in-process server)."""
    from react_engine.testing import ScriptedServer

    from .server import mock_responder

    out: dict[str, list[dict[str, Any]]] = {}
    with ScriptedServer(default=mock_responder) as server:
        subs = subjects(server.base_url)
        for subject in subs:
            server.requests.clear()
            if not is_expected(subject.run()):
                raise RuntimeError(f"{subject.key} did not answer the benchmark task")
            out[subject.key] = [dict(b) for b in server.requests]
        subs.close()
    for bodies in out.values():
        for b in bodies:
            assert b.get("model") and API_KEY not in json.dumps(b)
    return out
