"""Which protocol a run speaks, and how a run adapts when the server refuses something.

* :data:`PROTOCOLS`: one :class:`Registration` per name; everything that names a
  protocol (``Agent``, the CLI, the comparison, the evaluation) reads it, so a protocol
  registered later is accepted everywhere.
* :func:`adapt` applies a row of :data:`~react_engine.transport.rejections.REACTIONS` when
  a server rejects a parameter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from ..errors import ConfigurationError
from ..transport.capabilities import Capabilities, RejectedParam
from ..transport.rejections import REACTIONS
from .base import Protocol

__all__ = [
    "PROTOCOLS",
    "Adaptation",
    "ProtocolOptions",
    "Registration",
    "ScriptStep",
    "adapt",
    "auto_order",
    "choose",
    "protocol_names",
    "register",
    "registration",
    "shipped",
]


@dataclass(frozen=True, slots=True)
class ProtocolOptions:
    """What a factory may use to build its protocol for one model."""

    capabilities: Capabilities
    template: str | None = None
    """The text template the user asked for; ``None`` lets the registry choose."""
    implicit_final_answer: bool = False


@dataclass(frozen=True, slots=True)
class ScriptStep:
    """One model reply in no protocol's format, for scripted runs: a thought, then calls
    (``(tool, arguments)``, arguments an object or text) or a final answer."""

    thought: str | None = None
    calls: tuple[tuple[str, Mapping[str, Any] | str], ...] = ()
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Registration:
    """Everything the package knows of one protocol (``.cls.from_options`` builds it)."""

    name: str
    protocol: type[Protocol] | str
    """The class, or ``"package.module:Class"``, imported on first use (a light import)."""
    auto: int | None = None
    """Its rank in ``"auto"``'s choice (highest first); ``None``: never chosen."""
    requires: str | None = None
    """The ``Capabilities`` flag ``"auto"`` needs on to choose it; when the server rejects
    it, an ``"auto"`` run falls back to the next protocol in :func:`auto_order`."""
    native_calls: bool = False
    """Whether its requests carry the tools natively."""

    @property
    def cls(self) -> type[Protocol]:
        """The protocol's class (its module imported now if it was registered by path)."""
        if not isinstance(self.protocol, str):
            return self.protocol
        module, _, name = self.protocol.partition(":")
        try:
            found = getattr(import_module(module), name, None)
        except ImportError as exc:
            raise ConfigurationError(f"protocol {self.name!r}: cannot import {module}") from exc
        if not (isinstance(found, type) and issubclass(found, Protocol)):
            raise ConfigurationError(f"{self.protocol!r} names no Protocol class")
        return found

    def scripted(self, replies: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A scripted transcript in the native format, written in this protocol's format."""
        out: list[dict[str, Any]] = []
        for reply in replies:
            calls = tuple(
                (c["name"], c.get("arguments", {})) for c in reply.get("tool_calls") or ()
            )
            content = reply.get("content")
            step = ScriptStep(content, calls) if calls else ScriptStep(answer=content or "")
            out += self.cls.script(step)
        return out


PROTOCOLS: dict[str, Registration] = {}
"""Every protocol ``Agent(protocol=...)`` accepts by name, in the order they are listed."""


def register(
    protocol: type[Protocol] | str,
    *,
    name: str | None = None,
    auto: int | None = None,
    requires: str | None = None,
    native_calls: bool = False,
) -> Registration:
    """Make the ``protocol`` class (or its ``"module:Class"``) available as
    ``Agent(protocol=name)``; ``name`` defaults to the class's ``name`` (a later call
    replaces it). See :class:`Registration` for the rest."""
    if name is None:
        if isinstance(protocol, str):
            raise ConfigurationError(f"a protocol registered by path ({protocol!r}) needs a name")
        name = protocol.name
    if isinstance(protocol, str) and not all(protocol.partition(":")[::2]):
        raise ConfigurationError(f"{protocol!r} is not a path like 'package.module:Class'")
    if not isinstance(protocol, str) and not (
        isinstance(protocol, type) and issubclass(protocol, Protocol)
    ):
        raise ConfigurationError(f"{protocol!r} is not a Protocol class")
    if not name or name == "auto":
        raise ConfigurationError(f"{name!r} cannot name a protocol")
    if requires is not None and not isinstance(getattr(Capabilities(), requires, None), bool):
        raise ConfigurationError(f"{requires!r} is not a capability flag")
    entry = Registration(name, protocol, auto, requires, native_calls)
    PROTOCOLS[name] = entry
    return entry


def registration(name: str) -> Registration:
    """The registry's entry for ``name``; :class:`ConfigurationError` for an unknown one."""
    entry = PROTOCOLS.get(name) if isinstance(name, str) else None
    if entry is None:
        known = ", ".join(repr(n) for n in protocol_names())
        raise ConfigurationError(
            f"unknown protocol {name!r}: use one of {known} or a Protocol instance"
        )
    return entry


def protocol_names() -> tuple[str, ...]:
    """The names ``Agent(protocol=...)`` accepts, ``"auto"`` first."""
    return ("auto", *PROTOCOLS)


def auto_order(capabilities: Capabilities) -> list[str]:
    """The protocols ``"auto"`` may choose for ``capabilities``, best first."""
    order = [e for e in PROTOCOLS.values() if e.auto is not None]
    order.sort(key=lambda e: -(e.auto or 0))  # stable: registration order breaks ties
    return [e.name for e in order if e.requires is None or getattr(capabilities, e.requires, False)]


def choose(spec: str | Protocol, options: ProtocolOptions, why: str) -> tuple[Protocol, str]:
    """The protocol for ``spec`` (a name, ``"auto"`` or an instance), and the reason
    (``why``, the capability lookup's, for ``"auto"``)."""
    if isinstance(spec, Protocol):
        return spec, "explicit"
    if spec != "auto":
        return registration(spec).cls.from_options(options), "explicit"
    order = auto_order(options.capabilities)
    if not order:
        raise ConfigurationError('no registered protocol can be chosen by protocol="auto"')
    return registration(order[0]).cls.from_options(options), why


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
    requires = getattr(PROTOCOLS.get(current.name), "requires", None)
    if reaction.switch and (spec != "auto" or requires != reaction.capability):
        return None
    learned: dict[str, Any] = {reaction.capability: reaction.value}
    caps = dataclasses.replace(caps, **learned)
    if not reaction.switch:
        return Adaptation(caps, learned, reaction.event.format(model=model, url=url, protocol=None))
    order = auto_order(caps)
    if not order:
        return None
    event = reaction.event.format(model=model, url=url, protocol=order[0])
    options = dataclasses.replace(options, capabilities=caps)
    switched = registration(order[0]).cls.from_options(options)
    return Adaptation(caps, learned, event, switched, f"fallback: the server rejected {kind}")


_AT = f"{__package__}."


def shipped() -> dict[str, Registration]:
    """The shipped protocols by class name (read without importing their modules): what
    ``react_engine.protocols`` exports."""
    paths = {str(e.protocol): e for e in PROTOCOLS.values()}
    return {path.rpartition(":")[2]: e for path, e in paths.items() if path.startswith(_AT)}


register(_AT + "function_calling:FunctionCallingProtocol", name="function_calling", auto=30,
         requires="function_calling", native_calls=True)  # fmt: skip
register(_AT + "text:TextReActProtocol", name="text", auto=20)
register(_AT + "structured:StructuredOutputProtocol", name="structured")
register(_AT + "minimal:MinimalProtocol", name="minimal", auto=10)
