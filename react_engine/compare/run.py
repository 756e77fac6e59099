"""The side-by-side protocol comparison: the same tasks under each protocol and model.

Every figure comes from the run's trace (:func:`metrics_from_trace`); docs/comparison.md
says what each one counts.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import functools
import io
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, astuple, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, ModelAPIError, ModelRequestError, RunAborted
from ..harness.metrics import Figures, pct
from ..harness.report import grid, json_text
from ..harness.runner import Job, Outcome, Progress, run_cases
from ..harness.settings import RunSettings, agent_options
from ..run.agent import Agent
from ..testing import ScriptedModel
from ..transport.base import ChatModel
from .suite import Task, Transcript, check_result, replies_for
from .tools import TASK_TOOLS

__all__ = [
    "METRICS",
    "CompareSettings",
    "Metrics",
    "Report",
    "Target",
    "TaskRun",
    "Total",
    "arun_task",
    "format_report",
    "metrics_from_trace",
    "run_comparison",
    "write_outputs",
]


@dataclass(frozen=True, slots=True)
class Target:
    """One column of the comparison: a model at an endpoint, under one protocol."""

    model: str
    """The model as the table names it."""
    protocol: str
    """A name in the protocol registry."""
    base_url: str | None = None
    api_key: str | None = None
    scripted: bool = False
    """Answer from each task's scripted transcript instead of an endpoint."""

    @property
    def label(self) -> str:
        return f"{self.model} · {self.protocol}"


@dataclass(frozen=True, slots=True)
class CompareSettings(RunSettings):
    """What every run shares, so that only the protocol and the model differ (``max_tokens``
    is not sent to reasoning models, whose thinking counts against it)."""

    run_deadline: float | None = 900.0
    """Seconds per run, all requests and tools together."""


@dataclass(slots=True)
class Metrics(Figures):
    """The figures of one run, or a sum of them."""

    llm_calls: int = 0
    tool_calls: int = 0
    format_errors: int = 0
    repaired: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0


METRICS: tuple[tuple[str, str, str], ...] = (
    ("llm_calls", "LLM calls", "LLM"),
    ("tool_calls", "tool calls", "tools"),
    ("format_errors", "format errors", "fmt err"),
    ("repaired", "repaired replies", "repaired"),
    ("retries", "retries", "retries"),
    ("prompt_tokens", "prompt tokens", "prompt tok"),
    ("completion_tokens", "completion tokens", "compl tok"),
    ("wall_s", "wall time (s)", "time s"),
)
"""The metric fields in table order, with their long names and their table headings."""

_MODEL_MISTAKES = frozenset({"unknown_tool", "invalid_arguments"})


def _model_mistake(step: Mapping[str, Any]) -> bool:
    actions = step["actions"]
    mistakes = bool(actions) and all(a["status"] in _MODEL_MISTAKES for a in actions)
    return step["kind"] == "format_error" or mistakes


def metrics_from_trace(records: Sequence[Mapping[str, Any]]) -> Metrics:
    """The figures of one run, from its trace records (see the module docstring)."""
    steps = [r for r in records if r.get("type") == "step"]
    footer = next((r for r in records if r.get("type") == "result"), {})
    return Metrics(
        llm_calls=len(steps),
        tool_calls=sum(len(s["actions"]) for s in steps),
        format_errors=sum(1 for s in steps if s["kind"] == "format_error"),
        repaired=sum(
            1
            for s in steps
            if s["kind"] != "format_error"
            and (s["repairs"] or any(a["salvaged"] for a in s["actions"]))
        ),
        retries=sum(1 for prev in steps[:-1] if _model_mistake(prev)),
        prompt_tokens=sum(s["usage"]["prompt_tokens"] for s in steps),
        completion_tokens=sum(s["usage"]["completion_tokens"] for s in steps),
        wall_s=float(footer.get("duration_s") or 0.0),
    )


@dataclass(slots=True)
class TaskRun:
    """One task under one target: the verdict, the figures and the trace they come from."""

    task: str
    model: str
    protocol: str
    success: bool
    failures: list[str]
    answer: str | None
    stop_reason: str
    protocol_reason: str
    error: str | None
    metrics: Metrics
    repairs: dict[str, int]
    unused_replies: int | None = None
    """Scripted runs: replies of the transcript never asked for (``None`` otherwise)."""
    trace: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Total:
    """All tasks under one target."""

    model: str
    protocol: str
    runs: int
    successes: int
    metrics: Metrics


