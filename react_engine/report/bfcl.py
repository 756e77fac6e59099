"""A BFCL evaluation (``react-engine eval bfcl --html FILE``) as one HTML page."""

from __future__ import annotations

import json

from ..eval.bfcl_case import CaseResult
from ..eval.bfcl_report import FIGURE_COLUMNS, Report, figure_cells, settings_words, tallies
from .page import esc, fold, page, slug
from .svg import bar_chart

__all__ = ["bfcl_html", "case_anchor"]


def case_anchor(result: CaseResult) -> str:
    """The id of a case's details under one protocol."""
    return slug("case", result.protocol, result.case)


def _verdict(result: CaseResult) -> tuple[str, str]:
    if result.correct:
        return "pass", "correct"
    if result.decode_failure:
        return "decode", "decode failure"
    return "fail", "no reply" if result.error is not None else "wrong"


def _charts(report: Report) -> str:
    by = tallies(report)
    groups = [*report.categories, "TOTAL"]
    accuracy = [
        (p, [t.correct / t.cases if t.cases else 0.0 for t in mine.values()])
        for p, mine in by.items()
    ]
    totals = [mine["TOTAL"] for mine in by.values()]
    width = max(340, 70 * len(groups) * max(1, len(report.protocols)) // 2)
    failures = [("decode failures", [float(t.decode_failures) for t in totals])]
    per_request = [
        ("prompt", [t.prompt_tokens / max(t.requests, 1) for t in totals]),
        ("completion", [t.completion_tokens / max(t.requests, 1) for t in totals]),
    ]
    panels = [
        bar_chart("accuracy", groups, accuracy, width=width, ceiling=1.0, label="{:.0%}".format),
        bar_chart("decode failures", report.protocols, failures),
        bar_chart("tokens per request", report.protocols, per_request, label="{:,.0f}".format),
    ]
    return f'<div class="charts">{"".join(panels)}</div>'


def _figures(report: Report) -> str:
    rows = "".join(
        f"<tr><th>{esc(protocol)}</th><td>{esc(category)}</td>"
        + "".join(f'<td class="num">{esc(c)}</td>' for c in figure_cells(t))
        + "</tr>"
        for protocol, mine in tallies(report).items()
        for category, t in mine.items()
        if t.cases
    )
    heads = "".join(f"<th>{esc(h)}</th>" for h in FIGURE_COLUMNS)
    return f'<table class="figures"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>'


def _cases(report: Report) -> str:
    by_key = {(r.case, r.protocol): r for r in report.results}
    cases = list(dict.fromkeys(r.case for r in report.results))
    category = {r.case: r.category for r in report.results}
    heads = "".join(f"<th>{esc(p)}</th>" for p in report.protocols)
    rows = []
    for case in cases:
        cells = []
        for protocol in report.protocols:
            result = by_key.get((case, protocol))
            if result is None:
                cells.append('<td class="missing">not run</td>')
                continue
            cls, words = _verdict(result)
            cells.append(
                f'<td class="{cls}" data-case="{esc(case)}" data-protocol="{esc(protocol)}">'
                f'<a href="#{esc(case_anchor(result))}">{esc(words)}</a></td>'
            )
        rows.append(
            f'<tr class="case-row"><th>{esc(case)}</th><td>{esc(category[case])}</td>'
            f"{''.join(cells)}</tr>"
        )
    return (
        f'<table class="cases"><thead><tr><th>case</th><th>category</th>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _detail(result: CaseResult) -> str:
    cls, words = _verdict(result)
    tokens = f"{result.prompt_tokens:,} prompt + {result.completion_tokens:,} completion"
    repaired = " · repaired" if result.repaired else ""
    facts = [
        (
            "verdict",
            f'<span class="badge {"ok" if cls == "pass" else "refused"}">{esc(words)}</span>',
        ),
        ("why", esc(result.reason) if result.reason else ""),
        ("tokens", esc(f"{tokens} · {result.requests} request(s){repaired}")),
        ("error", esc(result.error) if result.error else ""),
    ]
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts if v)
    notices = "".join(f'<div class="notice">{esc(e)}</div>' for e in result.events)
    calls = "".join(
        f'<div class="call"><code>{esc(c.get("name", ""))}</code>'
        f"{fold(json.dumps(c.get('arguments', {}), ensure_ascii=False, indent=2), 'arguments')}"
        "</div>"
        for c in result.calls
    )
    reply = (
        f'<div class="label">the reply</div>{fold(result.reply, "reply")}' if result.reply else ""
    )
    return (
        f'<section class="case" id="{esc(case_anchor(result))}">'
        f"<h3>{esc(result.case)} · {esc(result.protocol)}</h3>"
        f'<dl class="facts">{rows}</dl>{notices}{reply}'
        f'<div class="label">calls made ({len(result.calls)})</div>'
        f"{calls or '<p><em>none</em></p>'}"
        f'<p class="back"><a href="#cases">back to the cases</a></p></section>'
    )


def bfcl_html(report: Report) -> str:
    """The whole evaluation as an HTML page."""
    s = report.settings
    cases = len({r.case for r in report.results})
    title = f"react-engine eval bfcl: {cases} cases × {len(report.protocols)} protocols"
    sub = f"{report.model} ({report.source}) · {settings_words(s)} · started {report.started_at}"
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{esc(sub)}</p>',
        _charts(report),
        "<h2>Figures per protocol and category</h2>",
        _figures(report),
        '<h2 id="cases">Each case under each protocol</h2>',
        _cases(report),
        "<h2>The cases</h2>",
        *(_detail(r) for r in report.results),
    ]
    return page(title, body)
