"""The CLI's scripted model: ``--dry-run`` (the demo's canned transcript) and ``--scripted
FILE`` answer from replies written in advance, per protocol, with no server.

Beside the library's test doubles (:mod:`react_engine.testing`) rather than in them: the
replies are the comparison's (:class:`~react_engine.compare.suite.Transcript`, with usage
estimated from each request), and the library's doubles do not depend on the comparison.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..compare.suite import ScriptReply, Transcript, load_script
from ..errors import ConfigurationError
from ..types import ModelRequest, ModelResponse
from .demo import DRY_RUN_SCRIPT

__all__ = ["ScriptedReplies", "script_from_args"]


class ScriptedReplies:
    """The scripted model's replies per protocol: a request with ``tools`` is answered from
    the function-calling list, one without from the text list, or from the structured list
    when the agent runs that protocol (or from one shared list)."""

    def __init__(self, script: dict[str, list[ScriptReply]], label: str) -> None:
        self._transcripts = {k: Transcript(v, label=f"{label} [{k}]") for k, v in script.items()}
        self.protocol = "auto"
        """The protocol the agent was asked for (a structured request looks like a text one)."""

    def __call__(self, request: ModelRequest) -> ModelResponse:
        protocol = "function_calling" if request.tools else "text"
        if protocol == "text" and self.protocol == "structured":
            protocol = "structured"
        transcript = self._transcripts.get(protocol) or self._transcripts.get("*")
        if transcript is None:
            raise ConfigurationError(f"the script has no replies for the {protocol} protocol")
        return transcript(request)


def script_from_args(args: argparse.Namespace) -> dict[str, list[ScriptReply]] | None:
    """The replies ``--scripted FILE`` or ``--dry-run`` asks for; ``None`` for neither."""
    if getattr(args, "scripted", None):
        return load_script(Path(args.scripted))
    if getattr(args, "dry_run", False):
        return {k: [ScriptReply.model_validate(r) for r in v] for k, v in DRY_RUN_SCRIPT.items()}
    return None
