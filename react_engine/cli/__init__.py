"""The ``react-engine`` command line: :func:`main`, the parser, one module per command."""

from .chat import ChatSession
from .commands import build_parser, main
from .endpoint import Endpoint
from .exits import EXIT_API, EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_NO_ANSWER
from .run import DEMO_QUESTION, demo_check

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
