"""The constructors users write: the :func:`tool` decorator, and :func:`as_tools`."""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, Unpack, overload

from ..errors import ToolDefinitionError
from .base import Tool, ToolOptions

__all__ = ["as_tools", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(function: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Callable[[F], Tool]: ...


def tool(
    function: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Tool | Callable[[F], Tool]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    Use bare (``@tool``) or with options (``@tool(requires_approval=True)``).
    """

    def wrap(fn: F) -> Tool:
        built = Tool.from_function(fn, name=name, description=description, **options)
        if description is None:
            _warn_if_undescribed(built, fn)
        return built

    return wrap if function is None else wrap(function)


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Accept tools and plain typed functions alike; reject duplicate names."""
    out: list[Tool] = []
    seen: set[str] = set()
    for item in items:
        t = item if isinstance(item, Tool) else Tool.from_function(item)
        if t is not item:
            _warn_if_undescribed(t, item)
        if t.name in seen:
            raise ToolDefinitionError(f"two tools are named {t.name!r}", tool_name=t.name)
        seen.add(t.name)
        out.append(t)
    return out


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _warn_if_undescribed(built: Tool, function: Callable[..., Any]) -> None:
    """A tool with no description: say so where the user made it."""
    if built.description.strip():
        return
    here = inspect.currentframe()
    level, frame = 2, here.f_back if here is not None else None  # stacklevel 2: the caller's
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    where = getattr(function, "__qualname__", None) or getattr(function, "__name__", "?")
    lack = "only documents parameters" if inspect.getdoc(function) else "has no docstring"
    warnings.warn(
        f"tool {built.name!r}: the function {where} {lack}, so the model gets no "
        "description of what the tool does; write one (its first paragraph describes the "
        "tool, an Args: section each parameter) or pass @tool(description=...)",
        UserWarning,
        stacklevel=level,
    )
