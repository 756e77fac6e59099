"""Which protocol a run speaks, and how a run adapts when the server refuses something.

Two tables, read by the agent and nothing else:

* :data:`PROTOCOLS`, a name → factory registry. ``Agent(protocol="text")`` looks the name
  up here, ``"auto"`` asks :func:`choose`, and the CLI and the comparison list their
  choices from it. A new protocol is one module and one :func:`register` call (or one
  line in :func:`_builtin`).
* what to do when a server rejects a parameter: :func:`adapt` applies the row of
  :data:`~react_engine.transport.rejections.REACTIONS` (beside the classifier that names
  the parameter) to the run's capabilities and protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..transport.capabilities import Capabilities, RejectedParam
from ..transport.rejections import REACTIONS, Reaction
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
