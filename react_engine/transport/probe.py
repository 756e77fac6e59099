"""What an endpoint really does with tools: one tiny request, and what came back.

:func:`aprobe` asks the model to call one tool by name, with a ``stop`` sequence, and
sees whether the call came back native, written as text, ignored or rejected, whether
``stop`` is honoured and whether the call was constrained to its schema;
:meth:`ProbeResult.overrides` is what it records in the capability cache
(docs/capability-cache.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from ..errors import ModelRequestError, ModelUnavailableError
from ..parsing.salvage import read_salvaged
from ..tools.timeouts import within
from ..types import ModelRequest, ModelSettings, SystemMessage, UserMessage
from .base import ChatModel
from .rejections import classify_rejection
from .wire import mask_url

__all__ = ["PROBE_TIMEOUT", "PROBE_TOOL", "ProbeResult", "aprobe"]

PROBE_TIMEOUT = 60.0
"""Seconds the whole probe (one to three requests of 64 tokens) may take by default."""

PROBE_TOOL = "report_color"
"""The tool the probe asks for: one argument, constrained to one value."""

_COLOR = "blue"
_STOP = "<<END-OF-PROBE>>"
_SCHEMA = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL,
        "description": "Report a color.",
        "parameters": {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": [_COLOR]}},
            "required": ["color"],
            "additionalProperties": False,
        },
    },
}


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one endpoint and model did with the probe request."""

    model: str
    base_url: str
    """The endpoint, its credentials masked (:func:`~react_engine.transport.wire.mask_url`)."""
    tools: Literal["native", "written", "ignored", "rejected"]
    """``native``: the call came back in ``tool_calls``; ``written``: as text in a native
    format (:attr:`call_format`); ``ignored``: no call at all; ``rejected``: HTTP 4xx."""
    stop: bool
    """The server took the ``stop`` parameter (and the reply does not run past it)."""
    constrained: bool | None
    """The named call came back with exactly the arguments the schema allows (``None``:
    no native call to judge)."""
    call_format: str = ""
    """The format a written call was read in (``hermes``, ``glm45``...)."""
    requests: int = 1
    notes: list[str] = field(default_factory=list)

    def overrides(self) -> dict[str, bool]:
        """The capabilities this result establishes, as cache overrides (a server that did
        not constrain the call is left as the registry says)."""
        out = {"function_calling": self.tools == "native", "stop": self.stop}
        if self.constrained:
            out["constrained_decoding"] = True
        return out

    def summary(self) -> str:
        lines = [
            f"model:        {self.model}",
            f"endpoint:     {self.base_url or '(default)'}",
            f"tool calls:   {self.tools}"
            + (f" (format {self.call_format})" if self.call_format else ""),
            f"stop:         {'accepted' if self.stop else 'not honoured'}",
            "constrained:  "
            + {True: "yes", False: "no", None: "unknown (no native call)"}[self.constrained],
            f"requests:     {self.requests}",
        ]
        lines.extend(f"note:         {note}" for note in self.notes)
        return "\n".join(lines)


def _request(model: str, *, stop: bool, named: bool, timeout: float | None = None) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=(
            SystemMessage("You are a test harness. Use the tool you are given."),
            UserMessage(f"Call {PROBE_TOOL} with color {_COLOR}. Do not answer in text."),
        ),
        tools=(_SCHEMA,),
        tool_choice=PROBE_TOOL if named else "auto",
        stop=(_STOP,) if stop else None,
        settings=ModelSettings(temperature=0.0, max_tokens=64, timeout=timeout),
    )


async def aprobe(
    chat_model: ChatModel, model: str, *, timeout: float | None = PROBE_TIMEOUT
) -> ProbeResult:
    """Send the probe request (again without a parameter the server rejected, at most
    twice more) and judge the reply; a client error that is not a rejection of ``tools``
    is raised. Past ``timeout`` seconds in all: :class:`ModelUnavailableError`."""
    from ..runtime import DeadlinePassed  # a coroutine's import: the loop has loaded asyncio

    base_url = mask_url(chat_model.base_url)  # shown, and kept in the cache: no credentials
    probing = _probe(chat_model, model, base_url, timeout)
    try:
        return await (probing if timeout is None else within(probing, timeout))
    except DeadlinePassed:
        raise ModelUnavailableError(
            f"the probe got no reply from {base_url or 'the endpoint'} within {timeout:g} s"
        ) from None


async def _probe(
    chat_model: ChatModel, model: str, base_url: str, timeout: float | None
) -> ProbeResult:
    stop, named, requests = True, True, 0
    notes: list[str] = []
    while True:
        requests += 1
        try:
            reply = await chat_model.complete(
                _request(model, stop=stop, named=named, timeout=timeout)
            )
        except ModelRequestError as exc:
            kind = classify_rejection(exc.status_code, exc.body or "")
            if kind == "stop" and stop and requests < 3:
                stop = False
                notes.append("the server rejected 'stop'")
                continue
            if kind == "tool_choice" and named and requests < 3:
                named = False
                notes.append("the server rejected a named tool_choice")
                continue
            if kind != "tools":
                raise  # a wrong key, an unknown model...: nothing learned about tools
            notes.append(f"HTTP {exc.status_code}: {(exc.body or str(exc))[:200]}")
            return ProbeResult(model, base_url, "rejected", stop, None, "", requests, notes)
        break
    content = reply.content or ""
    if stop and _STOP in content:
        stop = False
        notes.append("the reply ran past the stop sequence")
    if reply.tool_calls:
        call = reply.tool_calls[0]
        try:
            exact = json.loads(call.arguments or "") == {"color": _COLOR}
        except (ValueError, RecursionError):
            exact = False
        constrained = call.name == PROBE_TOOL and exact
        return ProbeResult(model, base_url, "native", stop, constrained, "", requests, notes)
    written = read_salvaged(content, [PROBE_TOOL]).calls
    if written:
        fmt = written[0].format
        notes.append("the call came back as text: the server has no tool parser for it")
        return ProbeResult(model, base_url, "written", stop, None, fmt, requests, notes)
    if content.strip():
        notes.append(f"answered in text: {content.strip()[:120]!r}")
    return ProbeResult(model, base_url, "ignored", stop, None, "", requests, notes)
