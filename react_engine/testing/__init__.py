"""Test doubles that ship with the library: hermetic, deterministic, no network.

* :class:`ScriptedModel`: an in-process :class:`~react_engine.ChatModel` answering from
  a script (:func:`reply`, :func:`tool_call_reply` build its replies);
* :class:`MockOpenAIServer`: a loopback OpenAI-compatible HTTP server whose answers come
  from a responder function, faults included (:class:`MockResponse`), and
  :class:`ScriptedServer`, the same server answering from a script;
* :class:`Script`: the one queue-or-function mechanism both scripted fakes use;
* :mod:`.tools`: tools over fixed data (canned weather, a calculator).
"""

from .model import ScriptedModel, reply, tool_call_reply
from .script import Script, ScriptExhausted
from .server import (
    MockOpenAIServer,
    MockResponse,
    ScriptedServer,
    StreamRecord,
    completion,
    stream_chunks,
    tool_calls_completion,
)

__all__ = [
    "MockOpenAIServer",
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
