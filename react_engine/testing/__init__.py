"""Test doubles that ship with the library: hermetic, deterministic, no network
(:class:`ScriptedModel`, :class:`ScriptedServer`, and tools over fixed data in
:mod:`.tools`; docs/testing.md)."""

from .model import ScriptedModel, reply, tool_call_reply
from .script import Script, ScriptExhausted
from .server import (
    MockResponse,
    ScriptedServer,
    StreamRecord,
    completion,
    stream_chunks,
    tool_calls_completion,
)

__all__ = [
    "MockResponse",
    "Script",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedServer",
    "StreamRecord",
    "completion",
    "reply",
    "stream_chunks",
    "tool_call_reply",
    "tool_calls_completion",
]
