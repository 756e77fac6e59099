"""Human-readable rendering of steps and results for terminals and logs.

The loop knows nothing of this module: the CLI and the demo pass :class:`StepPrinter` as
the agent's ``on_step`` callback, so each step is shown as it happens.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from .types import RunResult, Step

__all__ = ["StepPrinter", "format_result", "format_step"]

_COLORS = {"dim": "2", "bold": "1", "cyan": "36", "green": "32", "yellow": "33", "red": "31"}


def _shorten(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(_COLORS[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def format_step(step: Step, *, color: bool = False, width: int = 400) -> str:
    """A step as a few readable lines: thought, calls, observations, answer, tokens."""
    s = _Style(color)
    lines = [s(f"── step {step.index + 1} ({step.protocol}) ", "bold")]
    for event in step.events:
        lines.append(s(f"   ! {event}", "yellow"))
    if step.thought:
        lines.append(f"   {s('Thought:', 'cyan')} {_shorten(step.thought, width)}")
    for action in step.actions:
        args = action.arguments
        shown = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else repr(args)
        mark = " (salvaged from text)" if action.salvaged else ""
        lines.append(f"   {s('Action:', 'cyan')} {action.tool}({_shorten(shown, width)}){mark}")
        tone = "green" if action.status == "ok" else "red"
        lines.append(
            f"   {s('Observation:', tone)} {_shorten(action.observation, width)}"
            + ("" if action.status == "ok" else s(f"  [{action.status}]", "red"))
        )
    if step.kind == "format_error":
        lines.append(
            s(f"   Format error fed back: {_shorten(step.feedback or '', width)}", "yellow")
        )
        if step.text:
            lines.append(s(f"   (reply was: {_shorten(step.text, width)})", "dim"))
    if step.final_answer is not None:
        lines.append(f"   {s('Final Answer:', 'green', 'bold')} {step.final_answer}")
    if step.repairs:
        lines.append(s(f"   repairs: {', '.join(step.repairs)}", "dim"))
    u = step.usage
    lines.append(
        s(
            f"   tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
            f" · {step.model_time_s:.2f}s model",
            "dim",
        )
    )
    return "\n".join(lines)


def format_result(result: RunResult, *, color: bool = False) -> str:
    s = _Style(color)
    u = result.usage
    return "\n".join(
        [
            s("══ result", "bold"),
            f"   answer: {result.answer if result.answer is not None else '(none)'}",
            f"   stop reason: {result.stop_reason}",
            f"   protocol: {result.protocol} ({result.protocol_reason})",
            f"   steps: {len(result.steps)} · tool calls: {len(result.tool_calls)}"
            f" · LLM calls: {u.requests}",
            f"   tokens: {u.prompt_tokens} prompt + {u.completion_tokens} completion"
            f" = {u.total_tokens} (cached {u.cached_tokens}) · {result.duration_s:.2f}s",
        ]
    )


class StepPrinter:
    """An ``on_step`` callback that prints each step as it happens."""

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() if color is None else color

    def __call__(self, step: Step) -> None:
        print(format_step(step, color=self.color), file=self.stream, flush=True)
