"""Tools: what a model may call, and where tools come from.

``base.py`` holds the :class:`Tool` model, its constructors and the options they share
(:class:`ToolOptions`); ``decorator.py`` the :func:`tool` decorator and :func:`as_tools`;
``docstrings.py`` the docstring reader; ``schema.py`` the self-contained schema and the
strict-mode test; ``timeouts.py`` a call bounded in time; ``mcp.py`` the tools of MCP
servers (imported when used); ``_schema_check.py`` the check of arguments against a whole
JSON Schema (the depth limit it shares with the trace is ``react_engine/nesting.py``).
"""

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
