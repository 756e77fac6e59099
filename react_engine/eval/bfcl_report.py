"""The report of a BFCL run: the table, BFCL's own figures, and its JSON (docs/bfcl.md)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..harness.metrics import Figures, pct, per
from ..harness.report import grid
from ..version import __version__
from .bfcl_case import CaseResult, EvalSettings
from .bfcl_multi_turn import MULTI_TURN_CATEGORIES, step_limit

__all__ = [
    "FIGURE_COLUMNS",
    "NATIVE_FC_DECODE_FAILURE_RATE",
    "PUBLISHED",
    "Report",
    "Tally",
    "bfcl_summary",
    "figure_cells",
    "format_report",
    "report_json",
    "settings_words",
    "tallies",
    "tally",
]

NATIVE_FC_DECODE_FAILURE_RATE = 0.043
"""BFCL's native-FC decode-failure rate (issue 14): the text protocol's target."""

PUBLISHED: Mapping[str, tuple[float, float]] = {"qwen2.5-7b": (44.7, 42.7)}
"""BFCL leaderboard overall scores (FC, Prompt) by lower-case model-name fragment, as issue
14 quotes them (the wheel ships no scores)."""


@dataclass(slots=True)
class Report:
    """Every case of a run under every protocol, and what the run shared."""

    model: str
    source: str
    settings: EvalSettings
    protocols: list[str]
    categories: list[str]
    results: list[CaseResult] = field(default_factory=list)
    started_at: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )


@dataclass(slots=True)
class Tally(Figures):
    """The figures of a set of cases (one row of the table)."""

    cases: int = 0
    correct: int = 0
    decode_failures: int = 0
    errors: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallbacks: int = 0
    repaired: int = 0
    requests: int = 0


def tally(results: Sequence[CaseResult]) -> Tally:
    """The figures of ``results`` together."""
    return Tally.total(
        Tally(
            cases=1,
            correct=int(r.correct),
            decode_failures=int(r.decode_failure),
            errors=int(r.error is not None),
            calls=len(r.calls),
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            fallbacks=int(bool(r.events)),
            repaired=int(r.repaired),
            requests=r.requests if r.error is None else 0,
        )
        for r in results
    )


def tallies(report: Report) -> dict[str, dict[str, Tally]]:
    """Each protocol's figures per category, then in total (``"TOTAL"``)."""
    out = {}
    for protocol in report.protocols:
        mine = [r for r in report.results if r.protocol == protocol]
        out[protocol] = {
            c: tally([r for r in mine if r.category == c]) for c in report.categories
        } | {"TOTAL": tally(mine)}
    return out


def settings_words(s: EvalSettings) -> str:
    """The sampling settings, as the table and the HTML report head them."""
    return (
        f"temperature {s.temperature:g} · seed {s.seed} · max_tokens {s.max_tokens} · "
        f"tool_choice {s.tool_choice}" + ("" if s.constrained else " · no constrained decoding")
    )


def format_report(report: Report) -> str:
    """The table: one row per protocol and category, then each protocol's total."""
    s = report.settings
    multi = any(c in MULTI_TURN_CATEGORIES for c in report.categories)
    ast = any(c not in MULTI_TURN_CATEGORIES for c in report.categories)
    steps = [("one step per AST case" if multi else "one step each")] if ast else []
    if multi:
        steps.append(f"up to {s.max_turn_steps or step_limit() + 1} steps a turn")
    lines = [
        f"BFCL · {report.model} ({report.source}) · "
        f"{len({r.case for r in report.results})} cases × {len(report.protocols)} protocol(s)"
        f" · {' · '.join(steps)} · {settings_words(s)}",
        "",
    ]
    by = tallies(report)
    rows = [list(FIGURE_COLUMNS)] + [
        [protocol, category, *figure_cells(t)]
        for protocol, mine in by.items()
        for category, t in mine.items()
        if t.cases
    ]
    lines += grid(rows, numeric_from=2)
    lines += [
        "",
        "accuracy: calls accepted by the AST checker (irrelevance: no call) · decode fail: "
        "replies the protocol could not read as a call or an answer · tok/call: tokens of the "
        "one request per case · fallbacks: cases with a protocol event",
    ]
    if multi:
        lines.append(
            "multi-turn accuracy: BFCL's own multi-turn checker (state and results after each "
            "turn) · tok/call there: per request, every step of every turn"
        )
    lines += _summary_lines(report)
    text = by["text"]["TOTAL"] if "text" in by else None
    if text is not None and text.cases:
        rate = text.decode_failures / text.cases
        verdict = "meets" if rate <= NATIVE_FC_DECODE_FAILURE_RATE else "misses"
        lines.append(
            f"text protocol decode failures: {pct(text.decode_failures, text.cases)} · target: at"
            f" or below BFCL's native-FC rate, {100 * NATIVE_FC_DECODE_FAILURE_RATE:.1f}% "
            f"(issue 14): {verdict} it"
        )
    errors = sum(mine["TOTAL"].errors for mine in by.values())
    if errors:
        lines.append(f"{errors} case(s) got no reply (API errors): counted as wrong")
    name = report.model.lower()
    published = next((v for k, v in PUBLISHED.items() if k in name), None)
    if published is not None:
        fc, prompt = published
        lines.append(
            f"BFCL leaderboard, overall score for this model: FC {fc} / Prompt {prompt} "
            "(all BFCL categories, not only these five: compare the gap, not the level)"
        )
    return "\n".join(lines)


