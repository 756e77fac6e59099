"""What a command shows on stderr while a run goes."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..run.agent import Agent
from ..run.events import RunDone
from ..types import ActionRecord, RunResult, Step
from .exits import one_line
from .render import LivePrinter, StepPrinter, Ticker, call_arguments, is_tty

__all__ = ["RunProgress"]


class RunProgress:
    """Each step, each call before its tool runs, each network retry, and a ticker while
    the model thinks (on a terminal, where the model's text is also streamed).

    With ``--quiet`` nothing; with ``--json`` only the ticker and the retries.
    """

    def __init__(self, args: argparse.Namespace, *, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        quiet = bool(getattr(args, "quiet", False))
        tty = is_tty(self.stream)
        self.printer = None if quiet or getattr(args, "json", False) else StepPrinter(self.stream)
        self.ticker = Ticker(self.stream, live=tty and not quiet)
        self.live = LivePrinter(self.stream) if self.printer and tty else None
        if self.live is not None:
            live = self.live
            self.ticker.paused = lambda: live.writing
        self.max_retries: int = args.max_retries

    def say(self, text: str) -> None:
        if self.printer is not None:
            self.ticker.say(text)

    def on_step(self, step: Step) -> None:
        if self.printer is not None and self.live is None:
            with self.ticker.writing():
                self.printer(step)

    def on_call(self, record: ActionRecord) -> None:
        if self.printer is not None and self.live is None:
            self.ticker.say(f"  → calling {record.tool}({call_arguments(record.arguments)})")

    def on_retry(self, attempt: int, wait: float, error: BaseException) -> None:
        if self.printer is not None or self.ticker.live:
            self.ticker.say(
                f"   ↻ retry {attempt - 1}/{self.max_retries} in {wait:.1f} s: "
                f"{one_line(str(error), 200)}"
            )

    def run(self, agent: Agent, question: str, **options: Any) -> RunResult:
        """The run, streamed on a terminal; the ticker shows the waits."""
        with self.ticker:
            if self.live is None:
                return agent.run(question, **options)
            for event in agent.run_stream(question, **options):
                with self.ticker.writing():
                    self.live(event)
                if isinstance(event, RunDone):
                    return event.result
        raise AssertionError("a run's events end with RunDone")  # pragma: no cover
