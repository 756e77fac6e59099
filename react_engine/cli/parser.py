"""The ``react-engine`` argument parser: one subcommand per command module."""

from __future__ import annotations

import argparse

from ..version import __version__
from .chat import add_chat_parser
from .compare import add_compare_parser
from .eval import add_eval_parser
from .probe import add_probe_parser
from .run import add_demo_parser, add_run_parser
from .runs import add_runs_parser

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each command's parser sets ``handler(args) -> int``."""
    parser = argparse.ArgumentParser(
        prog="react-engine", description="ReAct agents over any OpenAI-compatible chat API."
    )
    parser.add_argument("--version", action="version", version=f"react-engine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_parser(sub)
    add_chat_parser(sub)
    add_demo_parser(sub)
    add_compare_parser(sub)
    add_eval_parser(sub)
    add_probe_parser(sub)
    add_runs_parser(sub)
    return parser
