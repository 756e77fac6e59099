"""Protocols: how a run talks to a model, behind one interface.

``base.py`` is the seam (:class:`Protocol`, :class:`RequestContext`, the ``Decision``
union), ``policy.py`` the rules every protocol shares, ``registry.py`` the registry and
the choice of a protocol per model, ``prompts.py`` the prompt templates, ``output.py`` the
typed final answer (the schema a protocol asks for, the check of what came); ``decision.py``
the vocabulary of a read reply (imported by the seam and the policy alike), ``shared.py``
what every protocol reads and renders one way. The shipped protocols are one module each
(``registry.py`` names them all): ``function_calling.py`` (native ``tools``/``tool_calls``),
``text.py`` (Thought/Action/Observation text), ``structured.py`` (one JSON object per
reply), and the smallest one, a template for your own. They load on first use, so that
the seam does not load them.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .function_calling import FunctionCallingProtocol
    from .structured import StructuredOutputProtocol
    from .text import TextReActProtocol

_LAZY = {
    "FunctionCallingProtocol": "function_calling",
    "StructuredOutputProtocol": "structured",
    "TextReActProtocol": "text",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["FunctionCallingProtocol", "StructuredOutputProtocol", "TextReActProtocol"]
