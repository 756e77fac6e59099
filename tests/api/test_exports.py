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
    "ContextWindowExceeded",
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
    "MinimalProtocol",
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
    "StructuredOutputProtocol",
    "TemplateError",
    "TextReActProtocol",
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
}


def test_all_is_pinned() -> None:
    assert set(react_engine.__all__) == EXPECTED
    assert sorted(react_engine.__all__) == react_engine.__all__


def test_every_exported_name_exists() -> None:
    for name in react_engine.__all__:
        assert getattr(react_engine, name) is not None, name


def test_every_shipped_protocol_is_exported_by_its_registration() -> None:
    """``react_engine.X`` and ``react_engine.protocols.X`` are the class the registry builds,
    for every shipped protocol, the minimal one included."""
    import react_engine.protocols
    from react_engine.protocols.registry import ProtocolOptions, shipped

    names = {e.name for e in shipped().values()}
    assert names == {"function_calling", "text", "structured", "minimal"}
    for class_name, entry in shipped().items():
        cls = getattr(react_engine, class_name)
        assert cls is getattr(react_engine.protocols, class_name) is entry.cls
        assert cls.__name__ == class_name
        assert type(entry.cls.from_options(ProtocolOptions(react_engine.Capabilities()))) is cls
        assert class_name in react_engine.__all__
        assert class_name in react_engine.protocols.__all__
    from react_engine import MinimalProtocol

    assert MinimalProtocol.name == "minimal"


def test_errors_share_one_root() -> None:
    for name in react_engine.__all__:
        value = getattr(react_engine, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, react_engine.ReactEngineError), name


def test_the_package_is_typed() -> None:
    from importlib import resources

    assert resources.files("react_engine").joinpath("py.typed").is_file()


# What only a run needs, imported when one starts: the loop and its parts, the protocol
# chosen and its parsers, and asyncio with ``ssl`` and ``socket`` behind it (see the imports of
# react_engine/run/agent.py and the lazy names of react_engine/__init__.py).
_RUN_ONLY = [
    "asyncio",
    "ssl",
    "socket",
    "concurrent.futures",
    "email.utils",
    "react_engine.runtime",
    "react_engine.run.events",
    "react_engine.run.execution",
    "react_engine.run.loop",
    "react_engine.tools.mcp",
    "react_engine.parsing",
    "react_engine.protocols.policy",
    "react_engine.protocols.function_calling",
    "react_engine.protocols.shared",
    "react_engine.run.state",
    "react_engine.transport.streaming",
    "react_engine.run.tracing",
]


def test_importing_the_library_leaves_the_run_machinery_out() -> None:
    """``import react_engine`` loads none of what only a run needs, nor does building an
    agent load the engine's run modules; the first run loads them, and the names stay
    importable (``make bench``: import time)."""
    import subprocess
    import sys

    code = (
        "import sys, react_engine\n"
        f"run_only = {_RUN_ONLY!r}\n"
        "print(','.join(m for m in run_only if m in sys.modules))\n"
        "agent = react_engine.Agent('m', client=react_engine.ScriptedModel(['4']))\n"
        "ours = [m for m in run_only if m.startswith('react_engine.') and m != 'react_engine.tools.mcp']\n"
        "print(','.join(m for m in ours if m in sys.modules))\n"
        "print(agent.run('2+2?').answer)\n"
        "print([m for m in run_only if m not in sys.modules])\n"
        "from react_engine.run.state import RUN_EVENT\n"
        "print(RUN_EVENT)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == ""  # none of them with the import
    assert out[1] == ""  # nor with an agent built (its client, here a test double, may
    # load asyncio: the openai SDK does)
    assert out[2] == "4"
    assert out[3] == "['email.utils']"  # the run loaded the rest (that one parses HTTP dates)
    assert out[4] == "{'run_event': True}"


def test_importing_the_library_does_not_import_the_sdk_or_the_launcher() -> None:
    """``openai`` (about 0.7 s to import) waits until a client is built; the local launcher
    and the test doubles until they are used (see ``make bench`` for the import time)."""
    import subprocess
    import sys

    code = (
        "import sys, react_engine\n"
        "heavy = ['openai', 'react_engine.local.launcher', 'react_engine.testing', 'mcp',"
        " 'jsonschema']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "react_engine.ScriptedModel, react_engine.local_server\n"
        "print('react_engine.testing' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == ""  # none of them
    assert out[1] == "True"  # the lazy names still resolve


def test_no_module_keeps_an_old_name_alive() -> None:
    """Unreleased 0.x: a rename removes the old name (CHANGELOG.md lists it). No module
    ``__getattr__`` answers for an old name with a warning, and no import hook aliases an
    old module path; after the first release an old callable is marked with
    ``typing_extensions.deprecated`` instead."""
    import ast
    from pathlib import Path

    shims = []
    for path in sorted(Path(react_engine.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hooks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
        for node in (n for hook in hooks for n in ast.walk(hook)):
            if isinstance(node, ast.Attribute) and node.attr == "warn":
                shims.append(f"{path.name}: __getattr__ warns")
        if "meta_path" in {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}:
            shims.append(f"{path.name}: an import hook on sys.meta_path")
    assert shims == []
