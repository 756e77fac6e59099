"""Tools and readers shared by the tests of the native tool-call formats."""

from __future__ import annotations

from typing import Any

from react_engine import Capabilities, FunctionCallingProtocol, TextReActProtocol, Tool
from react_engine.protocols.base import RequestContext
from react_engine.protocols.decision import CallTools, Decision
from react_engine.types import ModelResponse

SCHEMAS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
    "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}},
    "search": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "filters": {"type": "object"}},
        "required": ["query"],
    },
}

TOOLS = [Tool.from_schema(name, schema, lambda args: "ok") for name, schema in SCHEMAS.items()]


def context(call_format: str = "", *, multi_action: bool = True) -> RequestContext:
    caps = Capabilities(call_format=call_format)
    return RequestContext("m", [], TOOLS, "auto", caps, multi_action=multi_action)


def decide(protocol: str, text: str, call_format: str = "") -> Decision:
    """What the protocol reads from a reply whose content is ``text``."""
    proto = FunctionCallingProtocol() if protocol == "function_calling" else TextReActProtocol()
    return proto.read_reply(ModelResponse(content=text), context(call_format))


def summary(decision: Decision) -> dict[str, Any]:
    """A decision as plain data: its kind, and its calls with their repairs."""
    if isinstance(decision, CallTools):
        return {
            "kind": "calls",
            "calls": [
                {"tool": c.tool, "arguments": c.arguments, "error": c.error} for c in decision.calls
            ],
            "repairs": decision.repairs,
        }
    return {"kind": type(decision).__name__}
