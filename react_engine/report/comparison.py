"""A comparison (``react-engine compare --html FILE``) as one HTML page."""

from __future__ import annotations

from ..compare.run import METRICS, Report, TaskRun
from .page import esc, page, slug
from .run import run_section
from .svg import bar_chart

__all__ = ["comparison_html", "run_anchor"]


def run_anchor(run: TaskRun) -> str:
    """The id of a run's section in the page."""
    return slug("run", run.task, run.model, run.protocol)


def _cell(run: TaskRun | None) -> str:
    if run is None:
        return '<td class="missing">not run</td>'
    m = run.metrics
    verdict = "solved" if run.success else "FAILED"
    return (
        f'<td class="{"pass" if run.success else "fail"}" data-task="{esc(run.task)}" '
        f'data-protocol="{esc(run.protocol)}">'
        f'<a href="#{esc(run_anchor(run))}">{verdict}</a><br>'
        f"<small>{m.llm_calls} LLM · {m.tool_calls} tools · "
        f"{m.prompt_tokens:,}+{m.completion_tokens:,} tok · {m.wall_s:.2f} s</small></td>"
    )


def _charts(report: Report) -> str:
    totals = report.totals()
    many = len({t.model for t in totals}) > 1
    names = [f"{t.model} · {t.protocol}" if many else t.protocol for t in totals]
    panels = [bar_chart("tasks solved", names, [("solved", [float(t.successes) for t in totals])])]
    for field, title, _ in METRICS:
        values = [float(getattr(t.metrics, field)) for t in totals]
        label = (lambda v: f"{v:.2f}") if field == "wall_s" else (lambda v: f"{v:,.0f}")
        panels.append(bar_chart(title, names, [(title, values)], label=label))
    return f'<div class="charts">{"".join(panels)}</div>'


def _table(report: Report) -> str:
    by_key = {(r.task, r.model, r.protocol): r for r in report.runs}
    head = "".join(f"<th>{esc(t.label)}</th>" for t in report.targets)
    rows = []
    for task in report.tasks:
        cells = "".join(_cell(by_key.get((task.id, t.model, t.protocol))) for t in report.targets)
        rows.append(
            f'<tr class="task-row"><th title="{esc(task.covers)}">{esc(task.id)}</th>{cells}</tr>'
        )
    totals = "".join(
        f'<td class="num">{t.successes}/{t.runs} solved<br><small>{t.metrics.llm_calls} LLM · '
        f"{t.metrics.prompt_tokens:,}+{t.metrics.completion_tokens:,} tok</small></td>"
        for t in report.totals()
    )
    return (
        f'<table class="comparison"><thead><tr><th>task</th>{head}</tr></thead><tbody>'
        f'{"".join(rows)}<tr class="totals"><th>TOTAL</th>{totals}</tr></tbody></table>'
    )


def _run(run: TaskRun) -> str:
    failures = "".join(f"<li>{esc(f)}</li>" for f in run.failures)
    extra = (
        f'<div class="notice check">the check failed:<ul>{failures}</ul></div>'
        if failures
        else '<p class="check">the check passed</p>'
    )
    extra += '<p class="back"><a href="#table">back to the table</a></p>'
    heading = f"{run.task} · {run.model} · {run.protocol}"
    return run_section(run.trace, anchor=run_anchor(run), heading=heading, extra=extra)


def comparison_html(report: Report) -> str:
    """The whole comparison as an HTML page."""
    s = report.settings
    models = list(dict.fromkeys(t.model for t in report.targets))
    title = f"react-engine compare: {len(report.tasks)} tasks × {len(report.targets)} targets"
    sub = (
        f"models: {', '.join(models)} · ran on: {report.source or 'an endpoint'} · seed {s.seed}"
        f" · temperature {s.temperature:g} · max_tokens {s.max_tokens} · tool_choice "
        f"{s.tool_choice} · started {report.started_at}"
    )
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{esc(sub)}</p>',
        _charts(report),
        '<h2 id="table">Each task under each protocol</h2>',
        _table(report),
        "<h2>The runs</h2>",
        *(_run(r) for r in report.runs),
    ]
    return page(title, body)
