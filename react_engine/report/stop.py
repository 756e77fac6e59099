"""Why a run stopped, in plain words: the terminal (:func:`react_engine.cli.render.stop_words`)
and the HTML reports say it the same way. It imports nothing of the engine, so the run's
own types can reach it."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["STOPPED", "reason_words"]

STOPPED = {
    "final_answer": "the model gave its final answer",
    "deadline": "the time limit passed",
    "error_budget": "too many unusable replies in a row",
    "tool_budget": "the tool-call budget ran out",
    "token_budget": "the token budget ran out",
    "context_window": "the conversation no longer fits the model's context window",
    "cancelled": "cancelled",
    "error": "an error ended the run",
    "awaiting_approval": "calls wait for approval (react-engine runs resume ID --approve ...)",
}
"""Why a run stopped, in words, for each ``RunResult.stop_reason``."""


def reason_words(reason: str, *, answered: bool, tools: Sequence[str] = ()) -> str:
    """Why a run stopped for ``reason`` (with an answer, or not), in plain words, the code
    after them. ``tools``: the names of the calls the run made, one per call."""
    if reason in ("max_steps", "loop"):
        cause = (
            "the step budget was spent"
            if reason == "max_steps"
            else "the model kept repeating the same call"
        )
        if answered:
            words = (
                f"answered after {calls_made(tools)}; the final answer was asked for "
                f"without tools once {cause}"
            )
        else:
            words = f"{cause}, and no final answer came after it"
    else:
        words = STOPPED.get(reason, reason)
    return f"{words} ({reason})"


def calls_made(tools: Sequence[str]) -> str:
    """``"1 tool call (get_weather)"``, ``"3 tool calls (get_weather, calculator)"``."""
    names = ", ".join(dict.fromkeys(tools))
    n = len(tools)
    return f"{n} tool call{'' if n == 1 else 's'}" + (f" ({names})" if names else "")
