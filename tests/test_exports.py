"""The public API is explicit: ``__all__`` is pinned, and every name in it exists."""

from __future__ import annotations

import react_engine

EXPECTED = {
    "ActionRecord",
    "Agent",
    "AgentConfig",
    "CallTools",
    "Capabilities",
    "CapabilityCache",
    "CapabilityRegistry",
    "ChatModel",
    "ConfigurationError",
    "Conversation",
    "Decision",
    "ErrorBudgetExhausted",
    "FinalAnswer",
    "FormatError",
    "FunctionCallingProtocol",
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
    "ParsedAction",
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
    "RunResult",
    "ScriptedModel",
    "Step",
    "StructuredOutputProtocol",
    "TemplateError",
    "TextReActProtocol",
    "Tool",
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
}


def test_all_is_pinned() -> None:
    assert set(react_engine.__all__) == EXPECTED
    assert sorted(react_engine.__all__) == react_engine.__all__


def test_every_exported_name_exists() -> None:
    for name in react_engine.__all__:
        assert getattr(react_engine, name) is not None, name


def test_errors_share_one_root() -> None:
    for name in react_engine.__all__:
        value = getattr(react_engine, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, react_engine.ReactEngineError), name


def test_the_package_is_typed() -> None:
    from importlib import resources

    assert resources.files("react_engine").joinpath("py.typed").is_file()