@dataclass(slots=True)
class Report:
    """A whole comparison."""

    tasks: list[Task]
    targets: list[Target]
    settings: CompareSettings
    source: str
    """Where the models ran: ``scripted``, the local server, or a base URL."""
    runs: list[TaskRun] = field(default_factory=list)
    started_at: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )

    def totals(self) -> list[Total]:
        out: list[Total] = []
        for t in self.targets:
            mine = [r for r in self.runs if (r.model, r.protocol) == (t.model, t.protocol)]
            won, metrics = sum(r.success for r in mine), Metrics.total(r.metrics for r in mine)
            out.append(Total(t.model, t.protocol, len(mine), won, metrics))
        return out


async def arun_task(
    task: Task, target: Target, settings: CompareSettings, client: ChatModel | None = None
) -> TaskRun:
    """Run one task under one target and check the result.

    A run that stops early is a failed run with its trace. A refused request or an
    unreachable server raises :class:`ModelAPIError`: every other run would fail the same
    way. ``client``: a model shared by the runs of a comparison (default: the agent's own)."""
    transcript: Transcript | None = None
    if target.scripted:
        replies = replies_for(task.scripted, target.protocol)
        if not replies:
            raise ConfigurationError(f"task {task.id} has no scripted {target.protocol} replies")
        transcript = Transcript(replies, label=f"task {task.id} ({target.protocol})")
        client = ScriptedModel(transcript)
    agent = Agent(
        target.model,
        [TASK_TOOLS[name] for name in task.tools],
        protocol=target.protocol,
        client=client,
        base_url=target.base_url,
        api_key=target.api_key,
        instructions=task.instructions,
        max_steps=task.check.max_steps,
        deadline=settings.run_deadline,
        **agent_options(settings),
    )
    if agent.capabilities()[0].reasoning:
        unbounded = dataclasses.replace(agent.config.settings, max_tokens=None)
        agent.config = dataclasses.replace(agent.config, settings=unbounded)
    try:
        result = await agent.arun(task.question)
    except RunAborted as exc:
        result = exc.result
    except ModelAPIError as exc:
        if isinstance(exc, ModelRequestError) or exc.result is None or not exc.result.steps:
            raise
        result = exc.result
    trace = result.trace()
    failures = check_result(task, result)
    codes = Counter(c for r in trace if r.get("type") == "step" for c in r["repairs"])
    return TaskRun(
        task=task.id,
        model=target.model,
        protocol=target.protocol,
        success=not failures,
        failures=failures,
        answer=result.answer,
        stop_reason=result.stop_reason,
        protocol_reason=result.protocol_reason,
        error=result.error,
        metrics=metrics_from_trace(trace),
        repairs=dict(sorted(codes.items())),
        unused_replies=transcript.remaining if transcript is not None else None,
        trace=trace,
    )


async def _run_job(settings: CompareSettings, job: Job, client: ChatModel | None) -> Outcome:
    target: Target = job.target
    try:
        return await arun_task(job.case, target, settings, client), None
    except ModelAPIError as exc:
        exc.add_note(f"task {job.case.id}, {target.label}")
        raise


def _endpoint(target: Target) -> tuple[str | None, str | None] | None:
    return None if target.scripted else (target.base_url, target.api_key)


def _ray_failed(job: Job, why: str) -> Outcome:
    t: Target = job.target
    return TaskRun(
        job.case.id, t.model, t.protocol, False, [why], None, "error", "", why, Metrics(), {}
    ), None


