"""How a command ends: its exit codes, and the error that leaves ``main`` with one line."""

from __future__ import annotations

from ..errors import ReactEngineError

__all__ = [
    "EXIT_API",
    "EXIT_BROKEN_PIPE",
    "EXIT_CONFIG",
    "EXIT_INTERRUPTED",
    "EXIT_NO_ANSWER",
    "Exit",
    "one_line",
]

EXIT_CONFIG = 2
EXIT_NO_ANSWER = 3
EXIT_API = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a process the broken pipe would have killed."""


class Exit(ReactEngineError):
    """Leave ``main`` with one line on stderr and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
