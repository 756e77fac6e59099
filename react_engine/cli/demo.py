"""The demo: the weather agent ``react-engine demo`` runs, over fixed-data tools."""

from __future__ import annotations

import json
import re

from ..testing.tools import calculator, get_weather
from ..tools import Tool
from ..types import RunResult

__all__ = ["DEMO_QUESTION", "DEMO_TOOLS", "calculator", "demo_check", "get_weather"]

DEMO_TOOLS: list[Tool] = [get_weather, calculator]
"""The tools the demo, ``run`` and ``chat`` offer when no ``--tools`` module is named."""

DEMO_QUESTION = "What is the weather in Paris right now?"
"""A question the model cannot answer without calling ``get_weather``."""


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def demo_check(result: RunResult) -> tuple[bool, str]:
    """Whether the answer carries the temperature some successful ``get_weather`` returned."""
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
