"""Protocols: how a run talks to a model, behind one interface.

``base.py`` is the seam, ``policy.py`` the rules every protocol shares, ``registry.py`` the
choice of a protocol (docs/architecture.md lists the rest). The shipped protocols, one
module each, are exported from here through the registry and load on first use.
"""

from typing import TYPE_CHECKING, Any

from . import registry

if TYPE_CHECKING:  # what type checkers, which cannot read the registry, see
    from .function_calling import FunctionCallingProtocol as FunctionCallingProtocol
    from .minimal import MinimalProtocol as MinimalProtocol
    from .structured import StructuredOutputProtocol as StructuredOutputProtocol
    from .text import TextReActProtocol as TextReActProtocol


def __getattr__(name: str) -> Any:
    entry = registry.shipped().get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = entry.cls
    return entry.cls


if not TYPE_CHECKING:  # type checkers read the imports above instead
    __all__ = list(registry.shipped())
