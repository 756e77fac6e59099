"""Recorded replies of a BFCL run: ``--record`` writes them, ``--scripted`` replays them
(one ``<protocol>.json`` per protocol: the run's meta and each case's replies by id).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigurationError
from ..harness.report import json_text
from ..store.codec import VERSION, dump_reply, load_reply
from ..transport.base import ChatModel
from ..types import ModelRequest, ModelResponse

__all__ = [
    "DEFAULT_RECORDINGS",
    "Recorded",
    "RecordingModel",
    "default_recordings",
    "load_recording",
    "recorded_from_json",
    "recorded_json",
    "save_recording",
]

DEFAULT_RECORDINGS = Path(__file__).resolve().parents[2] / "fixtures" / "bfcl"
"""Where ``--scripted`` and ``--record`` look without a directory (in a source checkout)."""


def default_recordings(flag: str) -> Path:
    """:data:`DEFAULT_RECORDINGS`, or an error that says how to get them."""
    if DEFAULT_RECORDINGS.is_dir():
        return DEFAULT_RECORDINGS
    raise ConfigurationError(
        f"{flag} without DIR uses the recordings in a source checkout's fixtures/bfcl/, "
        f"and {DEFAULT_RECORDINGS} does not exist (an installed react-engine does not ship "
        f"them): run from a clone of the repository, or pass {flag} DIR"
    )


class RecordingModel(ChatModel):
    """Passes requests to a model and keeps the replies, for ``--record``."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.base_url = inner.base_url
        self.replies: list[ModelResponse] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        reply = await self.inner.complete(request)
        self.replies.append(reply)
        return reply


Recorded = ModelResponse | list[ModelResponse]
"""A case's recorded replies: one (an AST case), or every reply in order (multi-turn)."""


def recorded_json(value: Recorded) -> Any:
    """``value`` as the JSON a recording holds."""
    if isinstance(value, list):
        return [recorded_json(v) for v in value]
    reply = dump_reply(value)  # the store's fields, less those a recording leaves out
    kept = {k: reply[k] for k in ("content", "tool_calls", "reasoning", "finish_reason")}
    return kept | {"usage": {k: reply["usage"][k] for k in ("prompt_tokens", "completion_tokens")}}


def recorded_from_json(data: Any) -> Recorded:
    """The replies a recording's JSON holds."""
    if isinstance(data, list):
        return [cast("ModelResponse", recorded_from_json(v)) for v in data]
    usage = data.get("usage") or {}  # read as the store reads a reply; no totals recorded
    total = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    usage = usage | {"total_tokens": total, "requests": 1}
    return load_reply(data | {"usage": usage, "v": VERSION})


def save_recording(
    directory: Path, protocol: str, replies: Mapping[str, Recorded], meta: Mapping[str, Any]
) -> Path:
    """Write ``<protocol>.json``: the meta and each case's replies, keyed by case id."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{protocol}.json"
    body = {"meta": dict(meta), "replies": {k: recorded_json(v) for k, v in replies.items()}}
    path.write_text(json_text(body, indent=1), encoding="utf-8")
    return path


def load_recording(directory: Path, protocol: str) -> tuple[dict[str, Any], dict[str, Recorded]]:
    """The meta and the replies recorded for ``protocol`` in ``directory``."""
    path = directory / f"{protocol}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        replies = {k: recorded_from_json(v) for k, v in data["replies"].items()}
    except FileNotFoundError:
        raise ConfigurationError(
            f"no recorded {protocol} replies in {directory} (record them with --record)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"cannot read the recording {path}: {exc}") from None
    return dict(data.get("meta") or {}), replies
