"""react-engine: ReAct agents over any OpenAI-compatible chat API.

One agent loop, protocols behind one :class:`Protocol` interface, chosen per model:
:class:`FunctionCallingProtocol` (native ``tools``/``tool_calls``),
:class:`TextReActProtocol` (Thought/Action/Observation text with a tolerant parser) and
:class:`StructuredOutputProtocol` (one JSON object per reply, for models with JSON-schema
output but no tool calling). Tools are typed functions (:func:`tool`) or the tools of MCP
servers (:class:`MCPServerStdio`, :class:`MCPServerHTTP`).
"""

import logging
import os
from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigurationError,
    ContextWindowExceeded,
    ErrorBudgetExhausted,
    JSONRepairError,
    MCPServerError,
    MCPToolError,
    ModelAPIError,
    ModelBehaviorError,
    ModelRequestError,
    ModelUnavailableError,
    ReactEngineError,
    ReActParseError,
    RunAborted,
    RunInterrupted,
    StoreError,
    TemplateError,
    ToolDefinitionError,
    UserError,
)
from .protocols.base import Protocol, RequestContext
from .protocols.decision import CallTools, Decision, FinalAnswer, FormatError
from .protocols.registry import shipped as _shipped_protocols
from .run.agent import Agent, AgentConfig
from .run.conversation import Conversation
from .run.journal import JournalStore, set_store_opener
from .tools.base import Tool, ToolAnnotations
from .tools.decorator import tool
from .transport.base import ChatModel
from .transport.capabilities import Capabilities, CapabilityRegistry, default_registry
from .transport.learned import CapabilityCache
from .transport.openai_model import OpenAIChatModel
from .transport.retries import RetryPolicy
from .types import (
    ActionRecord,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ParsedStep,
    PendingCall,
    RunResult,
    Step,
    Usage,
    set_html_renderer,
)
from .version import __version__

if TYPE_CHECKING:
    from .local import local_server
    from .parsing import RepairResult, parse_react, repair_json
    from .protocols import *  # noqa: F403 (the shipped protocols: registry.py exports them)
    from .protocols.prompts import PromptTemplate, list_templates, load_template
    from .testing import ScriptedModel, reply, tool_call_reply
    from .tools.mcp import MCPServerHTTP, MCPServerStdio, mcp_tools

_LAZY = {
    "RepairResult": "parsing",
    "parse_react": "parsing",
    "repair_json": "parsing",
    "PromptTemplate": "protocols.prompts",
    "list_templates": "protocols.prompts",
    "load_template": "protocols.prompts",
    "MCPServerHTTP": "tools.mcp",
    "MCPServerStdio": "tools.mcp",
    "mcp_tools": "tools.mcp",
    "local_server": "local",
    "ScriptedModel": "testing",
    "reply": "testing",
    "tool_call_reply": "testing",
}
"""Names imported on first use, so that ``import react_engine`` stays light (the shipped
protocols are exported by their registrations in :mod:`react_engine.protocols.registry`)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        entry = _shipped_protocols().get(name)
        if entry is None:
            raise AttributeError(f"module 'react_engine' has no attribute {name!r}")
        value: Any = entry.cls
    else:
        import importlib

        value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


# A library logs, the application decides where (no last-resort printing to stderr).
logging.getLogger("react_engine").addHandler(logging.NullHandler())


def _open_store(target: "str | os.PathLike[str]") -> "JournalStore":
    """``Agent(store="runs.db")``: the package, above run/ and store/, links the two."""
    from .store import open_store

    return open_store(target)


set_store_opener(_open_store)


def _run_html(records: "list[dict[str, Any]]") -> str:
    """``RunResult.to_html()``: the package, above types and report/, links the two."""
    from .report.run import run_html

    return run_html(records)


set_html_renderer(_run_html)

__all__ = [
    "ActionRecord",
    "Agent",
    "AgentConfig",
    "CallTools",
    "Capabilities",
    "CapabilityCache",
    "CapabilityRegistry",
    "ChatModel",
    "ConfigurationError",
    "ContextWindowExceeded",
    "Conversation",
    "Decision",
    "ErrorBudgetExhausted",
    "FinalAnswer",
    "FormatError",
    "JSONRepairError",
    "MCPServerError",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolError",
    "ModelAPIError",
    "ModelBehaviorError",
    "ModelRequest",
    "ModelRequestError",
    "ModelResponse",
    "ModelSettings",
    "ModelUnavailableError",
    "OpenAIChatModel",
    "ParsedStep",
    "PendingCall",
    "PromptTemplate",
    "Protocol",
    "ReActParseError",
    "ReactEngineError",
    "RepairResult",
    "RequestContext",
    "RetryPolicy",
    "RunAborted",
    "RunInterrupted",
    "RunResult",
    "ScriptedModel",
    "Step",
    "StoreError",
    "TemplateError",
    "Tool",
    "ToolAnnotations",
    "ToolDefinitionError",
    "Usage",
    "UserError",
    "__version__",
    "default_registry",
    "list_templates",
    "load_template",
    "local_server",
    "mcp_tools",
    "parse_react",
    "repair_json",
    "reply",
    "tool",
    "tool_call_reply",
]
__all__ = sorted([*__all__, *_shipped_protocols()])  # the shipped protocols, by their registrations
