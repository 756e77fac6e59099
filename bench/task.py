"""The benchmark task: the two-city weather question of seeds 000 and 002, scripted.

The mock server answers from :func:`respond`, a pure function of the request body:

* a request with ``tools`` gets native tool calls: Beijing, then Guangzhou, then the final
  answer, chosen by the number of ``tool`` messages already in the request;
* a request without ``tools`` gets text ReAct in the JSON-blob format of seed 002 (the
  engine's ``json`` template asks for exactly that), chosen by the number of
  ``Observation:`` lines outside the system prompt.

Both the engine and the bare loops see byte-identical replies, three LLM calls per run.
The bodies are encoded once, so the server spends next to nothing per request.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from react_engine.testing.tools import get_weather

__all__ = ["CALLS_PER_RUN", "MODEL", "QUESTION", "TOOL", "respond"]

MODEL = "bench-model"
QUESTION = "What's the weather like in Beijing and Guangzhou?"
CALLS_PER_RUN = 3
TOOL = dataclasses.replace(get_weather, inline=True)
"""The engine's demo tool, declared quick (``inline=True``: called in the run's task, as the
bare loops call it): the engine validates its arguments with pydantic; the bare loops call
the same function with ``json.loads``'d arguments."""

_CITIES = ("Beijing", "Guangzhou")
_FINAL = "Beijing is sunny, 24°C with 30% humidity; Guangzhou is rainy, 29°C with 85% humidity."


def _body(message: dict[str, Any], finish: str, prompt_tokens: int) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 30,
                "total_tokens": prompt_tokens + 30,
            },
        },
        ensure_ascii=False,
    ).encode()


def _fc_reply(step: int) -> bytes:
    if step < len(_CITIES):
        city = _CITIES[step]
        call = {
            "id": f"call_{city.lower()}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"location": city})},
        }
        message = {
            "role": "assistant",
            "content": f"I need the current weather in {city}.",
            "tool_calls": [call],
        }
        return _body(message, "tool_calls", 300 + 60 * step)
    return _body({"role": "assistant", "content": _FINAL}, "stop", 420)


def _text_reply(step: int) -> bytes:
    if step < len(_CITIES):
        city = _CITIES[step]
        blob = json.dumps({"action": "get_weather", "action_input": {"location": city}})
        content = f"Thought: I need the current weather in {city}.\nAction:\n```json\n{blob}\n```"
        return _body({"role": "assistant", "content": content}, "stop", 500 + 80 * step)
    content = f"Thought: I now know the final answer\nFinal Answer: {_FINAL}"
    return _body({"role": "assistant", "content": content}, "stop", 660)


FC_REPLIES = tuple(_fc_reply(i) for i in range(3))
TEXT_REPLIES = tuple(_text_reply(i) for i in range(3))


def text_step(messages: list[dict[str, Any]]) -> int:
    """Observations so far: one per ``Observation:`` line outside the system prompt."""
    seen = 0
    for m in messages:
        if m.get("role") != "system" and isinstance(m.get("content"), str):
            seen += m["content"].count("Observation:")
    return seen


def fc_step(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "tool")


def respond(body: dict[str, Any]) -> bytes:
    """The scripted model: the reply body for one decoded request."""
    messages = body.get("messages") or []
    if body.get("tools"):
        return FC_REPLIES[min(fc_step(messages), 2)]
    return TEXT_REPLIES[min(text_step(messages), 2)]
