"""The embedded server's streamed tool replies, chunk by chunk, without a model.

``react_engine/local/server.py`` turns the chatml handler's chunks of a reply to a request
with tools into OpenAI's: the text passes as it comes once it cannot be a ``<tool_call>``;
a call is held until it is complete and sent as one ``tool_calls`` delta. The end-to-end
tests see only what SmolLM2 happens to write; here every way a reply can begin is fed in.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.parts import LOCAL, LOCAL_HINT, require_module

require_module("llama_cpp", LOCAL, LOCAL_HINT)

from react_engine.local import server  # noqa: E402  (after the check above)

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'


def chunks(*pieces: str, finish: str = "stop") -> list[dict[str, Any]]:
    """What the stock chatml handler streams: the role, the pieces, the finish reason."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return {**head, "choices": [choice]}

    return [
        chunk({"role": "assistant"}),
        *(chunk({"content": p}) for p in pieces),
        chunk({}, finish),
    ]


def deltas(out: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    return [(c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in out]


def test_an_answer_passes_through_as_it_was_written() -> None:
    given = chunks("It", " is", " overcast.")
    assert list(server._streamed_tool_reply(iter(given))) == given


@pytest.mark.parametrize("start", ["<", " <b", "\n<tool_calls", "<tool_call"])
def test_text_that_turns_out_not_to_be_a_call_is_sent_whole_and_in_order(start: str) -> None:
    given = chunks(start, "> and more", " text")
    out = list(server._streamed_tool_reply(iter(given)))
    assert out == given


@pytest.mark.parametrize(
    "pieces",
    [
        [CALL],
        ["<", "tool", "_call", ">\n", CALL[len("<tool_call>\n") :]],
        ["  ", CALL[:5], CALL[5:30], CALL[30:]],
    ],
    ids=["one-piece", "token-by-token", "leading-blanks"],
)
def test_a_call_comes_whole_in_one_tool_calls_delta(pieces: list[str]) -> None:
    out = deltas(list(server._streamed_tool_reply(iter(chunks(*pieces)))))
    assert out[0] == ({"role": "assistant"}, None)
    (delta, reason), last = out[1], out[2]
    assert reason is None and last == ({}, "tool_calls") and len(out) == 3
    (call,) = delta["tool_calls"]
    assert call["index"] == 0 and call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"location": "Paris"}


def test_a_call_cut_by_max_tokens_keeps_its_partial_arguments_and_says_length() -> None:
    cut = '<tool_call>\n{"name": "get_weather", "arguments": {"loc'
    out = deltas(list(server._streamed_tool_reply(iter(chunks(cut, finish="length")))))
    (call,) = out[1][0]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"loc'}
    assert out[-1] == ({}, "length")


def test_a_reply_that_ends_while_it_could_still_open_a_call_is_text() -> None:
    given = chunks("<tool")
    assert list(server._streamed_tool_reply(iter(given))) == given


def _tool(width: int) -> dict[str, Any]:
    properties = {f"p{i}": {"type": "string"} for i in range(width)}
    parameters = {"type": "object", "properties": properties, "required": ["p0"]}
    return {"type": "function", "function": {"name": "wide", "parameters": parameters}}


def test_tools_past_the_grammar_limits_are_served_without_a_grammar() -> None:
    # 1,000 parameters used to raise RecursionError in the grammar writer: a 500.
    assert server._grammar_for([_tool(1500)], "required") is not None
    assert server._grammar_for([_tool(6000)], "required") is None
