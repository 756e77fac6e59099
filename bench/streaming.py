"""Streaming: time to the first token, and the tokens live stop detection saves.

Both against the loopback mock server (:class:`react_engine.testing.ScriptedServer`, in
a thread of this process), which writes a reply of ``WORDS`` chunks with a fixed delay per
chunk: a model generating tokens at a known pace. A non-streamed request is answered after
the same total delay, all at once.

* **Time to first token**: per round, the non-streamed reply's wall time is the baseline;
  the streamed reply's time to its first delta and to its last are reported as ratios to
  it (medians over the rounds, subjects interleaved).
* **Live stop detection**: the server ignores ``stop`` and writes an invented
  ``Observation:`` and ``TAIL`` more words after the action. Without live detection the
  client reads the whole reply (its usage counts it); with it, the client closes the stream
  at the label. Reported: chunks the server wrote in each case, and the share saved.
* **Assembly of many small deltas**: :class:`~react_engine.transport.streaming.ReplyBuilder` fed
  ``N`` one-character deltas, with and without stop sequences to watch. The time per delta
  at ``10 N`` is reported as a ratio to the time per delta at ``N``: about 1 when assembly
  is linear in the reply's length (it was quadratic: 200k deltas took 3.8 s).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from react_engine.testing import MockResponse, ScriptedServer, completion, stream_chunks
from react_engine.transport.endpoint import connect
from react_engine.transport.streaming import ReplyBuilder, stream_once
from react_engine.types import ModelDelta, ModelRequest, UserMessage

from .stats import median

__all__ = ["measure_streaming"]

WORDS = 64
DELAY_S = 0.004
TAIL = 200
ACTION = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'
STOP = ("\nObservation:", "Observation:")


def _reply(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


def _responder(words: int, delay: float) -> Any:
    def respond(body: dict[str, Any]) -> MockResponse:
        question = body["messages"][-1]["content"]
        text = _reply(words) if question == "plain" else ACTION + "\nObservation: " + _reply(TAIL)
        chunks = len(stream_chunks(completion(text)))
        reply = completion(text, completion_tokens=chunks)
        if body.get("stream"):
            return MockResponse(body=reply, chunk_delay=delay)
        return MockResponse(body=reply, delay=delay * chunks)

    return respond


async def _rounds(base_url: str, rounds: int) -> dict[str, Any]:
    model = connect(base_url, "sk-bench", asynchronous=True)
    plain = ModelRequest(model="mock", messages=(UserMessage("plain"),))
    whole: list[float] = []
    first: list[float] = []
    last: list[float] = []
    for i in range(rounds + 1):  # the first round warms the connection up, not counted
        order = [0, 1] if i % 2 else [1, 0]
        for subject in order:
            started = time.perf_counter()
            if subject == 0:
                await model.complete(plain)
                if i:
                    whole.append(time.perf_counter() - started)
                continue
            seen: list[float] = []

            def on_delta(_: Any, seen: list[float] = seen) -> None:
                if not seen:
                    seen.append(time.perf_counter())

            await stream_once(model, plain, on_delta)
            if i:
                first.append(seen[0] - started)
                last.append(time.perf_counter() - started)
    ttft = [f / w for f, w in zip(first, whole, strict=True)]
    total = [t / w for t, w in zip(last, whole, strict=True)]
    return {
        "rounds": rounds,
        "non_streamed_ms": median(whole) * 1e3,
        "first_delta_ms": median(first) * 1e3,
        "streamed_total_ms": median(last) * 1e3,
        "ttft_ratio": median(ttft),
        "streamed_total_ratio": median(total),
    }


async def _stop_saving(server: ScriptedServer, base_url: str) -> dict[str, Any]:
    model = connect(base_url, "sk-bench", asynchronous=True)
    request = ModelRequest(model="mock", messages=(UserMessage("act"),), stop=STOP)
    whole = await model.complete(request)
    before = len(server.streams)
    cut = await stream_once(model, request)
    for _ in range(200):  # the server notices the closed connection at its next write
        if server.streams[before].closed_by_client:
            break
        await asyncio.sleep(0.01)
    record = server.streams[before]
    without = whole.usage.completion_tokens
    return {
        "tokens_without": without,
        "tokens_read_with": cut.usage.completion_tokens,
        "chunks_sent_with": record.sent,
        "chunks_available": record.available,
        "saving": 1 - record.sent / without if without else None,
        "cut_text_is_the_action": cut.content == ACTION,
    }


def _assemble(deltas: int, stop: tuple[str, ...]) -> float:
    """Seconds per delta to assemble ``deltas`` one-character deltas (best of three)."""
    pieces = [ModelDelta(content="ab"[i % 2]) for i in range(deltas)]
    best = float("inf")
    for _ in range(3):
        builder = ReplyBuilder(stop)
        started = time.perf_counter()
        for piece in pieces:
            builder.add(piece)
        builder.response()
        best = min(best, time.perf_counter() - started)
    return best / deltas


def measure_assembly(*, quick: bool = False) -> dict[str, Any]:
    small = 2_000 if quick else 20_000
    out: dict[str, Any] = {"deltas_small": small, "deltas_large": small * 10}
    for key, stop in (("plain", ()), ("with_stops", STOP)):
        per_small = _assemble(small, stop)
        per_large = _assemble(small * 10, stop)
        out[key] = {
            "us_per_delta_small": per_small * 1e6,
            "us_per_delta_large": per_large * 1e6,
            "ratio": per_large / per_small if per_small else None,
        }
    return out


def measure_streaming(*, quick: bool = False) -> dict[str, Any]:
    words = 16 if quick else WORDS
    delay = 0.002 if quick else DELAY_S
    rounds = 3 if quick else 15
    with ScriptedServer(default=_responder(words, delay)) as server:

        async def both() -> dict[str, Any]:
            out = await _rounds(server.base_url, rounds)
            out["live_stop"] = await _stop_saving(server, server.base_url)
            return out

        out = asyncio.run(both())
    out.update({"words": words, "chunk_delay_ms": delay * 1e3})
    out["assembly"] = measure_assembly(quick=quick)
    return out
