"""One run as HTML, from its trace records (``RunResult.trace()``, or a stored run's:
:func:`stored_run_records`), and why a run stopped in words (the terminal's too)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..parsing.repairs import REPAIRS, is_lossy
from ..store.runs import RunInfo
from ..types import Step, Usage, to_jsonable
from .page import block, esc, fold, page, slug
from .svg import bar_chart

__all__ = ["STATUS", "STOPPED", "reason_words", "run_html", "run_section", "stored_run_records"]

Record = Mapping[str, Any]

STATUS: Mapping[str, tuple[str, str]] = {
    "ok": ("ok", "ran"),
    "unknown_tool": ("refused", "refused: no such tool"),
    "invalid_arguments": ("refused", "refused: arguments not valid"),
    "denied": ("refused", "refused: not approved"),
    "skipped": ("held", "held back"),
    "error": ("failed", "the tool failed"),
    "timeout": ("failed", "the tool timed out"),
}
"""Each call status as the report shows it: its CSS class and its words."""


def _seconds(value: Any) -> str:
    return f"{float(value or 0.0):.2f} s"


def _tokens(usage: Mapping[str, Any]) -> str:
    cached = usage.get("cached_tokens") or 0
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    text = f"{prompt:,} prompt + {completion:,} completion"
    return text + (f" ({cached:,} cached)" if cached else "")


def _repairs(codes: Sequence[str], lossy: Sequence[str] = ()) -> str:
    if not codes:
        return ""
    items = ['<li class="label">repairs</li>']
    for code in codes:
        entry = REPAIRS.get(code.removeprefix("json:"))
        kind = "lossy: a value was guessed" if code in lossy or is_lossy(code) else "lossless"
        what = f": {entry.what}" if entry is not None else ""
        items.append(f"<li><code>{esc(code)}</code> ({kind}){esc(what)}</li>")
    return f'<ul class="repairs" title="repairs">{"".join(items)}</ul>'


def _call(action: Record) -> str:
    status = str(action.get("status", "ok"))
    cls, words = STATUS.get(status, ("failed", status))
    badges = f'<span class="badge {cls}">{esc(words)}</span>'
    if action.get("salvaged"):
        badges += '<span class="badge salvaged">salvaged from text</span>'
    given = action.get("arguments")
    arguments = (
        json.dumps(given, ensure_ascii=False, indent=2) if isinstance(given, dict) else str(given)
    )
    raw = str(action.get("raw_arguments") or "")
    written = ""
    if raw and raw.strip() != arguments.strip() and raw != json.dumps(given):
        written = f'<div class="label">as written</div>{fold(raw, "raw-arguments")}'
    said = "what the engine told the model" if cls != "ok" else "observation"
    error = action.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if cls == "ok" and code:
        said = "observation (with the engine's note)"
    observation = str(action.get("observation") or "")
    return (
        f'<div class="call call-{cls}" data-status="{esc(status)}" '
        f'data-tool="{esc(action.get("tool", ""))}">'
        f'<div class="call-head"><span class="label">action</span> '
        f"<code>{esc(action.get('tool', ''))}</code>{badges} "
        f'<span class="figures">{_seconds(action.get("duration_s"))}</span></div>'
        f"{fold(arguments, 'arguments')}{written}"
        f"{_repairs(action.get('repairs') or [], action.get('lossy') or [])}"
        f'<div class="label">{esc(said)}</div>'
        + (f'<div class="code">code <code>{esc(code)}</code></div>' if code else "")
        + f"{fold(observation, 'observation')}</div>"
    )


def _step(step: Record, anchor: str) -> str:
    number = int(step.get("index", 0)) + 1
    kind = str(step.get("kind", "action"))
    usage = step.get("usage") or {}
    figures = (
        f"{_tokens(usage)} · model {_seconds(step.get('model_time_s'))} · "
        f"step {_seconds(step.get('duration_s'))}"
    )
    parts = [
        f'<li class="step {esc(kind)}" id="{esc(slug(anchor, "step", number))}" '
        f'data-kind="{esc(kind)}">',
        f'<div class="step-head"><h3>Step {number}</h3><span>{esc(step.get("protocol", ""))} · '
        f'{esc(kind.replace("_", " "))}</span><span class="figures">{esc(figures)}</span></div>',
    ]
    parts += [f'<div class="notice">{esc(n)}</div>' for n in step.get("events") or ()]
    if step.get("reasoning"):
        parts.append(f'<div class="label">reasoning</div>{fold(step["reasoning"], "reasoning")}')
    if step.get("thought"):
        parts.append(f'<div class="label">thought</div>{fold(step["thought"], "thought")}')
    parts += [_call(a) for a in step.get("actions") or ()]
    if kind == "format_error":
        parts.append(
            '<div class="label">unusable reply: what the engine told the model</div>'
            + fold(str(step.get("feedback") or ""), "feedback")
        )
    if step.get("final_answer") is not None:
        parts.append(
            f'<div class="label">final answer</div>{fold(step["final_answer"], "answer final")}'
        )
    text = step.get("text")
    if text and text not in (step.get("thought"), step.get("final_answer")):
        parts.append(
            '<details class="reply"><summary>the reply as written</summary>'
            f"{block(text, 'reply')}</details>"
        )
    own = {c for a in step.get("actions") or () for c in a.get("repairs") or ()}
    parts.append(_repairs([c for c in step.get("repairs") or () if c not in own]))
    parts.append("</li>")
    return "".join(parts)


def _charts(steps: Sequence[Record]) -> str:
    if len(steps) < 2:
        return ""
    names = [str(int(s.get("index", 0)) + 1) for s in steps]
    usage = [s.get("usage") or {} for s in steps]
    tokens = bar_chart(
        "tokens per step",
        names,
        [
            ("prompt", [float(u.get("prompt_tokens", 0)) for u in usage]),
            ("completion", [float(u.get("completion_tokens", 0)) for u in usage]),
        ],
    )
    times = bar_chart(
        "model time per step (s)",
        names,
        [("model time", [float(s.get("model_time_s") or 0.0) for s in steps])],
        label=lambda v: f"{v:.3f}",
    )
    return f'<div class="charts">{tokens}{times}</div>'


def run_section(
    records: Sequence[Record], *, anchor: str = "run", heading: str = "", extra: str = ""
) -> str:
    """A run as one ``<section>`` (its id ``anchor``; steps ``<anchor>-step-N``):
    ``heading`` (plain text) over it, ``extra`` (HTML) under its facts."""
    head = next((r for r in records if r.get("type") == "run"), {})
    foot = next((r for r in records if r.get("type") == "result"), {})
    steps = [r for r in records if r.get("type") == "step"]
    answer = foot.get("answer")
    stop = str(foot.get("stop_reason") or "")
    reason = head.get("protocol_reason")
    why = f" (why: {esc(reason)})" if reason else ""
    calls = sum(len(s.get("actions") or ()) for s in steps)
    totals = f"{len(steps)} steps · {calls} tool calls · {_tokens(foot.get('usage') or {})} tokens"
    facts = [
        ("question", fold(str(head.get("question", "")), "question")),
        ("answer", fold(answer, "answer") if answer is not None else "<em>(none)</em>"),
        ("stop reason", esc(reason_words(stop, answered=answer is not None)) if stop else ""),
        ("model", esc(head.get("model", ""))),
        ("protocol", f"<code>{esc(head.get('protocol', ''))}</code>{why}"),
        ("totals", esc(f"{totals} · {_seconds(foot.get('duration_s'))}")),
    ]
    if foot.get("error"):
        facts.append(("error", block(str(foot["error"]), "error")))
    facts += [
        (
            "awaiting approval",
            f"<code>{esc(call.get('id', ''))}</code> {esc(call.get('tool', ''))}"
            f"{block(str(call.get('raw_arguments', '')), 'arguments')}",
        )
        for call in foot.get("pending") or ()
    ]
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts if v)
    notices = "".join(
        f'<div class="notice run-notice">{esc(n)}</div>' for n in foot.get("events") or ()
    )
    title = f"<h2>{esc(heading)}</h2>" if heading else ""
    timeline = "".join(_step(s, anchor) for s in steps)
    return (
        f'<section class="run-report" id="{esc(slug(anchor))}">{title}'
        f'<dl class="facts">{rows}</dl>{notices}{extra}{_charts(steps)}'
        f'<ol class="timeline">{timeline}</ol></section>'
    )


def run_html(records: Sequence[Record]) -> str:
    """A run's trace records as a whole HTML page (what ``result.to_html()`` returns)."""
    head = next((r for r in records if r.get("type") == "run"), {})
    title = f"react-engine run: {str(head.get('question', ''))[:80]}"
    return page(title, [f"<h1>{esc(title)}</h1>", run_section(records)])


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


def stored_run_records(
    info: RunInfo, steps: Sequence[Step], result: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """What the store kept of a run (no protocol reason; the duration is the time between
    its first and its latest commit)."""
    usage = Usage()
    for step in steps:
        usage.add(step.usage)
    done = result or {}
    return [
        {
            "type": "run",
            "question": info.question,
            "model": info.model,
            "protocol": info.protocol,
            "protocol_reason": None,
        },
        *({**to_jsonable(step), "type": "step"} for step in steps),
        {
            "type": "result",
            "answer": done.get("answer"),
            "stop_reason": done.get("stop_reason") or info.status,
            "usage": to_jsonable(usage),
            "duration_s": max(0.0, info.updated - info.created),
            "error": done.get("error"),
            "events": [],
            "pending": list(done.get("pending") or ()),
        },
    ]
