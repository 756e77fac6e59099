"""Why a run stopped, in plain words: the terminal (:func:`react_engine.cli.render.stop_words`)
and the HTML reports say it the same way. It imports nothing of the engine, so the run's
own types can reach it."""

from __future__ import annotations

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


def reason_words(reason: str, *, answered: bool) -> str:
    """Why a run stopped for ``reason`` (with an answer, or not), in plain words, the code
    after them."""
    if reason in ("max_steps", "loop"):
        cause = (
            "the step budget was spent"
            if reason == "max_steps"
            else "the model kept repeating the same call"
        )
        if answered:
            words = f"{cause}, so the model was asked for its final answer without more tools"
        else:
            words = f"{cause}, and no final answer came after it"
    else:
        words = STOPPED.get(reason, reason)
    return f"{words} ({reason})"
