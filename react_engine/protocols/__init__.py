"""Protocols: how a run talks to a model, behind one interface.

``base.py`` is the seam (:class:`Protocol`, :class:`RequestContext`, the ``Decision``
union), ``policy.py`` the rules every protocol shares, ``registry.py`` the registry and
the choice of a protocol per model, ``prompts.py`` the prompt templates, ``output.py`` the
typed final answer (the schema a protocol asks for, the check of what came); ``decision.py``
the vocabulary of a read reply (imported by the seam and the policy alike), ``shared.py``
what every protocol reads and renders one way. The shipped protocols are one module each,
and one registration each in ``registry.py``, which exports their classes from here:
``function_calling.py`` (native ``tools``/``tool_calls``), ``text.py``
(Thought/Action/Observation text), ``structured.py`` (one JSON object per reply), and
``minimal.py``, the smallest one, a template for your own. They load on first use, so that
the seam does not load them.
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
