"""Tools: what a model may call, and where tools come from.

``base.py`` holds the :class:`Tool` model, the :func:`tool` decorator and the argument
checks; ``mcp.py`` the tools of MCP servers (imported when used); ``_schema_check.py``
the check of arguments against a whole JSON Schema; ``_nesting.py`` the depth limit
shared by the validators and the trace.
"""

from .base import (
    Tool,
    ToolAnnotations,
    ToolArgumentsError,
    as_tools,
    meets_strict_mode,
    strict_schema,
    tool,
    within,
)

__all__ = [
    "Tool",
    "ToolAnnotations",
    "ToolArgumentsError",
    "as_tools",
    "meets_strict_mode",
    "strict_schema",
    "tool",
    "within",
]
