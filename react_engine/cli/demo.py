"""The demo: the weather agent ``react-engine demo`` (and ``make demo``) runs.

Its tools are the fixed-data weather and calculator of :mod:`react_engine.testing.tools`,
so a run repeats exactly and needs no network; ``--dry-run`` replays a canned transcript of
the same question instead of asking a model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..testing.tools import calculator, get_weather
from ..tools import Tool
from ..types import RunResult

__all__ = [
    "DEMO_QUESTION",
    "DEMO_TOOLS",
    "DRY_RUN_SCRIPT",
    "calculator",
    "demo_check",
    "get_weather",
]

DEMO_TOOLS: list[Tool] = [get_weather, calculator]
"""The tools the demo, ``run`` and ``chat`` offer when no ``--tools`` module is named."""

DEMO_QUESTION = "What is the weather in Paris right now?"
"""A question the model cannot answer without calling ``get_weather``: the demo checks
that the answer carries the temperature the tool returned."""

DRY_RUN_SCRIPT: dict[str, list[dict[str, Any]]] = {
    "function_calling": [
        {
            "content": "I need the weather in both cities.",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"location": "Beijing"}},
                {"name": "get_weather", "arguments": {"location": "Guangzhou"}},
            ],
        },
        {"content": "Beijing is sunny at 24°C; Guangzhou is rainy at 29°C."},
    ],
    "text": [
        {
            "content": "Thought: I need the weather in both cities.\n"
            'Action: get_weather\nAction Input: {"location": "Beijing"}\n'
            'Action: get_weather\nAction Input: {"location": "Guangzhou"}'
        },
        {
            "content": "Thought: I now know the final answer\n"
            "Final Answer: Beijing is sunny at 24°C; Guangzhou is rainy at 29°C."
        },
    ],
    "structured": [
        {
            "content": '{"thought": "I need the weather in Beijing first.", "action": '
            '{"tool": "get_weather", "arguments": {"location": "Beijing"}}}'
        },
        {
            "content": '{"thought": "Now Guangzhou.", "action": '
            '{"tool": "get_weather", "arguments": {"location": "Guangzhou"}}}'
        },
        {
            "content": '{"thought": "I now know the final answer", "action": {"final_answer": '
            '"Beijing is sunny at 24°C; Guangzhou is rainy at 29°C."}}'
        },
    ],
}
"""What ``--dry-run`` replays: the demo's weather question, under each protocol."""


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def demo_check(result: RunResult) -> tuple[bool, str]:
    """Whether the answer carries the weather the tool returned (its temperature).

    The demo's question cannot be answered without ``get_weather``; an answer that does
    not contain the temperature of some successful call was not made from the tool's data.
    """
    if result.answer is None:
        return False, "no answer"
    temperatures: list[float] = []
    for step in result.steps:
        for action in step.actions:
            if action.tool != "get_weather" or action.status != "ok":
                continue
            try:
                data = json.loads(action.observation)
            except ValueError:
                continue
            if isinstance(data, dict):
                for key in ("temperature_c", "temperature_f"):
                    if isinstance(data.get(key), int | float):
                        temperatures.append(float(data[key]))
    if not temperatures:
        return False, "get_weather never returned data in this run"
    said = {float(n) for n in _NUMBER.findall(result.answer)}
    for value in temperatures:
        if value in said:
            return True, f"the answer carries the temperature get_weather returned ({value:g})"
    shown = ", ".join(f"{v:g}" for v in temperatures)
    return False, f"the answer does not carry the temperature get_weather returned ({shown})"