def run_comparison(
    tasks: Sequence[Task],
    targets: Sequence[Target],
    settings: CompareSettings | None = None,
    *,
    source: str = "",
    quiet: bool = True,
    concurrency: int = 1,
    ray: str | None = None,
    results: Path | None = None,
    resume: bool = False,
) -> Report:
    """Every task under every target: ``concurrency`` runs at once, or on the Ray cluster at
    ``ray`` (``""``: a local one); records appended to ``results`` (``resume`` skips those
    there). Unless ``quiet``, a line on stderr as each run ends, above a progress bar."""
    report = Report(list(tasks), list(targets), settings or CompareSettings(), source)
    jobs = [
        Job(i, t.protocol, task, model=t.model, target=t, endpoint=_endpoint(t))
        for i, (task, t) in enumerate((task, t) for task in tasks for t in targets)
    ]

    def finished(job: Job, outcome: Outcome, done: int, total: int) -> str:
        run: TaskRun = outcome[0]
        m, verdict = run.metrics, "ok" if run.success else "FAILED"
        return (
            f"[{done:>3}/{total}] {run.task} · {run.model} · {run.protocol}: {verdict} · "
            f"{m.llm_calls} LLM calls · {m.prompt_tokens:,}+{m.completion_tokens:,} tokens · "
            f"{m.wall_s:.1f}s"
        )

    outcomes = run_cases(
        jobs,
        functools.partial(_run_job, report.settings),
        result_type=TaskRun,
        meta=_meta(report),
        results=results,
        resume=resume,
        concurrency=concurrency,
        ray=ray,
        ray_failed=_ray_failed,
        progress=Progress(len(jobs), sys.stderr, live=False if quiet else None),
        on_done=None if quiet else finished,
    )
    report.runs = [run for run, _ in outcomes]
    return report


def _cells(metrics: Metrics) -> list[str]:
    values = [getattr(metrics, name) for name, _, _ in METRICS]
    return [f"{v:.2f}" if isinstance(v, float) else f"{v:,}" for v in values]


def _ratio(a: float, b: float) -> str:
    return f"×{a / b:.2f}" if b else "n/a"


def format_report(report: Report) -> str:
    """The side-by-side table: one row per task and target, totals, trade-offs, failures."""
    s = report.settings
    models = list(dict.fromkeys(t.model for t in report.targets))
    protocols = list(dict.fromkeys(t.protocol for t in report.targets))
    lines = [
        f"Protocol comparison · {len(report.tasks)} tasks × {len(models)} model(s) × "
        f"{len(protocols)} protocol(s) · seed {s.seed} · temperature {s.temperature:g} · "
        f"max_tokens {s.max_tokens} · tool_choice {s.tool_choice}",
        f"models: {', '.join(models)} ({report.source or 'endpoint'})",
        "",
    ]
    many = len(models) > 1
    head = ["task", *(["model"] if many else []), "protocol", "ok"] + [h for _, _, h in METRICS]
    rows: list[list[str]] = [head]
    by_key = {(r.task, r.model, r.protocol): r for r in report.runs}
    for task in report.tasks:
        mine = [
            by_key[k] for t in report.targets if (k := (task.id, t.model, t.protocol)) in by_key
        ]
        for i, run in enumerate(mine):
            lead = [task.id if i == 0 else "", *([run.model] if many else []), run.protocol]
            rows.append([*lead, "yes" if run.success else "NO", *_cells(run.metrics)])
    rows.append([""] * len(head))
    totals = report.totals()
    for i, t in enumerate(totals):
        lead = ["TOTAL" if i == 0 else "", *([t.model] if many else []), t.protocol]
        rows.append([*lead, f"{t.successes}/{t.runs}", *_cells(t.metrics)])
    lines += grid(rows, numeric_from=len(head) - len(METRICS) - 1)
    lines += [
        "",
        "LLM: model replies · tools: calls asked for · fmt err: replies the protocol could "
        "not use · repaired: replies usable only after a repair · retries: calls spent on "
        "the model's own mistakes",
    ]
    lines += _tradeoffs(totals, models)
    failed = [r for r in report.runs if not r.success]
    if failed:
        lines += ["", "Failed runs:"]
        for r in failed:
            who = f"{r.model} · {r.protocol}" if many else r.protocol
            lines.append(f"  {r.task} ({who}): {'; '.join(r.failures)}")
    return "\n".join(lines)


