"""``react-engine eval bfcl``: BFCL's cases under each protocol, graded as BFCL grades."""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..harness.runner import Job, Outcome, Progress, run_cases
from ..protocols.registry import PROTOCOLS
from ..testing import ScriptedModel
from ..transport.base import ChatModel
from .bfcl_case import CaseResult, EvalSettings, run_case, run_multi_turn_case
from .bfcl_data import Case
from .bfcl_multi_turn import MultiTurnCase
from .bfcl_prompt import BFCL_PROMPT
from .bfcl_recording import Recorded, RecordingModel, recorded_from_json, recorded_json
from .bfcl_report import Report

__all__ = ["DEFAULT_PROTOCOLS", "AnyCase", "eval_protocols", "run_bfcl"]

DEFAULT_PROTOCOLS: tuple[str, ...] = ("function_calling", "text", "structured")
"""The protocols the eval runs by default (those recorded in ``fixtures/bfcl``)."""


def eval_protocols() -> tuple[str, ...]:
    """Every protocol the eval can run: the registry's and :data:`BFCL_PROMPT`."""
    return (*PROTOCOLS, BFCL_PROMPT)


AnyCase = Case | MultiTurnCase


async def _run_job(
    model_name: str, settings: EvalSettings, job: Job, live: ChatModel | None
) -> tuple[CaseResult, Any]:
    """One case under one protocol; the replies it got, as recorded, when it ran live."""
    case, protocol = job.case, job.protocol
    replies = job.replies if isinstance(job.replies, list) else [job.replies]
    model: ChatModel = RecordingModel(live) if live is not None else ScriptedModel(replies)
    if isinstance(case, MultiTurnCase):
        result = await run_multi_turn_case(case, protocol, model, model_name, settings)
    else:
        result = await run_case(case, protocol, model, model_name, settings)
    if not isinstance(model, RecordingModel):
        return result, None
    if isinstance(case, MultiTurnCase):
        return result, recorded_json(list(model.replies))
    return result, recorded_json(model.replies[-1]) if model.replies else None


def _ray_failed(job: Job, why: str) -> tuple[CaseResult, Any]:
    case = job.case
    result = CaseResult(case.id, case.category, job.protocol, False, False, why, error=why)
    return result, None


def run_bfcl(
    cases: Sequence[AnyCase],
    protocols: Sequence[str],
    *,
    endpoint: tuple[str | None, str | None] | None = None,
    recorded: Mapping[str, Mapping[str, Recorded]] | None = None,
    model: str = "scripted",
    source: str = "scripted",
    settings: EvalSettings | None = None,
    record: dict[str, dict[str, Recorded]] | None = None,
    quiet: bool = True,
    concurrency: int = 1,
    ray: str | None = None,
    results: Path | None = None,
    resume: bool = False,
) -> Report:
    """Every case under every protocol, by ``model`` (at ``source``): live at ``endpoint``
    (base URL and API key; ``record`` collects the replies), or from ``recorded`` replies
    (``{protocol: {case id: replies}}``); batch options as
    :func:`~react_engine.compare.run.run_comparison`'s."""
    if (endpoint is None) == (recorded is None):
        raise ConfigurationError("run_bfcl takes an endpoint or recorded replies: one of them")
    if recorded is not None:
        for protocol in protocols:
            missing = [c.id for c in cases if c.id not in recorded.get(protocol, {})]
            if missing:
                raise ConfigurationError(
                    f"no recorded {protocol} reply for {', '.join(missing[:5])}"
                    + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                )
    report = Report(
        model=model,
        source=source,
        settings=settings or EvalSettings(),
        protocols=list(protocols),
        categories=list(dict.fromkeys(c.category for c in cases)),
    )
    replayed = recorded or {}
    jobs = [
        Job(i, p, case, None if endpoint else replayed[p][case.id], endpoint=endpoint)
        for i, (p, case) in enumerate((p, c) for p in protocols for c in cases)
    ]

    def finished(job: Job, outcome: Outcome, done: int, total: int) -> str:
        result: CaseResult = outcome[0]
        verdict = "ok" if result.correct else ("DECODE" if result.decode_failure else "no")
        return f"[{done:>4}/{total}] {job.protocol:<16} {job.case.id:<24} {verdict}"

    outcomes = run_cases(
        jobs,
        functools.partial(_run_job, report.model, report.settings),
        result_type=CaseResult,
        meta={"model": report.model, "source": report.source, "settings": asdict(report.settings)},
        results=results,
        resume=resume,
        concurrency=concurrency,
        ray=ray,
        ray_failed=_ray_failed,
        progress=Progress(len(jobs), sys.stderr, live=False if quiet else None),
        on_done=None if quiet else finished,
    )
    for job, (result, replies) in zip(jobs, outcomes, strict=True):
        report.results.append(result)
        if record is not None and replies is not None:
            record.setdefault(job.protocol, {})[job.case.id] = recorded_from_json(replies)
    return report
