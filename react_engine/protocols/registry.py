"""Which protocol a run speaks, and how a run adapts when the server refuses something.

* :data:`PROTOCOLS`: one :class:`Registration` per name (its class, the kind of prompt
  template it reads, its rank in ``"auto"``'s choice). ``Agent(protocol="text")`` looks
  the name up here, ``"auto"`` asks :func:`choose`, and the CLI, the comparison and the
  evaluation list their choices from it, so a protocol registered later (one class, one
  :func:`register` call) is accepted everywhere.
* :func:`adapt` applies a row of :data:`~react_engine.transport.rejections.REACTIONS` to
  the run's capabilities and protocol when a server rejects a parameter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
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
    """One model reply in no protocol's format, for scripted runs: a thought, then either
    calls (``(tool, arguments)`` pairs: an object, or the argument text as a model sent it)
    or a final answer. :meth:`Protocol.script <react_engine.protocols.base.Protocol.script>`
    writes it the way a model speaking that protocol would."""

    thought: str | None = None
    calls: tuple[tuple[str, Mapping[str, Any] | str], ...] = ()
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Registration:
    """Everything the package knows of one protocol, by name. Calling it builds the
    protocol (``PROTOCOLS[name](options)``: the class's :meth:`Protocol.from_options
    <react_engine.protocols.base.Protocol.from_options>`)."""

    name: str
    protocol: type[Protocol] | str
    """The class, or where it lives (``"package.module:Class"``), imported when a run first
    builds it: how the shipped protocols keep ``import react_engine`` light."""
    template_kind: str | None = None
    """The ``kind`` of the prompt templates it reads (one of
    :data:`react_engine.protocols.prompts.TEMPLATE_KINDS`), or ``None`` when it reads none."""
    auto: int | None = None
    """Its rank in ``"auto"``'s choice (highest first), ``None`` when ``"auto"`` never
    chooses it."""
    requires: str | None = None
    """The :class:`~react_engine.transport.capabilities.Capabilities` flag ``"auto"`` needs on to
    choose it (``"function_calling"``); when the server turns out to reject it, a run
    that ``"auto"`` started falls back to the next protocol in :func:`auto_order`."""
    native_calls: bool = False
    """Whether its requests carry the tools natively (a scripted reply to them may hold
    ``tool_calls``)."""

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

    @property
    def class_name(self) -> str:
        """The class's name, read without importing its module."""
        if isinstance(self.protocol, str):
            return self.protocol.rpartition(":")[2]
        return self.protocol.__name__

    def __call__(self, options: ProtocolOptions) -> Protocol:
        return self.cls.from_options(options)

    def scripted(self, replies: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A scripted transcript in the native format (``content``, ``tool_calls``),
        written in this protocol's format (its :meth:`Protocol.script
        <react_engine.protocols.base.Protocol.script>`): how the demo and the comparison
        script a protocol their files do not name."""
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
    template_kind: str | None = None,
    auto: int | None = None,
    requires: str | None = None,
    native_calls: bool = False,
) -> Registration:
    """Make the ``protocol`` class (or the ``"module:Class"`` that holds it) available as
    ``Agent(protocol=name)``, everywhere a protocol is named; ``name`` defaults to the
    class's :attr:`~react_engine.protocols.base.Protocol.name` (a later call replaces it).
    See :class:`Registration` for the rest."""
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
    if template_kind is not None:
        from .prompts import TEMPLATE_KINDS

        if template_kind not in TEMPLATE_KINDS:
            raise ConfigurationError(f"{template_kind!r} is not a kind of prompt template")
    entry = Registration(name, protocol, template_kind, auto, requires, native_calls)
    PROTOCOLS[name] = entry
    return entry


def registration(name: str) -> Registration:
    """The registry's entry for ``name``; :class:`ConfigurationError` for an unknown one."""
    entry = PROTOCOLS.get(name)
    if entry is None:
        known = ", ".join(repr(n) for n in protocol_names())
        raise ConfigurationError(
            f"unknown protocol {name!r}: use one of {known} or a Protocol instance"
        )
    return entry


def protocol_names() -> tuple[str, ...]:
    """The names ``Agent(protocol=...)`` accepts, ``"auto"`` first (read when called: a
    protocol registered later is in it)."""
    return ("auto", *PROTOCOLS)


def auto_order(capabilities: Capabilities) -> list[str]:
    """The protocols ``"auto"`` may choose for a model with ``capabilities``, best first:
    the registered ones with an :attr:`~Registration.auto` rank whose required capability
    holds."""
    ranked = [
        e
        for e in PROTOCOLS.values()
        if e.auto is not None and (e.requires is None or getattr(capabilities, e.requires, False))
    ]
    ranked.sort(key=lambda e: -(e.auto or 0))  # stable: registration order breaks ties
    return [e.name for e in ranked]


def choose(spec: str | Protocol, options: ProtocolOptions, why: str) -> tuple[Protocol, str]:
    """The protocol for ``spec`` (a name, ``"auto"`` or an instance), and the reason.

    ``"auto"`` takes the first of :func:`auto_order` (native function calling where the
    capabilities say the model has it, the text protocol elsewhere); ``why`` is the
    capability lookup's own reason.
    """
    if isinstance(spec, Protocol):
        return spec, "explicit"
    if spec != "auto":
        return registration(spec)(options), "explicit"
    order = auto_order(options.capabilities)
    if not order:
        raise ConfigurationError('no registered protocol can be chosen by protocol="auto"')
    return registration(order[0])(options), why


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
    if reaction.only_from is not None and (
        spec != "auto" or not _runs_on(current, reaction.only_from, reaction.capability)
    ):
        return None
    learned: dict[str, Any] = {reaction.capability: reaction.value}
    caps = dataclasses.replace(caps, **learned)
    target = reaction.switch_to
    if target == "auto":
        order = auto_order(caps)
        if not order:
            return None
        target = order[0]
    event = reaction.event.format(model=model, url=url, protocol=target)
    if target is None:
        return Adaptation(caps, learned, event)
    switched = registration(target)(dataclasses.replace(options, capabilities=caps))
    return Adaptation(caps, learned, event, switched, f"fallback: the server rejected {kind}")


def _runs_on(current: Protocol, only_from: str, capability: str) -> bool:
    """Whether ``current`` is the protocol a reaction's ``only_from`` names: by name, or
    (``"auto"``) any registered protocol that requires the rejected capability."""
    if only_from != "auto":
        return current.name == only_from
    return getattr(PROTOCOLS.get(current.name), "requires", None) == capability


def shipped() -> dict[str, Registration]:
    """The shipped protocols (registered by a path in this package) by class name
    (``"MinimalProtocol"``): what ``react_engine`` and ``react_engine.protocols`` export,
    their modules imported on first use (:attr:`Registration.cls`)."""
    here = f"{__package__}."
    return {e.class_name: e for e in PROTOCOLS.values() if str(e.protocol).startswith(here)}


def _builtin() -> None:
    """The shipped protocols, one line each (``"auto"`` takes the highest rank whose
    required capability holds)."""
    at = f"{__package__}."
    register(at + "function_calling:FunctionCallingProtocol", name="function_calling",
             template_kind="function_calling", auto=30, requires="function_calling",
             native_calls=True)  # fmt: skip
    register(at + "text:TextReActProtocol", name="text", template_kind="text", auto=20)
    register(at + "structured:StructuredOutputProtocol", name="structured", template_kind="structured")  # fmt: skip  # noqa: E501
    register(at + "minimal:MinimalProtocol", name="minimal", auto=10)


_builtin()
