"""What a command shows a person: steps, results and conversations, and a run's progress
on stderr (:class:`RunProgress`). On a terminal a coloured block per step (unless
``NO_COLOR``), elsewhere plain lines that each start with ``step N [protocol]``, so they grep.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TextIO

from ..report.run import reason_words
from ..run.agent import Agent
from ..run.events import (
    ActionDecided,
    Event,
    ModelCallStarted,
    ReasoningDelta,
    ReplyDiscarded,
    RunDone,
    StepDone,
    TextDelta,
)
from ..types import ActionRecord, HistoryItem, RunResult, Step, UserTurn
from .exits import one_line

__all__ = [
    "RunProgress",
    "format_history",
    "format_result",
    "format_step",
    "format_step_plain",
    "stop_words",
    "use_color",
]

_COLORS = dict(dim="2", bold="1", cyan="36", green="32", yellow="33", red="31", magenta="35")


_WIDTH = 400
"""How much of a thought, an argument or an observation a step shows."""


def _shorten(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _paint(color: bool, text: str, *styles: str) -> str:
    if not color or not styles:
        return text
    return f"\x1b[{';'.join(_COLORS[s] for s in styles)}m{text}\x1b[0m"


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (no-color.org)."""
    return not os.environ.get("NO_COLOR") and is_tty(stream)


def _arguments(action: ActionRecord) -> str:
    args = action.arguments
    return json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else repr(args)


