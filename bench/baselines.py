"""The baselines: bare ``openai`` SDK loops, as the seeds write them.

``bare_fc`` is seed 000's ``func_react_agent`` (call with ``tools``, append the message,
run each call with ``json.loads``'d arguments, append a ``tool`` message, repeat);
``bare_text`` is seed 002's ``main`` (system prompt with the tools, one user message
holding the question and the scratchpad, ``stop="Observation:"``, two regexes, repeat).
Each has a sync twin with ``openai.OpenAI``. No validation, no trace, no retries of their
own, no error budget: the least a working loop does. The async ones call the tool inline,
as the seeds do; ``off_loop=True`` runs it with ``asyncio.to_thread`` instead, as the
engine runs a sync tool (a control for :mod:`bench.gccount`: one await between a reply
and the next request, which is what sets off most collections at 1,000 runs).

``bare_chat`` is a control, not a seed: seed 002's loop with the transcript kept as chat
turns (assistant reply, then a user message with the observation), the message shape the
engine's text protocol sends. Against it, the engine's text overhead is its own code; the
rest of its gap to seed 002 is what the SDK charges for more messages.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import openai

from .task import MODEL, TOOL

__all__ = ["abare_chat", "abare_fc", "abare_text", "bare_chat", "bare_fc", "bare_text"]

TOOLS = [TOOL.openai_schema()]
TOOLS_MAP = {TOOL.name: TOOL.function}
FC_SYSTEM = (
    "You are a helpful assistant using ReAct framework. Think step-by-step before acting. "
    "Use only the provided functions."
)
TEXT_SYSTEM = f"""Answer the following questions as best you can. You have access to the following tools:
{chr(10).join(json.dumps(t["function"]) for t in TOOLS)}
The way you use the tools is by specifying a json blob.
Specifically, this json should have a `action` key (with the name of the tool to use) and a `action_input` key (with the input to the tool going here).
The only values that should be in the "action" field are: {", ".join(TOOLS_MAP)}
The $JSON_BLOB should only contain a SINGLE action, do NOT return a list of multiple actions. Here is an example of a valid $JSON_BLOB:
```
{{"action": $TOOL_NAME, "action_input": $INPUT}}
```
ALWAYS use the following format:
Question: the input question you must answer
Thought: you should always think about what to do
Action:
```
$JSON_BLOB
```
Observation: the result of the action
... (this Thought/Action/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question
Begin! Reminder to always use the exact characters `Final Answer` when responding."""  # noqa: E501
ACTION = re.compile(r"\nAction:\n`{3}(?:json)?\n(.*?)`{3}.*?$", re.DOTALL)
FINAL = re.compile(r"\nFinal Answer:\s*(.*)", re.DOTALL)


def _run_tool(name: str, arguments: Any) -> str:
    try:
        return json.dumps(TOOLS_MAP[name](**arguments), ensure_ascii=False)
    except Exception as exc:
        return f"Error executing {name}: {exc}"


# --- seed 000: native function calling ---------------------------------------------------


async def abare_fc(
    client: openai.AsyncOpenAI,
    question: str,
    max_turns: int = 5,
    *,
    as_dict: bool = False,
    off_loop: bool = False,
) -> str | None:
    messages: list[Any] = [
        {"role": "system", "content": FC_SYSTEM},
        {"role": "user", "content": question},
    ]
    for _ in range(max_turns):
        response = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto"
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True) if as_dict else message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            if off_loop:
                obs = await asyncio.to_thread(_run_tool, call.function.name, args)
            else:
                obs = _run_tool(call.function.name, args)
            messages.append({"role": "tool", "content": obs, "tool_call_id": call.id})
    return None


def bare_fc(
    client: openai.OpenAI, question: str, max_turns: int = 5, *, as_dict: bool = False
) -> str | None:
    messages: list[Any] = [
        {"role": "system", "content": FC_SYSTEM},
        {"role": "user", "content": question},
    ]
    for _ in range(max_turns):
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto"
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True) if as_dict else message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            obs = _run_tool(call.function.name, args)
            messages.append({"role": "tool", "content": obs, "tool_call_id": call.id})
    return None


# --- seed 002: text ReAct ----------------------------------------------------------------


async def abare_text(
    client: openai.AsyncOpenAI, question: str, max_iter: int = 5, *, off_loop: bool = False
) -> str | None:
    scratchpad = ""
    for _ in range(max_iter):
        messages: list[Any] = [
            {"role": "system", "content": TEXT_SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\n{scratchpad}"},
        ]
        completion = await client.chat.completions.create(
            model=MODEL, messages=messages, stop="Observation:"
        )
        content = completion.choices[0].message.content or ""
        final = FINAL.search(content)
        if final:
            return final.group(1)
        action = ACTION.search(content)
        if not action:
            return None
        obj = json.loads(action.group(1))
        if off_loop:
            result = await asyncio.to_thread(_run_tool, obj["action"], obj["action_input"])
        else:
            result = _run_tool(obj["action"], obj["action_input"])
        scratchpad += content + f"\nObservation: {result}\n"
    return None


def bare_text(client: openai.OpenAI, question: str, max_iter: int = 5) -> str | None:
    scratchpad = ""
    for _ in range(max_iter):
        messages: list[Any] = [
            {"role": "system", "content": TEXT_SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\n{scratchpad}"},
        ]
        completion = client.chat.completions.create(
            model=MODEL, messages=messages, stop="Observation:"
        )
        content = completion.choices[0].message.content or ""
        final = FINAL.search(content)
        if final:
            return final.group(1)
        action = ACTION.search(content)
        if not action:
            return None
        obj = json.loads(action.group(1))
        result = _run_tool(obj["action"], obj["action_input"])
        scratchpad += content + f"\nObservation: {result}\n"
    return None


# --- control: seed 002 with chat-shaped turns ------------------------------------------------


async def abare_chat(client: openai.AsyncOpenAI, question: str, max_iter: int = 5) -> str | None:
    messages: list[Any] = [
        {"role": "system", "content": TEXT_SYSTEM},
        {"role": "user", "content": f"Question: {question}"},
    ]
    for _ in range(max_iter):
        completion = await client.chat.completions.create(
            model=MODEL, messages=messages, stop="Observation:"
        )
        content = completion.choices[0].message.content or ""
        final = FINAL.search(content)
        if final:
            return final.group(1)
        action = ACTION.search(content)
        if not action:
            return None
        obj = json.loads(action.group(1))
        result = _run_tool(obj["action"], obj["action_input"])
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": f"Observation: {result}"})
    return None


def bare_chat(client: openai.OpenAI, question: str, max_iter: int = 5) -> str | None:
    messages: list[Any] = [
        {"role": "system", "content": TEXT_SYSTEM},
        {"role": "user", "content": f"Question: {question}"},
    ]
    for _ in range(max_iter):
        completion = client.chat.completions.create(
            model=MODEL, messages=messages, stop="Observation:"
        )
        content = completion.choices[0].message.content or ""
        final = FINAL.search(content)
        if final:
            return final.group(1)
        action = ACTION.search(content)
        if not action:
            return None
        obj = json.loads(action.group(1))
        result = _run_tool(obj["action"], obj["action_input"])
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": f"Observation: {result}"})
    return None
