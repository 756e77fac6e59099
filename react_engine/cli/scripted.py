"""The CLI's scripted model: ``--dry-run`` and ``--scripted FILE`` answer from replies
written in advance, per protocol, with no server. (Not in :mod:`react_engine.testing`: the
replies are the comparison's, which the library's doubles do not depend on.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..compare.suite import ScriptReply, Transcript, load_script, replies_for
from ..errors import ConfigurationError
from ..protocols.registry import auto_order, protocol_names, registration
from ..transport.capabilities import Capabilities
from ..types import ModelRequest, ModelResponse

__all__ = ["ScriptedReplies", "script_from_args"]


class ScriptedReplies:
    """The replies for the protocol the agent runs (:func:`replies_for`), else the shared
    list (``"*"``). Under ``"auto"``, a request with ``tools`` is the native protocol's, one
    without the protocol ``"auto"`` falls back to."""

    def __init__(self, script: dict[str, list[ScriptReply]], label: str) -> None:
        self._script = script
        self._label = label
        self._transcripts: dict[str, Transcript] = {}
        self.protocol = "auto"
        """The protocol the agent was asked for (a structured request looks like a text one)."""

    def _protocol(self, request: ModelRequest) -> str:
        named = self.protocol if self.protocol in protocol_names()[1:] else None
        if named is not None and registration(named).native_calls == bool(request.tools):
            return named
        if request.tools:
            return "function_calling"
        return auto_order(Capabilities(function_calling=False))[0]

    def _transcript(self, protocol: str) -> Transcript | None:
        replies = replies_for(self._script, protocol)
        key = protocol if replies is not None else "*"
        replies = replies if replies is not None else self._script.get("*")
        if replies is None:
            return None
        if key not in self._transcripts:
            self._transcripts[key] = Transcript(replies, label=f"{self._label} [{key}]")
        return self._transcripts[key]

    def __call__(self, request: ModelRequest) -> ModelResponse:
        protocol = self._protocol(request)
        transcript = self._transcript(protocol)
        if transcript is None:
            raise ConfigurationError(f"the script has no replies for the {protocol} protocol")
        return transcript(request)


def script_from_args(args: argparse.Namespace) -> dict[str, list[ScriptReply]] | None:
    """The replies ``--scripted FILE`` or ``--dry-run`` asks for; ``None`` for neither."""
    if getattr(args, "scripted", None):
        return load_script(Path(args.scripted))
    if getattr(args, "dry_run", False):
        return load_script(Path(__file__).with_name("dry_run.json"))
    return None
