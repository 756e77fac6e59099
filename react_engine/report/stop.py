"""Why a run stopped, in plain words, for the terminal and the HTML reports alike (it
imports nothing of the engine, so the run's own types can reach it)."""

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


_CAUSES = {
    "max_steps": "the step budget was spent",
    "loop": "the model kept repeating the same call",
}


def reason_words(reason: str, *, answered: bool, tools: Sequence[str] = ()) -> str:
    """Why a run stopped for ``reason``, in plain words; ``tools``: each call's tool name."""
    cause = _CAUSES.get(reason)
    if cause is None:
        return f"{STOPPED.get(reason, reason)} ({reason})"
    if not answered:
        return f"{cause}, and no final answer came after it ({reason})"
    n, names = len(tools), ", ".join(dict.fromkeys(tools))
    calls = f"{n} tool call{'' if n == 1 else 's'}" + (f" ({names})" if names else "")
    words = f"answered after {calls}; the final answer was asked for without tools once {cause}"
    return f"{words} ({reason})"
