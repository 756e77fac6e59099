"""The ``react-engine`` command line: :func:`main`, the parser, one module per command."""

from .commands import build_parser, main

__all__ = ["build_parser", "main"]