def call_arguments(arguments: dict[str, Any] | str) -> str:
    """A call's arguments as ``key=value, ...`` (the text as it is when they are not JSON)."""
    if isinstance(arguments, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return arguments


def _indent(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def format_step(step: Step, *, color: bool = False, shown: frozenset[str] = frozenset()) -> str:
    """A step as a small block: thought, calls, observations, answer, repairs, tokens.

    ``shown`` names the parts a live view has already written, left out here: ``"header"``,
    ``"reasoning"``, ``"text"`` (the streamed reply) and ``"calls"`` (then only what each
    call returned is shown).
    """
    s, pad = partial(_paint, color), "   "
    lines = [] if "header" in shown else [s(f"── step {step.index + 1} ({step.protocol}) ", "bold")]
    for notice in step.notices:
        lines.append(s(f"{pad}! {notice.message}", "yellow"))
    if step.reasoning and "reasoning" not in shown:
        reasoning = _indent(_shorten(step.reasoning, _WIDTH), pad + "           ")
        lines.append(s(f"{pad}Reasoning: {reasoning}", "dim"))
    if step.thought and "text" not in shown:
        thought = _indent(_shorten(step.thought, _WIDTH), pad + "         ")
        lines.append(f"{pad}{s('Thought:', 'cyan')} {thought}")
    for action in step.actions:
        mark = s(" (salvaged from text)", "magenta") if action.salvaged else ""
        tone = "green" if action.status == "ok" else "red"
        status = "" if action.status == "ok" else s(f"  [{action.status}]", "red")
        if "calls" in shown:  # the call is on screen: what it returned, and from which tool
            observation = _indent(_shorten(action.observation, _WIDTH), pad + "  ")
            lines.append(f"  {s('←', tone)} {action.tool}{mark}: {observation}{status}")
            continue
        lines.append(
            f"{pad}{s('Action:', 'cyan')} {action.tool}({_shorten(_arguments(action), _WIDTH)})"
            + mark
        )
        observation = _indent(_shorten(action.observation, _WIDTH), pad + "             ")
        lines.append(f"{pad}{s('Observation:', tone)} {observation}{status}")
    if step.kind == "format_error":
        feedback = one_line(step.feedback or "", _WIDTH)
        lines.append(s(f"{pad}Format error fed back: {feedback}", "yellow"))
        if step.text and "text" not in shown:
            lines.append(s(f"{pad}(reply was: {one_line(step.text, _WIDTH)})", "dim"))
    if step.final_answer is not None and "text" not in shown:
        answer = _indent(step.final_answer, pad + "              ")
        lines.append(f"{pad}{s('Final Answer:', 'green', 'bold')} {answer}")
    if step.repairs:
        lines.append(s(f"{pad}repairs: {', '.join(step.repairs)}", "dim"))
    u = step.usage
    tokens = f"tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
    lines.append(s(f"{pad}{tokens} · {step.model_time_s:.2f}s model", "dim"))
    return "\n".join(lines)


def format_step_plain(step: Step) -> str:
    """A step as plain lines, one fact per line, each starting ``step N [protocol]``."""
    head = f"step {step.index + 1} [{step.protocol}]"
    lines = [f"{head} event: {notice.message}" for notice in step.notices]
    if step.reasoning:
        lines.append(f"{head} reasoning: {one_line(step.reasoning, _WIDTH)}")
    if step.thought:
        lines.append(f"{head} thought: {one_line(step.thought, _WIDTH)}")
    for action in step.actions:
        salvaged = " (salvaged from text)" if action.salvaged else ""
        lines.append(
            f"{head} action: {action.tool} {one_line(_arguments(action), _WIDTH)}{salvaged}"
        )
        status = "" if action.status == "ok" else f" [{action.status}]"
        lines.append(f"{head} observation{status}: {one_line(action.observation, _WIDTH)}")
    if step.kind == "format_error":
        lines.append(f"{head} format error: {one_line(step.feedback or '', _WIDTH)}")
        if step.text:
            lines.append(f"{head} reply was: {one_line(step.text, _WIDTH)}")
    if step.final_answer is not None:
        lines.append(f"{head} final answer: {one_line(step.final_answer, _WIDTH)}")
    if step.repairs:
        lines.append(f"{head} repairs: {', '.join(step.repairs)}")
    u = step.usage
    tokens = f"tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
    lines.append(f"{head} {tokens}, {step.model_time_s:.2f}s model")
    return "\n".join(lines)


def stop_words(result: RunResult) -> str:
    """Why the run stopped, in plain words (the ``stop_reason`` code after them)."""
    tools = [call.tool for call in result.tool_calls]
    return reason_words(result.stop_reason, answered=result.answer is not None, tools=tools)


def format_result(result: RunResult, *, color: bool = False) -> str:
    """The end of a run, without its answer (printed alone on stdout)."""
    s = partial(_paint, color)
    u = result.usage
    lines = [s("══ result", "bold")]
    if result.answer is None:
        lines.append(f"   answer: {s('(none)', 'red')}")
    lines += [
        f"   stop reason: {stop_words(result)}"
        + (f": {result.error}" if result.error and result.answer is None else ""),
        f"   protocol: {result.protocol} ({result.protocol_reason})",
        f"   steps: {len(result.steps)} · tool calls: {len(result.tool_calls)}"
        f" · LLM calls: {u.requests}",
        f"   tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
        f" = {u.total_tokens} (cached {u.cached_tokens}) · {result.duration_s:.2f}s",
    ]
    lines += [s(f"   ! {notice.message}", "yellow") for notice in result.notices]
    return "\n".join(lines)


def format_history(history: Sequence[HistoryItem]) -> str:
    """A conversation as the user saw it: questions, tool calls and answers, in order."""
    lines: list[str] = []
    turn = 0
    for item in history:
        if isinstance(item, UserTurn):
            turn += 1
            lines.append(f"[{turn}] you: {one_line(item.content, 200)}")
        elif item.kind == "final":
            lines.append(f"    assistant: {one_line(item.final_answer or '', 200)}")
        elif item.kind == "format_error":
            lines.append(f"    (unusable reply, fed back: {one_line(item.feedback or '', 80)})")
        else:
            for action in item.actions:
                status = "" if action.status == "ok" else f" [{action.status}]"
                lines.append(
                    f"    tool {action.tool}({one_line(_arguments(action), 80)}) -> "
                    f"{one_line(action.observation, 80)}{status}"
                )
    return "\n".join(lines) if lines else "(no conversation yet)"


class LivePrinter:
    """Shows a streamed run's events on a terminal, then the rest of each step, once."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = use_color(stream)
        self._style = partial(_paint, self.color)
        self._mid_line = False
        self._header: int | None = None
        """The step whose header is on screen."""
        self._shown: set[str] = set()
        """What the step's block need not repeat (see :func:`format_step`)."""
        self.writing = False
        """Whether the model's text is being shown (a ticker must not write over it)."""

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _end_line(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def __call__(self, event: Event) -> None:
        match event:
            case ModelCallStarted(step=index, protocol=protocol):
                if self._header != index:  # once per step: a retried request is the same step
                    self._end_line()
                    self._header = index
                    self._shown = {"header"}
                    self._write(self._style(f"── step {index + 1} ({protocol}) ", "bold") + "\n")
            case TextDelta(text=text) | ReasoningDelta(text=text):
                tone = "dim" if isinstance(event, TextDelta) else "magenta"
                self._shown.add("text" if isinstance(event, TextDelta) else "reasoning")
                self.writing = True
                self._write(self._style(text, tone))
                self._mid_line = not text.endswith("\n")
            case ReplyDiscarded(reason=reason):
                self._end_line()
                self._write(
                    self._style(f"   (the reply broke off: {reason}; asking again)\n", "yellow")
                )
            case ActionDecided(calls=calls):
                self._end_line()
                self._shown.add("calls")
                for call in calls:
                    arguments = _shorten(call_arguments(call.arguments), 200)
                    self._write(f"  → calling {call.tool}({arguments})\n")
            case StepDone(step=step):
                self._end_line()
                self.writing = False
                shown = frozenset(self._shown if self._header == step.index else ())
                self._write(format_step(step, color=self.color, shown=shown) + "\n")
            case _:
                pass


class Ticker:
    """How long the model has been thinking, on a terminal; other output goes through
    :meth:`say` or :meth:`writing`."""

    def __init__(self, stream: TextIO, *, live: bool) -> None:
        self.stream = stream
        self.live = live
        self.since = time.perf_counter()
        self._stop = threading.Event()
        self.lock = threading.RLock()
        self._shown = False
        self._thread: threading.Thread | None = None
        self.paused: Callable[[], bool] = lambda: False
        """True while something else writes on the line (a streamed reply)."""

    def __enter__(self) -> Ticker:
        self._stop.clear()
        self.since = time.perf_counter()
        if self.live:
            self._thread = threading.Thread(target=self._run, daemon=True, name="cli-ticker")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.clear()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with self.lock:
                if self.paused() or self._stop.is_set():
                    continue
                elapsed = time.perf_counter() - self.since
                self.stream.write(f"\r  … the model is thinking ({elapsed:4.1f} s)")
                self.stream.flush()
                self._shown = True

    def clear(self) -> None:
        with self.lock:
            if self._shown:
                self.stream.write("\r" + " " * 48 + "\r")
                self.stream.flush()
                self._shown = False

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the line while something else is written; time the next wait from its end."""
        with self.lock:
            self.clear()
            try:
                yield
            finally:
                self.since = time.perf_counter()

    def say(self, text: str) -> None:
        """Print a line, then start timing the next wait."""
        with self.writing():
            print(text, file=self.stream, flush=True)


def is_tty(stream: TextIO) -> bool:
    try:  # a closed or file-less stream has no answer: not a terminal
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class RunProgress:
    """Each step, each call before its tool runs, each network retry, and a ticker while
    the model thinks (on a terminal, where the model's text is also streamed).

    With ``--quiet`` nothing; with ``--json`` only the ticker and the retries.
    """

    def __init__(self, args: argparse.Namespace, *, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        tty = is_tty(self.stream)
        self.steps = not (args.quiet or getattr(args, "json", False))  # (chat has no --json)
        self.ticker = Ticker(self.stream, live=tty and not args.quiet)
        self.live = LivePrinter(self.stream) if self.steps and tty else None
        self.ticker.paused = lambda: self.live is not None and self.live.writing
        self.max_retries: int = args.max_retries

    def say(self, text: str) -> None:
        if self.steps:
            self.ticker.say(text)

    def on_step(self, step: Step) -> None:
        if self.steps and self.live is None:  # (a live view shows the steps itself)
            with self.ticker.writing():
                print(format_step_plain(step), file=self.stream, flush=True)

    def on_call(self, record: ActionRecord) -> None:
        if self.steps and self.live is None:
            self.ticker.say(f"  → calling {record.tool}({call_arguments(record.arguments)})")

    def on_retry(self, attempt: int, wait: float, error: BaseException) -> None:
        if self.steps or self.ticker.live:
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
