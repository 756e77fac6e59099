"""Tools: what a model may call, and where tools come from (``mcp.py`` imported when used)."""

from .base import Tool, ToolAnnotations, ToolArgumentsError, ToolOptions
from .decorator import as_tools, tool
from .schema import meets_strict_mode, strict_schema
from .timeouts import within

__all__ = [
    "Tool",
    "ToolAnnotations",
    "ToolArgumentsError",
    "ToolOptions",
    "as_tools",
    "meets_strict_mode",
    "strict_schema",
    "tool",
    "within",
]
