"""Human-readable rendering of steps, results and conversations, for terminals and logs.

The loop knows nothing of this module: the CLI passes :class:`StepPrinter` as the agent's
``on_step`` callback, so each step is shown as it happens. On a terminal a step is a small
block with colour (unless ``NO_COLOR`` is set); elsewhere (a pipe, a file, a CI log) it is
plain lines that each start with ``step N [protocol]`` and hold one thing, so they grep.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..events import ActionDecided, Event, ReasoningDelta, ReplyDiscarded, StepDone, TextDelta
from ..types import ActionRecord, HistoryItem, RunResult, Step, UserTurn

__all__ = [
    "LivePrinter",
    "StepPrinter",
    "format_history",
    "format_result",
    "format_step",
    "format_step_plain",
    "use_color",
]

_COLORS = {
    "dim": "2",
    "bold": "1",
    "cyan": "36",
    "green": "32",
    "yellow": "33",
    "red": "31",
    "magenta": "35",
}


def _shorten(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str, limit: int) -> str:
    return _shorten(" ".join(text.split()), limit)


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(_COLORS[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set (no-color.org)."""
    return not os.environ.get("NO_COLOR") and _isatty(stream)


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


def format_step(step: Step, *, color: bool = False, width: int = 400) -> str:
    """A step as a small block: thought, calls, observations, answer, repairs, tokens."""
    s = _Style(color)
    pad = "   "
    lines = [s(f"── step {step.index + 1} ({step.protocol}) ", "bold")]
    for event in step.events:
        lines.append(s(f"{pad}! {event}", "yellow"))
    if step.reasoning:
        reasoning = _indent(_shorten(step.reasoning, width), pad + "           ")
        lines.append(s(f"{pad}Reasoning: {reasoning}", "dim"))
    if step.thought:
        thought = _indent(_shorten(step.thought, width), pad + "         ")
        lines.append(f"{pad}{s('Thought:', 'cyan')} {thought}")
    for action in step.actions:
        mark = s(" (salvaged from text)", "magenta") if action.salvaged else ""
        lines.append(
            f"{pad}{s('Action:', 'cyan')} {action.tool}({_shorten(_arguments(action), width)})"
            + mark
        )
        tone = "green" if action.status == "ok" else "red"
        observation = _indent(_shorten(action.observation, width), pad + "             ")
        lines.append(
            f"{pad}{s('Observation:', tone)} {observation}"
            + ("" if action.status == "ok" else s(f"  [{action.status}]", "red"))
        )
    if step.kind == "format_error":
        lines.append(
            s(f"{pad}Format error fed back: {_one_line(step.feedback or '', width)}", "yellow")
        )
        if step.text:
            lines.append(s(f"{pad}(reply was: {_one_line(step.text, width)})", "dim"))
    if step.final_answer is not None:
        answer = _indent(step.final_answer, pad + "              ")
        lines.append(f"{pad}{s('Final Answer:', 'green', 'bold')} {answer}")
    if step.repairs:
        lines.append(s(f"{pad}repairs: {', '.join(step.repairs)}", "dim"))
    u = step.usage
    lines.append(
        s(
            f"{pad}tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
            f" · {step.model_time_s:.2f}s model",
            "dim",
        )
    )
    return "\n".join(lines)


def format_step_plain(step: Step, *, width: int = 400) -> str:
    """A step as plain lines, one fact per line, each starting ``step N [protocol]``."""
    head = f"step {step.index + 1} [{step.protocol}]"
    lines = [f"{head} event: {event}" for event in step.events]
    if step.reasoning:
        lines.append(f"{head} reasoning: {_one_line(step.reasoning, width)}")
    if step.thought:
        lines.append(f"{head} thought: {_one_line(step.thought, width)}")
    for action in step.actions:
        salvaged = " (salvaged from text)" if action.salvaged else ""
        lines.append(
            f"{head} action: {action.tool} {_one_line(_arguments(action), width)}{salvaged}"
        )
        status = "" if action.status == "ok" else f" [{action.status}]"
        lines.append(f"{head} observation{status}: {_one_line(action.observation, width)}")
    if step.kind == "format_error":
        lines.append(f"{head} format error: {_one_line(step.feedback or '', width)}")
        if step.text:
            lines.append(f"{head} reply was: {_one_line(step.text, width)}")
    if step.final_answer is not None:
        lines.append(f"{head} final answer: {_one_line(step.final_answer, width)}")
    if step.repairs:
        lines.append(f"{head} repairs: {', '.join(step.repairs)}")
    u = step.usage
    lines.append(
        f"{head} tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion, "
        f"{step.model_time_s:.2f}s model"
    )
    return "\n".join(lines)


