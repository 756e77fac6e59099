"""Where the model is, for every command, and an API failure told as one line to act on.

``--dry-run`` and ``--scripted FILE`` answer from replies written in advance, per protocol,
with no server (not :mod:`react_engine.testing`'s doubles: the replies are the comparison's).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..compare.suite import ScriptReply, Transcript, load_script, replies_for
from ..errors import ConfigurationError, ModelAPIError
from ..protocols.registry import auto_order, registration
from ..testing import ScriptedModel
from ..transport.base import ChatModel
from ..transport.capabilities import Capabilities
from ..transport.endpoint import API_KEY_ENV, base_url_from
from ..transport.wire import mask_key, mask_url
from ..types import ModelRequest, ModelResponse
from .exits import one_line

__all__ = [
    "Endpoint",
    "ScriptedReplies",
    "describe_api_error",
    "endpoint",
    "local_endpoint",
]


class ScriptedReplies:
    """The replies for the protocol the agent runs (:func:`replies_for`), else the shared
    list (``"*"``). Under ``"auto"``, a request with ``tools`` is the native protocol's, one
    without the protocol ``"auto"`` falls back to."""

    def __init__(self, script: dict[str, list[ScriptReply]]) -> None:
        self._script = script
        self._transcripts: dict[str, Transcript] = {}
        self.protocol = "auto"
        """The protocol the agent was asked for (a structured request looks like a text one)."""

    def _protocol(self, request: ModelRequest) -> str:
        native = bool(request.tools)
        if self.protocol != "auto" and registration(self.protocol).native_calls == native:
            return self.protocol
        if native:
            return "function_calling"
        return auto_order(Capabilities(function_calling=False))[0]

    def __call__(self, request: ModelRequest) -> ModelResponse:
        protocol = self._protocol(request)
        replies = replies_for(self._script, protocol)
        key = protocol if replies is not None else "*"
        replies = replies if replies is not None else self._script.get("*")
        if replies is None:
            raise ConfigurationError(f"the script has no replies for the {protocol} protocol")
        if key not in self._transcripts:
            self._transcripts[key] = Transcript(replies, label=f"script [{key}]")
        return self._transcripts[key](request)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A chat model the CLI talks to: an API endpoint, the local server, or a script."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    key_env: str = API_KEY_ENV
    local: bool = False
    client: ChatModel | None = field(default=None, compare=False)
    """A scripted model in place of an endpoint."""
    replies: ScriptedReplies | None = field(default=None, compare=False)
    """The script behind ``client``, told which protocol the agent runs."""

    @property
    def where(self) -> str:
        if self.client is not None:
            return "scripted replies, no server"
        if self.local:
            return f"embedded local model at {self.base_url}"
        return mask_url(self.base_url) if self.base_url else "the default OpenAI endpoint"


def _configured(args: argparse.Namespace, *, strict: bool) -> Endpoint | None:
    """The endpoint given by flags or the environment; ``None`` when there is none.

    Without ``strict``, a key but no model name leaves the choice to the local model (a key
    alone is often set for other programs); a base URL without a model is always an error.
    """
    base_url = base_url_from(args.base_url)
    env = args.api_key_env or API_KEY_ENV
    key = os.environ.get(env) or None
    if args.api_key_env and key is None:
        raise ConfigurationError(f"--api-key-env {env}: the environment variable is not set")
    given = args.model[0] if isinstance(args.model, list) else args.model  # compare: a list
    flags = bool(args.base_url or given or args.api_key_env)
    model = given or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
    if not (base_url or key):
        if flags:
            raise ConfigurationError(
                "no endpoint: pass --base-url or set OPENAI_BASE_URL (and the API key in "
                "$OPENAI_API_KEY or --api-key-env NAME)"
            )
        return None
    if not model:
        if strict or flags or base_url:
            raise ConfigurationError(
                f"no model name for {mask_url(base_url) if base_url else 'the OpenAI API'}: "
                "pass --model or set REACT_ENGINE_MODEL (or --local for the embedded model)"
            )
        return None
    return Endpoint(model, base_url, key, env)


@contextlib.contextmanager
def endpoint(
    args: argparse.Namespace,
    *,
    local_default: bool = False,
    alternatives: str = ", use --local for the embedded model, or --dry-run",
) -> Iterator[Endpoint]:
    """The chat model a command talks to: the script, the endpoint configured, or the local one."""
    dry_run = Path(__file__).with_name("dry_run.json") if getattr(args, "dry_run", False) else None
    if script := getattr(args, "scripted", None) or dry_run:
        replies = ScriptedReplies(load_script(Path(script)))
        yield Endpoint(args.model or "scripted", client=ScriptedModel(replies), replies=replies)
        return
    if not args.local:
        configured = _configured(args, strict=not local_default)
        if configured is None and not local_default:
            raise ConfigurationError(
                "no endpoint: pass --base-url and --model (or set OPENAI_BASE_URL / "
                f"OPENAI_API_KEY and REACT_ENGINE_MODEL){alternatives}"
            )
        if configured is not None:
            yield configured
            return
    with local_endpoint(quiet=getattr(args, "quiet", False)) as ep:
        yield ep


@contextlib.contextmanager
def local_endpoint(*, quiet: bool = False) -> Iterator[Endpoint]:
    """The embedded llama.cpp model, started for the block and stopped after it."""
    from ..local import local_server

    if not quiet:
        print(
            ">> starting the embedded SmolLM2-135M model on 127.0.0.1 (a few seconds)...",
            file=sys.stderr,
            flush=True,
        )
    with local_server() as local:
        if not quiet:
            print(f">> local server ready at {local.base_url}", file=sys.stderr, flush=True)
        yield Endpoint(local.model, local.base_url, local.api_key, local=True)


def describe_api_error(exc: ModelAPIError, ep: Endpoint | None, model: str | None) -> str:
    """One line that says what the user can do about an API failure."""
    log_path = getattr(exc, "log_path", None)
    where = ep.where if ep is not None else "the server"
    detail = one_line(exc.body or str(exc), 200)
    status = exc.status_code
    if log_path is not None:  # the local server did not start
        text = f"{one_line(str(exc).splitlines()[0])} (server log: {log_path})"
    elif status in (401, 403):
        key = f"${ep.key_env} = {mask_key(ep.api_key)}" if ep is not None else "the API key"
        text = f"{where} rejected the API key ({key}): HTTP {status}: {detail}"
    elif status == 404:
        text = f"{where} does not know model {model!r} (HTTP 404: {detail}); "
        text += "check --model and --base-url"
    elif status is None and str(exc).startswith("cannot reach"):
        text = f"cannot reach {where}: is the server running? ({one_line(str(exc), 200)})"
    else:
        text = one_line(str(exc))
    return text + "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