NON_LIVE_CALLS = ("simple", "multiple", "parallel", "parallel_multiple")
LIVE_CALLS = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


def bfcl_summary(results: Sequence[CaseResult]) -> dict[str, float | None]:
    """BFCL's own figures for one protocol's results, by leaderboard column (docs/bfcl.md);
    ``None`` where a category they need was not run."""
    by = {c: tally([r for r in results if r.category == c]) for c in {r.category for r in results}}
    acc = {c: t.correct / t.cases for c, t in by.items()}

    def unweighted(cats: Sequence[str]) -> float | None:
        return sum(acc[c] for c in cats) / len(cats) if all(c in acc for c in cats) else None

    def weighted(cats: Sequence[str]) -> float | None:
        if not all(c in acc for c in cats):
            return None
        return sum(acc[c] * by[c].cases for c in cats) / sum(by[c].cases for c in cats)

    return {
        "Python Simple AST": acc.get("simple"),
        "Non-Live AST Summary": unweighted(NON_LIVE_CALLS),
        "Irrelevance": acc.get("irrelevance"),
        "Live AST Summary": weighted(LIVE_CALLS),
        "Live Irrelevance": acc.get("live_irrelevance"),
        **{c.replace("_", " ").title(): acc.get(c) for c in MULTI_TURN_CATEGORIES},
        "Multi Turn Overall Acc": unweighted(MULTI_TURN_CATEGORIES),
    }


def _summary_lines(report: Report) -> list[str]:
    lines = []
    for protocol in report.protocols:
        summary = bfcl_summary([r for r in report.results if r.protocol == protocol])
        shown = [f"{k} {100 * v:.1f}%" for k, v in summary.items() if v is not None]
        if shown:
            lines.append(f"  {protocol}: " + " · ".join(shown))
    if not lines:
        return []
    return [
        "BFCL's own figures, under the leaderboard's column names (TOTAL above is ours, "
        "pooled over every case: no leaderboard column):",
        *lines,
        "  Non-Live AST Summary: unweighted mean of simple, multiple, parallel, "
        "parallel_multiple (Python Simple AST for Simple AST) · Live AST Summary: weighted "
        "by case count · docs/bfcl.md says which column each lines up with",
    ]


def report_json(report: Report) -> dict[str, Any]:
    """The report as JSON: the meta, each protocol's figures, and every case."""
    return {
        "meta": {
            "model": report.model,
            "source": report.source,
            "started_at": report.started_at,
            "settings": asdict(report.settings),
            "protocols": report.protocols,
            "categories": report.categories,
            "react_engine": __version__,
        },
        "totals": {
            p: {c: asdict(t) for c, t in mine.items()} for p, mine in tallies(report).items()
        },
        "bfcl_summary": {
            p: bfcl_summary([r for r in report.results if r.protocol == p])
            for p in report.protocols
        },
        "results": [asdict(r) for r in report.results],
    }


FIGURE_COLUMNS = (
    "protocol",
    "category",
    "cases",
    "accuracy",
    "decode fail",
    "calls",
    "prompt tok/call",
    "compl tok/call",
    "fallbacks",
    "repaired",
)
"""The columns of the figures table, in the terminal and in the HTML report."""


def figure_cells(t: Tally) -> list[str]:
    """A figures row's cells after its protocol and category."""
    return [
        str(t.cases),
        f"{t.correct}/{t.cases} {pct(t.correct, t.cases)}",
        f"{t.decode_failures} {pct(t.decode_failures, t.cases)}",
        str(t.calls),
        per(t.prompt_tokens, t.requests),
        per(t.completion_tokens, t.requests),
        str(t.fallbacks),
        str(t.repaired),
    ]
