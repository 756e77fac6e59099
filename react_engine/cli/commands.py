"""The ``react-engine`` command line, as ``main(argv) -> int`` (docs/cli.md)."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

from ..errors import ModelAPIError, ReactEngineError, UserError
from ..run.state import RUN_EVENT
from ..version import __version__
from .chat import add_chat_parser
from .compare import add_compare_parser
from .endpoint import describe_api_error
from .eval import add_eval_parser
from .exits import EXIT_API, EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED, Exit, one_line
from .probe import add_probe_parser
from .run import add_demo_parser, add_run_parser
from .runs import add_runs_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (never raises for a user's mistake).

    With ``argv=None`` this is the whole process: a reader that went away ends it quietly
    with 141, and Ctrl-C at once with 130, without waiting for a worker thread.
    """
    process = argv is None
    try:
        with _warnings_on_stderr():
            code = _main(argv, process=process)
        if process:
            sys.stdout.flush()  # a pipe's buffer: a closed reader shows up here
    except BrokenPipeError:  # the reader went away: the rest goes to /dev/null (no complaint)
        code = EXIT_BROKEN_PIPE
        if process:
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
    if process and code == EXIT_INTERRUPTED:
        _exit_now(code)
    return code


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """While the CLI runs, the library's warnings go to stderr, one ``warning:`` line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    # Not the warnings that are also a run's events (printed with the steps).
    handler.addFilter(lambda record: not any(getattr(record, k, False) for k in RUN_EVENT))
    logger = logging.getLogger("react_engine")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _exit_now(code: int) -> None:
    """Leave now: a worker thread blocked on a request or a tool would hold the exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _ignore_sigint() -> None:
    """A second Ctrl-C must not interrupt the exit (it would print a traceback)."""
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)


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


def _main(argv: Sequence[str] | None, *, process: bool) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except Exit as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        if process:
            _ignore_sigint()
        print("interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except ModelAPIError as exc:
        print(f"error: {describe_api_error(exc, None, None)}", file=sys.stderr)
        return EXIT_API
    except ReactEngineError as exc:
        print(f"error: {one_line(str(exc), 500)}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(exc, UserError) else 1
