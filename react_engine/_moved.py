"""The module paths of before the layout by layer (the flat modules of 0.x), kept working.

``import react_engine.loop`` (or ``from react_engine.model import ChatModel``, or
``mock.patch("react_engine.protocol.X")``) gives the very module object of the new path,
``react_engine.run.loop``, with a :class:`DeprecationWarning` naming that path: a patch
through the old path patches the real module. A finder placed first on
:data:`sys.meta_path` answers for the old names only; it imports nothing until one of
them is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED = {
    "agent": "run.agent",
    "loop": "run.loop",
    "state": "run.state",
    "execution": "run.execution",
    "_running": "run._running",
    "events": "run.events",
    "tracing": "run.tracing",
    "tracefile": "run.tracefile",
    "observations": "run.observations",
    "output": "protocols.output",
    "config": "run.config",
    "protocol": "protocols.base",
    "policy": "protocols.policy",
    "selection": "protocols.registry",
    "prompts": "protocols.prompts",
    "model": "transport.model",
    "streaming": "transport.streaming",
    "capabilities": "transport.capabilities",
    "grammar": "transport.grammar",
    "probe": "transport.probe",
    "mcp": "tools.mcp",
    "_schema_check": "tools._schema_check",
    "_nesting": "tools._nesting",
}
"""Old module (under ``react_engine``) → its new path (under ``react_engine``)."""

_PACKAGE = __name__.rpartition(".")[0]


def new_path(old: str) -> str | None:
    """The new full name of the moved module ``old`` (a full name), or ``None``."""
    package, _, name = old.rpartition(".")
    if package != _PACKAGE or name not in MOVED:
        return None
    return f"{_PACKAGE}.{MOVED[name]}"


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new path: the same object, not a copy."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system wrote the alias's spec on the module: give it back its own.
        module.__spec__ = self.spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there",
            DeprecationWarning,
            stacklevel=2,  # the importing frame: warnings skips importlib's own frames
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once): before the path finder, which
    would find the ``prompts`` data directory of an installed wheel as a namespace."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
