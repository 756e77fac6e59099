"""Tools: what a model may call, and where tools come from (``mcp.py`` imported when used)."""

from .base import Tool, ToolAnnotations, ToolArgumentsError, ToolOptions
from .decorator import as_tools, tool

__all__ = [
    "Tool",
    "ToolAnnotations",
    "ToolArgumentsError",
    "ToolOptions",
    "as_tools",
    "tool",
]
