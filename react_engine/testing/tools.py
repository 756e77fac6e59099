"""Tools over fixed data: canned weather for a handful of cities, and a safe calculator.

They are real tools (typed, validated, with docstrings) over fixed data, so demos, the
comparison suite and the end-to-end tests repeat exactly and need no network.
"""

from __future__ import annotations

import ast
import operator
from typing import Annotated, Any, Literal

from pydantic import Field

from ..tools import ToolAnnotations, tool

__all__ = ["WEATHER", "calculator", "get_weather"]

WEATHER: dict[str, dict[str, Any]] = {
    city.lower(): {"city": city, "condition": condition, "temperature_c": c, "humidity": h}
    for city, condition, c, h in [
        ("Beijing", "sunny", 24, 30),
        ("Guangzhou", "rainy", 29, 85),
        ("Shanghai", "cloudy", 22, 70),
        ("Shenzhen", "thunderstorms", 28, 88),
        ("Hangzhou", "light rain", 20, 76),
        ("Paris", "overcast", 14, 72),
        ("London", "drizzle", 11, 81),
        ("New York", "clear", 18, 55),
        ("Tokyo", "partly cloudy", 21, 60),
    ]
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


@tool(annotations=ToolAnnotations(read_only=True))
def get_weather(
    location: str, unit: Literal["celsius", "fahrenheit"] = "celsius"
) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        location: City name, e.g. "Beijing" or "Paris".
        unit: Temperature unit.
    """
    key = location.strip().lower()
    for suffix in (" city", "市", ", china", ", france", ", uk", ", usa", ", japan"):
        if key.endswith(suffix):
            key = key[: -len(suffix)].strip()
    found = WEATHER.get(_ALIASES.get(key, key))
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


@tool(annotations=ToolAnnotations(read_only=True))
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
