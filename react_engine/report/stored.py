"""A run kept in a store as trace records, for :func:`~react_engine.report.run.run_html`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..store.runs import RunInfo
from ..types import Step, to_jsonable

__all__ = ["stored_run_records"]


def stored_run_records(
    info: RunInfo, steps: Iterable[Step], result: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """What the store kept of a run (no protocol reason; the duration is the time between
    its first and its latest commit)."""
    kept = [{**to_jsonable(step), "type": "step"} for step in steps]
    usage: dict[str, int] = {}
    for step in kept:
        for key, value in (step.get("usage") or {}).items():
            usage[key] = usage.get(key, 0) + int(value or 0)
    done = result or {}
    return [
        {
            "type": "run",
            "question": info.question,
            "model": info.model,
            "protocol": info.protocol,
            "protocol_reason": None,
        },
        *kept,
        {
            "type": "result",
            "answer": done.get("answer"),
            "stop_reason": done.get("stop_reason") or info.status,
            "usage": usage,
            "duration_s": max(0.0, info.updated - info.created),
            "error": done.get("error"),
            "events": [],
            "pending": list(done.get("pending") or ()),
        },
    ]
