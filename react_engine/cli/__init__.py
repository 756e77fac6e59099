"""The ``react-engine`` command line: :func:`main` (:mod:`.commands`), the parser
(:mod:`.parser`, shared options in :mod:`.options`), one module per command, and what they
share (:mod:`.agents`, :mod:`.endpoint`, :mod:`.progress`, :mod:`.render`, :mod:`.scripted`,
:mod:`.demo`)."""

from .commands import ChatSession, Endpoint, build_parser, main
from .demo import DEMO_QUESTION, demo_check
from .exits import EXIT_API, EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_NO_ANSWER

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