def format_result(result: RunResult, *, color: bool = False) -> str:
    """The end of a run: answer, why it stopped, the protocol and why, calls and tokens."""
    s = _Style(color)
    u = result.usage
    answer = _indent(result.answer, " " * 11) if result.answer is not None else s("(none)", "red")
    lines = [
        s("══ result", "bold"),
        f"   answer: {answer}",
        f"   stop reason: {result.stop_reason}"
        + (f" ({result.error})" if result.error and result.answer is None else ""),
        f"   protocol: {result.protocol} ({result.protocol_reason})",
        f"   steps: {len(result.steps)} · tool calls: {len(result.tool_calls)}"
        f" · LLM calls: {u.requests}",
        f"   tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
        f" = {u.total_tokens} (cached {u.cached_tokens}) · {result.duration_s:.2f}s",
    ]
    lines += [s(f"   ! {event}", "yellow") for event in result.events]
    return "\n".join(lines)


def format_history(history: Sequence[HistoryItem], *, width: int = 200) -> str:
    """A conversation as the user saw it: questions, tool calls and answers, in order."""
    lines: list[str] = []
    turn = 0
    for item in history:
        if isinstance(item, UserTurn):
            turn += 1
            lines.append(f"[{turn}] you: {_one_line(item.content, width)}")
        elif item.kind == "final":
            lines.append(f"    assistant: {_one_line(item.final_answer or '', width)}")
        elif item.kind == "format_error":
            lines.append(f"    (unusable reply, fed back: {_one_line(item.feedback or '', 80)})")
        else:
            for action in item.actions:
                status = "" if action.status == "ok" else f" [{action.status}]"
                lines.append(
                    f"    tool {action.tool}({_one_line(_arguments(action), 80)}) -> "
                    f"{_one_line(action.observation, 80)}{status}"
                )
    return "\n".join(lines) if lines else "(no conversation yet)"


class StepPrinter:
    """An ``on_step`` callback that prints each step as it happens.

    ``plain`` and ``color`` default to what the stream is: a terminal gets coloured blocks,
    anything else plain lines.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        color: bool | None = None,
        plain: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stdout
        self.color = use_color(self.stream) if color is None else color
        self.plain = (not _isatty(self.stream)) if plain is None else plain

    def __call__(self, step: Step) -> None:
        text = format_step_plain(step) if self.plain else format_step(step, color=self.color)
        print(text, file=self.stream, flush=True)


class LivePrinter:
    """Shows a streamed run's events on a terminal: the model's text as it is written,
    each action before its tool runs, then the step's block (:class:`StepPrinter`)."""

    def __init__(self, stream: TextIO | None = None, *, steps: StepPrinter | None = None) -> None:
        self.stream = stream or sys.stdout
        self.steps = steps or StepPrinter(self.stream)
        self._style = _Style(use_color(self.stream))
        self._mid_line = False
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
            case TextDelta(text=text) | ReasoningDelta(text=text):
                tone = "dim" if isinstance(event, TextDelta) else "magenta"
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
                for call in calls:
                    shown = _shorten(call_arguments(call.arguments), 200)
                    self._write(f"  → calling {call.tool}({shown})\n")
            case StepDone(step=step):
                self._end_line()
                self.writing = False
                self.steps(step)
            case _:
                pass


def _isatty(stream: TextIO) -> bool:
    try:  # a closed or file-less stream has no answer: not a terminal
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
