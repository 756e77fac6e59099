"""Which protocol a run speaks, and how a run adapts when the server refuses something.

Two tables, read by the agent and nothing else:

* :data:`PROTOCOLS`, a name → factory registry. ``Agent(protocol="text")`` looks the name
  up here, ``"auto"`` asks :func:`choose`, and the CLI and the comparison list their
  choices from it. A new protocol is one module and one :func:`register` call (or one
  line in :func:`_builtin`).
* :data:`REACTIONS`, what to do when a server rejects a parameter
  (:func:`~react_engine.transport.capabilities.classify_rejection` names it): the capability to turn
  off and remember, the protocol to switch to, and the event the trace shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigurationError
from ..transport.capabilities import Capabilities, RejectedParam
from .base import Protocol

__all__ = [
    "PROTOCOLS",
    "REACTIONS",
    "Adaptation",
    "ProtocolOptions",
    "Reaction",
    "adapt",
    "choose",
    "protocol_names",
    "register",
]


@dataclass(frozen=True, slots=True)
class ProtocolOptions:
    """What a factory may use to build its protocol for one model."""

    capabilities: Capabilities
    template: str | None = None
    """The text template the user asked for; ``None`` lets the registry choose."""
    implicit_final_answer: bool = False


ProtocolFactory = Callable[[ProtocolOptions], Protocol]

PROTOCOLS: dict[str, ProtocolFactory] = {}
"""Every protocol ``Agent(protocol=...)`` accepts by name, in the order they are listed."""


def register(name: str, factory: ProtocolFactory) -> None:
    """Make ``factory`` available as ``Agent(protocol=name)`` (a later call replaces it)."""
    if not name or name == "auto":
        raise ConfigurationError(f"{name!r} cannot name a protocol")
    PROTOCOLS[name] = factory


def protocol_names() -> tuple[str, ...]:
    """The names ``Agent(protocol=...)`` accepts, ``"auto"`` first."""
    return ("auto", *PROTOCOLS)


def build(name: str, options: ProtocolOptions) -> Protocol:
    factory = PROTOCOLS.get(name)
    if factory is None:
        known = ", ".join(repr(n) for n in protocol_names())
        raise ConfigurationError(
            f"unknown protocol {name!r}: use one of {known} or a Protocol instance"
        )
    return factory(options)


def choose(spec: str | Protocol, options: ProtocolOptions, why: str) -> tuple[Protocol, str]:
    """The protocol for ``spec`` (a name, ``"auto"`` or an instance), and the reason.

    ``"auto"`` takes native function calling where the capabilities say the model has it,
    and the text protocol elsewhere; ``why`` is the capability lookup's own reason.
    """
    if isinstance(spec, Protocol):
        return spec, "explicit"
    if spec != "auto":
        return build(spec, options), "explicit"
    name = "function_calling" if options.capabilities.function_calling else "text"
    return build(name, options), why


# --- reacting to rejections ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reaction:
    """What a run does when the server rejects one kind of parameter."""

    capability: str
    """The :class:`Capabilities` flag to set for this run and remember for the model."""
    event: str
    """For the trace and the log; ``{model}`` and ``{url}`` are filled in."""
    switch_to: str | None = None
    """The protocol to continue with, when the rejection rules out the current one."""
    only_from: str | None = None
    """Apply only while this protocol runs (and the user let the agent choose)."""
    value: bool = False
    """What the flag becomes: off for a rejected parameter, on for a required one."""


REACTIONS: Final[Mapping[RejectedParam, Reaction]] = {
    "tools": Reaction(
        "function_calling",
        "fallback: {model} at {url} rejected tools; switched to the text protocol",
        switch_to="text",
        only_from="function_calling",
    ),
    "stop": Reaction("stop", "stop sequences rejected; cutting replies client-side"),
    "constrained_decoding": Reaction(
        "constrained_decoding",
        "constrained decoding rejected by {model} at {url}; "
        "sending requests without a grammar or schema",
    ),
    "tool_choice": Reaction(
        "tool_choice_required", "tool_choice rejected; enforcing it client-side"
    ),
    "parallel_tool_calls": Reaction("parallel_tool_calls", "parallel_tool_calls rejected"),
    "temperature": Reaction("sampling", "temperature rejected by {model}; sending none"),
    "reasoning_content": Reaction(
        "reasoning_echo", "reasoning_content rejected by {model} at {url}; not sending it back"
    ),
    "reasoning_content_missing": Reaction(
        "reasoning_echo",
        "{model} at {url} wants its reasoning_content back on tool-call turns; sending it",
        value=True,
    ),
    "stream_tools": Reaction(
        "stream_tools",
        "{model} at {url} sent an empty stream for a request with tools; "
        "sending such requests without streaming",
    ),
}
"""One row per parameter a server may reject (``stream_tools``: ``stream=True`` beside
``tools``, refused with HTTP 200 and no chunk, which the loop sees, not the classifier)."""


@dataclass(frozen=True, slots=True)
class Adaptation:
    """A rejection's consequences for the run: new capabilities, maybe a new protocol."""

    capabilities: Capabilities
    learned: dict[str, bool]
    """What to remember for this model at this endpoint."""
    event: str
    protocol: Protocol | None = None
    protocol_reason: str | None = None


def adapt(
    kind: RejectedParam,
    *,
    current: Protocol,
    spec: str | Protocol,
    options: ProtocolOptions,
    model: str,
    url: str | None,
) -> Adaptation | None:
    """How to go on after the server rejected ``kind``, or ``None`` when nothing helps (the
    capability is already off, or the user fixed the protocol that needs it)."""
    reaction = REACTIONS[kind]
    caps = options.capabilities
    if getattr(caps, reaction.capability) == reaction.value:
        return None
    if reaction.only_from is not None and (current.name != reaction.only_from or spec != "auto"):
        return None
    learned: dict[str, Any] = {reaction.capability: reaction.value}
    caps = dataclasses.replace(caps, **learned)
    adaptation = Adaptation(
        capabilities=caps,
        learned={reaction.capability: reaction.value},
        event=reaction.event.format(model=model, url=url),
    )
    if reaction.switch_to is None:
        return adaptation
    switched = build(reaction.switch_to, dataclasses.replace(options, capabilities=caps))
    return dataclasses.replace(
        adaptation,
        protocol=switched,
        protocol_reason=f"fallback: the server rejected {kind}",
    )


def _builtin() -> None:
    """The shipped protocols, one line each; a protocol's module (and its parser) is
    imported when a run first builds it."""

    def function_calling(o: ProtocolOptions) -> Protocol:
        from .function_calling import FunctionCallingProtocol

        return FunctionCallingProtocol()

    def text(o: ProtocolOptions) -> Protocol:
        from .text import TextReActProtocol

        return TextReActProtocol(
            template=o.template or o.capabilities.text_template,
            implicit_final_answer=o.implicit_final_answer,
        )

    def structured(o: ProtocolOptions) -> Protocol:
        from .structured import StructuredOutputProtocol

        return StructuredOutputProtocol()

    register("function_calling", function_calling)
    register("text", text)
    register("structured", structured)


_builtin()
