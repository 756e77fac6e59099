"""Tools over fixed data: canned weather for a handful of cities, and a safe calculator.

They are real tools (typed, validated, with docstrings) over fixed data, so demos, the
comparison suite and the end-to-end tests repeat exactly and need no network.
"""

from __future__ import annotations

import ast
import operator
from typing import Annotated, Any, Literal

from pydantic import Field

from ..tools import tool

__all__ = ["WEATHER", "calculator", "get_weather"]

WEATHER: dict[str, dict[str, Any]] = {
    "beijing": {"city": "Beijing", "condition": "sunny", "temperature_c": 24, "humidity": 30},
    "guangzhou": {"city": "Guangzhou", "condition": "rainy", "temperature_c": 29, "humidity": 85},
    "shanghai": {"city": "Shanghai", "condition": "cloudy", "temperature_c": 22, "humidity": 70},
    "shenzhen": {
        "city": "Shenzhen",
        "condition": "thunderstorms",
        "temperature_c": 28,
        "humidity": 88,
    },
    "hangzhou": {
        "city": "Hangzhou",
        "condition": "light rain",
        "temperature_c": 20,
        "humidity": 76,
    },
    "paris": {"city": "Paris", "condition": "overcast", "temperature_c": 14, "humidity": 72},
    "london": {"city": "London", "condition": "drizzle", "temperature_c": 11, "humidity": 81},
    "new york": {"city": "New York", "condition": "clear", "temperature_c": 18, "humidity": 55},
    "tokyo": {"city": "Tokyo", "condition": "partly cloudy", "temperature_c": 21, "humidity": 60},
}

_ALIASES = {
    "北京": "beijing",
    "广州": "guangzhou",
    "上海": "shanghai",
    "深圳": "shenzhen",
    "杭州": "hangzhou",
    "巴黎": "paris",
    "伦敦": "london",
    "纽约": "new york",
    "东京": "tokyo",
    "nyc": "new york",
}


def _lookup(location: str) -> dict[str, Any] | None:
    key = location.strip().lower()
    for suffix in (" city", "市", ", china", ", france", ", uk", ", usa", ", japan"):
        if key.endswith(suffix):
            key = key[: -len(suffix)].strip()
    key = _ALIASES.get(key, key)
    return WEATHER.get(key)


@tool(read_only=True)
def get_weather(
    location: str, unit: Literal["celsius", "fahrenheit"] = "celsius"
) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        location: City name, e.g. "Beijing" or "Paris".
        unit: Temperature unit.
    """
    found = _lookup(location)
    if found is None:
        known = ", ".join(v["city"] for v in WEATHER.values())
        raise ValueError(f"no weather data for {location!r}; known cities: {known}")
    out = dict(found)
    if unit == "fahrenheit":
        out["temperature_f"] = round(out.pop("temperature_c") * 9 / 5 + 32, 1)
    return out


_BIN_OPS: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Any] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        result: float | int = _BIN_OPS[type(node.op)](left, right)
        return result
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        value: float | int = _UNARY_OPS[type(node.op)](_evaluate(node.operand))
        return value
    raise ValueError("only numbers and + - * / // % ** ( ) are allowed")


@tool(read_only=True)
def calculator(
    expression: Annotated[
        str, Field(max_length=200, description="An arithmetic expression, e.g. '(3 + 4) * 2'.")
    ],
) -> float | int:
    """Evaluate an arithmetic expression exactly (no variables, no functions)."""
    try:
        tree = ast.parse(
            expression.replace("^", "**").replace("×", "*").replace("÷", "/"), mode="eval"
        )
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    return _evaluate(tree)