def _tradeoffs(totals: list[Total], models: list[str]) -> list[str]:
    lines = ["", "Trade-offs:"]
    for model in models:
        mine = {t.protocol: t for t in totals if t.model == model}
        if len(models) > 1:
            lines.append(f"  {model}:")
        for t in mine.values():
            m = t.metrics
            lines.append(
                f"  {t.protocol:<17} {t.successes}/{t.runs} solved · "
                f"{m.prompt_tokens / max(t.runs, 1):,.0f} prompt + "
                f"{m.completion_tokens / max(t.runs, 1):,.0f} completion tokens per task · "
                f"{m.llm_calls / max(t.runs, 1):.1f} LLM calls per task · "
                f"{m.repaired} of {m.llm_calls} replies repaired "
                f"({pct(m.repaired, m.llm_calls, digits=0)})"
                f" · {m.format_errors} format errors · {m.retries} retries"
            )
        fc, text = mine.get("function_calling"), mine.get("text")
        if fc is not None and text is not None:
            lines.append(
                f"  text vs function_calling: prompt tokens "
                f"{_ratio(text.metrics.prompt_tokens, fc.metrics.prompt_tokens)}, completion "
                f"tokens {_ratio(text.metrics.completion_tokens, fc.metrics.completion_tokens)},"
                f" LLM calls {_ratio(text.metrics.llm_calls, fc.metrics.llm_calls)}, "
                f"wall time {_ratio(text.metrics.wall_s, fc.metrics.wall_s)}"
            )
    return lines


CSV_FIELDS: tuple[str, ...] = (
    "task",
    "model",
    "protocol",
    "runs",
    "successes",
    *(name for name, _, _ in METRICS),
    "stop_reason",
    "failures",
)


def _meta(report: Report) -> dict[str, Any]:
    """What a results file of the comparison must share to be resumed."""
    targets = [
        {"model": t.model, "protocol": t.protocol, "api_model": t.model} for t in report.targets
    ]
    return {"source": report.source, "settings": asdict(report.settings), "targets": targets}


def report_json(report: Report) -> dict[str, Any]:
    return {
        "meta": {
            "started_at": report.started_at,
            **_meta(report),
            "tasks": [{"id": t.id, "covers": t.covers} for t in report.tasks],
        },
        "runs": [asdict(r) for r in report.runs],
        "totals": [asdict(t) for t in report.totals()],
    }


def report_csv(report: Report) -> str:
    """One row per run, then one ``TOTAL`` row per target; the same figures as the JSON."""
    rows = [
        (
            r.task,
            r.model,
            r.protocol,
            1,
            int(r.success),
            *astuple(r.metrics),
            r.stop_reason,
            "; ".join(r.failures),
        )
        for r in report.runs
    ]
    rows += [
        ("TOTAL", t.model, t.protocol, t.runs, t.successes, *astuple(t.metrics), "", "")
        for t in report.totals()
    ]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([CSV_FIELDS, *rows])
    return buffer.getvalue()


def write_outputs(report: Report, out_dir: Path, *, plot: bool = True) -> list[Path]:
    """Write ``comparison.json``, ``.csv``, ``.txt`` and (with matplotlib) ``.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / f"comparison.{kind}" for kind in ("json", "csv", "txt")]
    texts = (json_text(report_json(report)), report_csv(report), format_report(report) + "\n")
    for path, text in zip(written, texts, strict=True):
        path.write_text(text, encoding="utf-8")
    if plot and (png := plot_report(report, out_dir / "comparison.png")) is not None:
        written.append(png)
    return written


def plot_report(report: Report, path: Path) -> Path | None:
    """A bar chart per figure of the totals, one bar per target; ``None`` without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    totals = report.totals()
    labels = [
        f"{t.model}\n{t.protocol}" if len({x.model for x in totals}) > 1 else t.protocol
        for t in totals
    ]
    panels: list[tuple[str, list[float]]] = [("tasks solved", [float(t.successes) for t in totals])]
    panels += [
        (title, [float(getattr(t.metrics, name)) for t in totals]) for name, title, _ in METRICS
    ]
    cols = 3
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]
    for i, (title, values) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        bars = ax.bar(range(len(values)), values, color=colors)  # cycled past the sixth bar
        ax.bar_label(
            bars,
            labels=[f"{v:,.2f}" if title.startswith("wall") else f"{v:,.0f}" for v in values],
            fontsize=8,
        )
        ax.set_xticks(range(len(values)), labels, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.15)
    fig.suptitle(
        f"Protocol comparison: {len(report.tasks)} tasks, seed {report.settings.seed}"
        f" ({report.source or 'endpoint'})",
        fontsize=11,
    )
    fig.savefig(path, dpi=110)
    return path
