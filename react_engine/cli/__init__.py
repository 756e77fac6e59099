"""The ``react-engine`` command line.

* :mod:`.commands`: the argument parser (:func:`build_parser`), one function per command,
  and :func:`main`, the entry point (``main(argv) -> int``);
* :mod:`.demo`: the demo's question, tools, dry-run transcript and answer check;
* :mod:`.render`: how steps and results are printed on a terminal.
"""

from .commands import (
    EXIT_API,
    EXIT_BROKEN_PIPE,
    EXIT_CONFIG,
    EXIT_INTERRUPTED,
    EXIT_NO_ANSWER,
    ChatSession,
    Endpoint,
    build_parser,
    main,
)
from .demo import DEMO_QUESTION, demo_check

__all__ = [
    "DEMO_QUESTION",
    "EXIT_API",
    "EXIT_BROKEN_PIPE",
    "EXIT_CONFIG",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "ChatSession",
    "Endpoint",
    "build_parser",
    "demo_check",
    "main",
]
