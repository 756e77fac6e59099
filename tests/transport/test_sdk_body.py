"""The request body reaches the server exactly as the engine built it, and the SDK does not
walk the transcript again on every request (its ``transform`` cost grew with each message:
the largest part of the engine's overhead per request, bench/results.md)."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

import openai

from react_engine import ModelRequest, ModelSettings
from react_engine.testing import ScriptedServer, completion
from react_engine.transport.openai_model import OpenAIChatModel
from react_engine.transport.wire import request_payload
from react_engine.types import AssistantMessage, SystemMessage, UserMessage

TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        },
    },
)


def request(turns: int, **settings: Any) -> ModelRequest:
    messages: list[Any] = [SystemMessage("Be brief.")]
    for i in range(turns):
        messages += [UserMessage(f"question {i} é"), AssistantMessage(f"answer {i}")]
    messages.append(UserMessage("last"))
    return ModelRequest(
        model="m",
        messages=tuple(messages),
        tools=TOOLS,
        tool_choice="auto",
        settings=ModelSettings(temperature=0.5, **settings),
    )


def send(req: ModelRequest) -> tuple[dict[str, Any], int]:
    """The body the server received, and how many calls the SDK's transform made."""
    transform = sys.modules["openai._utils._transform"]
    codes = {
        getattr(transform, name).__code__
        for name in ("_transform_recursive", "_async_transform_recursive")
    }
    walked = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal walked
        if event == "call" and frame.f_code in codes:
            walked += 1

    async def main() -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        sys.setprofile(profile)
        try:
            await OpenAIChatModel(client).complete(req)
        finally:
            sys.setprofile(None)
            await client.close()

    with ScriptedServer(completion("ok")) as server:
        asyncio.run(main())
        return server.requests[0], walked


def test_the_body_sent_is_the_payload_built() -> None:
    req = request(2)
    body, _ = send(req)
    assert body == request_payload(req)


def test_the_settings_extra_body_still_wins() -> None:
    req = request(1, extra_body={"temperature": 0.1, "top_k": 5})
    body, _ = send(req)
    assert body["temperature"] == 0.1
    assert body["top_k"] == 5
    assert body["messages"] == request_payload(req)["messages"]


def test_the_sdk_does_not_walk_the_transcript() -> None:
    _, short = send(request(1))
    _, long = send(request(30))
    assert long == short  # 60 more messages, no more work in the SDK's transform
