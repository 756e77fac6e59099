"""``react-engine eval bfcl``: BFCL's cases under each protocol, graded as BFCL grades.

An AST case (:mod:`react_engine.eval.bfcl_data`) becomes an :class:`~react_engine.Agent`
with the case's functions as tools, run for exactly one model turn: the request is built
and the reply parsed by the protocol as in any run, and the turn's
:class:`~react_engine.types.Step` is scored (:mod:`react_engine.eval.bfcl_checker`). Per
protocol and category the report gives:

* **accuracy**: cases whose calls are an accepted answer (irrelevance: a plain answer and
  no call);
* **decode failures**: replies the protocol could not read as a call or an answer (a
  ``format_error`` step, or a call whose arguments are no JSON object); a failure in every
  category, irrelevance included (where BFCL counts an unreadable reply as "no call");
* **tokens per call**: prompt and completion tokens of the one request, as the server
  counted them;
* **fallbacks**: cases whose step carries an event (a protocol fallback, a dropped
  parameter the server rejected); and **repaired**: replies read only after a repair.

A multi-turn case (:mod:`react_engine.eval.bfcl_multi_turn`) runs each turn through the
whole agent loop, its tools running on BFCL's backends, and is graded by BFCL's own
multi-turn checker. Beside the named protocols, ``bfcl-prompt``
(:mod:`react_engine.eval.bfcl_prompt`) is the text protocol with BFCL's Prompt-mode
system prompt. Under the table, :func:`bfcl_summary` gives BFCL's own figures under the
leaderboard's column names.

Replies come from an endpoint (``OPENAI_BASE_URL``..., or ``--local`` for the embedded
model) and can be recorded (``--record DIR``); ``--scripted [DIR]`` replays recorded
replies through the same request and parse path, with no server: the run is
deterministic, so a test can pin its scores.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, ModelAPIError, ModelRequestError, RunAborted
from ..harness.metrics import Figures, pct, per
from ..harness.report import grid, json_text
from ..harness.runner import Job, Outcome, Progress, run_cases
from ..harness.settings import agent_options
from ..protocols.base import Protocol
from ..protocols.registry import protocol_names
from ..run.agent import Agent
from ..testing import ScriptedModel, ScriptExhausted
from ..transport.base import ChatModel
from ..transport.learned import CapabilityCache
from ..transport.openai_model import OpenAIChatModel
from ..types import (
    HistoryItem,
    ModelRequest,
    ModelResponse,
    Step,
    ToolCall,
    Usage,
    UserTurn,
)
from ..version import __version__
from .bfcl_checker import Call, check_calls
from .bfcl_data import Case, case_tools
from .bfcl_multi_turn import (
    MULTI_TURN_CATEGORIES,
    Backends,
    MultiTurnCase,
    added_functions_prompt,
    call_string,
    calls_json,
    grade,
    step_limit,
    turn_tools,
)
from .bfcl_prompt import BfclPromptProtocol

__all__ = [
    "BFCL_PROMPT",
    "DEFAULT_PROTOCOLS",
    "NATIVE_FC_DECODE_FAILURE_RATE",
    "PUBLISHED",
    "CaseResult",
    "EvalSettings",
    "LiveEndpoint",
    "Recorded",
    "Report",
    "bfcl_summary",
    "eval_protocols",
    "format_report",
    "load_recording",
    "run_bfcl",
    "run_case",
    "run_multi_turn_case",
    "save_recording",
]

DEFAULT_PROTOCOLS: tuple[str, ...] = ("function_calling", "text", "structured")
"""The protocols the eval runs unless ``--protocol`` says otherwise (those recorded in
``fixtures/bfcl``); any registered protocol may be named."""

BFCL_PROMPT = "bfcl-prompt"
"""The text protocol prompted and read as BFCL's Prompt mode
(:mod:`react_engine.eval.bfcl_prompt`): run with ``--protocol bfcl-prompt``."""


def eval_protocols() -> tuple[str, ...]:
    """Every protocol the eval can run: the registry's (as it is now: one registered
    later is in it) and :data:`BFCL_PROMPT`."""
    return (*(p for p in protocol_names() if p != "auto"), BFCL_PROMPT)


NATIVE_FC_DECODE_FAILURE_RATE = 0.043
"""BFCL's decode-failure rate for native function calling on these cases, as issue 14
quotes it: the target our text protocol is measured against."""

PUBLISHED: Mapping[str, tuple[float, float]] = {"qwen2.5-7b": (44.7, 42.7)}
"""BFCL leaderboard overall scores (FC, Prompt) for models users run, keyed by a
lower-case fragment of the model name. Only figures we can source: issue 14 quotes these;
the ``bfcl-eval`` wheel ships no scores."""

DEFAULT_RECORDINGS = Path(__file__).resolve().parents[2] / "fixtures" / "bfcl"
"""Where ``--scripted`` and ``--record`` look without a directory: the checkout's
recorded replies of the embedded model. A source checkout only: an installed wheel does
not ship them (they are test data about one llama.cpp build), so this path then does not
exist and the command says where to get them."""


def default_recordings(flag: str) -> Path:
    """:data:`DEFAULT_RECORDINGS`, or an error that says how to get them when this
    react-engine is installed rather than run from a checkout."""
    if DEFAULT_RECORDINGS.is_dir():
        return DEFAULT_RECORDINGS
    raise ConfigurationError(
        f"{flag} without DIR uses the recordings in a source checkout's fixtures/bfcl/, "
        f"and {DEFAULT_RECORDINGS} does not exist (an installed react-engine does not ship "
        f"them): run from a clone of the repository, or pass {flag} DIR"
    )


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """What every request shares, so that only the protocol differs."""

    temperature: float = 0.0
    """Greedy decoding, so a recording can be made again."""
    seed: int = 42
    max_tokens: int = 256
    """Enough for a few calls; a model that rambles cannot stall a run on a small machine."""
    request_timeout: float = 300.0
    """Seconds per request (a 2-core machine running the local model is slow)."""
    max_attempts: int = 3
    """Network attempts per request (transient failures only)."""
    constrained: bool = True
    """Let protocols constrain decoding where the server supports it (the registry says
    so; the embedded server takes a GBNF grammar). ``False`` measures the parser alone:
    the model may then write anything."""
    tool_choice: str = "auto"
    """``"auto"`` as BFCL runs; ``"required"`` makes every reply a call, which shows what a
    model that would rather answer in prose calls when it must (irrelevance then fails by
    design)."""
    max_turn_steps: int | None = None
    """Multi-turn: steps one turn may take before the case is force-terminated (and
    fails); ``None``: BFCL's own limit (``MAXIMUM_STEP_LIMIT``, 20, plus the step that
    passes it, as BFCL counts)."""


@dataclass(slots=True)
class CaseResult:
    """One case under one protocol."""

    case: str
    category: str
    protocol: str
    correct: bool
    decode_failure: bool
    reason: str
    """Why the case failed (the checker's words, or the protocol's feedback)."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """What the model called: BFCL names and the arguments as decoded."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    events: list[str] = field(default_factory=list)
    repaired: bool = False
    error: str | None = None
    """An API failure that left the case without a reply (not counted as a decode failure)."""
    requests: int = 1
    """Model requests the case made (multi-turn: every step of every turn)."""
    reply: str | None = None
    """What the model wrote, as the protocol kept it (an AST case's one reply; ``None``
    for a multi-turn case, and a case without a reply): the HTML report shows it."""


@dataclass(slots=True)
class Report:
    model: str
    source: str
    settings: EvalSettings
    protocols: list[str]
    categories: list[str]
    results: list[CaseResult] = field(default_factory=list)
    started_at: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )


# --- one step --------------------------------------------------------------------------------


class _StepTaken(Exception):
    """Raised from ``on_step`` to end a run after its first turn; carries the step."""

    def __init__(self, step: Step) -> None:
        super().__init__("one step taken")
        self.step = step


def _stop_after_first(step: Step) -> None:
    raise _StepTaken(step)


class _Tap(ChatModel):
    """Passes requests to a model and keeps the replies, for ``--record``."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.base_url = inner.base_url
        self.last: ModelResponse | None = None
        self.replies: list[ModelResponse] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.last = None
        reply = await self.inner.complete(request)
        self.last = reply
        self.replies.append(reply)
        return reply


def score_step(case: Case, protocol: str, step: Step, names: Mapping[str, str]) -> CaseResult:
    """Score the one step a case got (see the module docstring for the figures)."""
    calls = [
        Call(names.get(a.tool, a.tool), a.arguments if isinstance(a.arguments, dict) else {})
        for a in step.actions
    ]
    unreadable = [a for a in step.actions if a.status == "invalid_arguments"]
    decode_failure = step.kind == "format_error" or bool(unreadable)
    if step.kind == "format_error":
        first = (step.feedback or "").strip().splitlines()[:1]
        verdict_ok, reason = False, f"format error: {first[0] if first else ''}".strip()
    elif unreadable:
        verdict_ok, reason = False, f"unreadable arguments: {unreadable[0].error or ''}".strip()
    else:
        verdict = check_calls(case.category, case.functions, calls, case.answers)
        verdict_ok, reason = verdict.ok, verdict.reason
    return CaseResult(
        case=case.id,
        category=case.category,
        protocol=protocol,
        correct=verdict_ok,
        decode_failure=decode_failure,
        reason=reason,
        calls=[{"name": c.name, "arguments": dict(c.arguments)} for c in calls],
        prompt_tokens=step.usage.prompt_tokens,
        completion_tokens=step.usage.completion_tokens,
        events=[notice.message for notice in step.notices],
        repaired=bool(step.repairs) or any(a.salvaged for a in step.actions),
        reply=step.text,
    )


async def run_case(
    case: Case,
    protocol: str,
    model: ChatModel,
    model_name: str,
    settings: EvalSettings,
) -> CaseResult:
    """One model turn on ``case`` under ``protocol``, scored."""
    tools, names = case_tools(case)
    agent = Agent(
        model_name,
        tools,
        protocol=case_protocol(case, protocol),
        instructions=case.system,
        client=model,
        on_step=_stop_after_first,
        max_steps=1,
        **agent_options(settings, _case_cache(model, model_name, settings)),
    )
    try:
        result = await agent.arun(case.question, history=case_history(case, protocol))
    except _StepTaken as taken:
        return score_step(case, protocol, taken.step, names)
    except ModelAPIError as exc:
        if isinstance(exc, ModelRequestError) and exc.status_code in (401, 403, 404):
            raise  # every case would fail the same way
        return CaseResult(
            case.id, case.category, protocol, False, False, "no reply", error=str(exc)
        )
    # Unreachable with on_step raising, unless a limit ended the run before any step.
    return CaseResult(
        case.id, case.category, protocol, False, False, f"no step ({result.stop_reason})"
    )


def _case_cache(model: ChatModel, model_name: str, settings: EvalSettings) -> CapabilityCache:
    """A case's own capability cache: nothing learned leaks from case to case."""
    cache = CapabilityCache()
    if not settings.constrained:
        cache.remember(model.base_url, model_name, constrained_decoding=False)
    return cache


async def run_multi_turn_case(
    case: MultiTurnCase,
    protocol: str,
    model: ChatModel,
    model_name: str,
    settings: EvalSettings,
) -> CaseResult:
    """A multi-turn case: each turn one run of the agent loop on the conversation so far,
    the tools running on the case's BFCL backends; graded by BFCL's checker."""
    cache = _case_cache(model, model_name, settings)
    limit = settings.max_turn_steps or step_limit() + 1
    backends = Backends(case)
    history: list[HistoryItem] = []
    decoded: list[list[list[str]]] = []
    steps: list[Step] = []
    error: str | None = None
    try:
        backends.execute([])  # the instances exist from the start, as in BFCL's inference
        for turn, message in enumerate(case.turns):
            functions = case.functions_at(turn)
            tools, names = turn_tools(functions, backends)
            agent = Agent(
                model_name,
                tools,
                protocol=BfclPromptProtocol(functions) if protocol == BFCL_PROMPT else protocol,
                client=model,
                max_steps=limit,
                **agent_options(settings, cache),
            )
            try:
                result = await agent.arun(message or added_functions_prompt(), history=history)
            except RunAborted as aborted:  # too many failed steps: the turn ends there
                result = aborted.result
            steps += result.steps
            turn_calls: list[list[str]] = []
            for step in result.steps:
                made = [
                    call_string(names[a.tool], a.arguments)
                    for a in step.actions
                    if a.tool in names
                    and isinstance(a.arguments, dict)
                    and a.status != "invalid_arguments"
                ]
                if any(c is not None for c in made):
                    turn_calls.append([c for c in made if c is not None])
            decoded.append(turn_calls)
            if result.stop_reason == "max_steps":
                break  # force-terminated: BFCL fails the case
        correct, reason = grade(case, decoded, backends)
    except ModelAPIError as exc:
        if isinstance(exc, ModelRequestError) and exc.status_code in (401, 403, 404):
            raise
        correct, reason, error = False, "no reply", str(exc)
    except ScriptExhausted as exc:
        correct, reason, error = False, "no reply", f"the recording has no more replies: {exc}"
    finally:
        backends.close()
    unreadable = any(a.status == "invalid_arguments" for s in steps for a in s.actions)
    return CaseResult(
        case=case.id,
        category=case.category,
        protocol=protocol,
        correct=correct,
        decode_failure=any(s.kind == "format_error" for s in steps) or unreadable,
        reason=reason,
        calls=calls_json(decoded),
        prompt_tokens=sum(s.usage.prompt_tokens for s in steps),
        completion_tokens=sum(s.usage.completion_tokens for s in steps),
        events=[notice.message for s in steps for notice in s.notices],
        repaired=any(s.repairs or any(a.salvaged for a in s.actions) for s in steps),
        error=error,
        requests=len(steps),
    )


def case_protocol(case: Case, protocol: str) -> str | Protocol:
    """The protocol to run ``case`` under: a name, or BFCL's Prompt mode for its functions."""
    return BfclPromptProtocol(case.functions) if protocol == BFCL_PROMPT else protocol


def case_history(case: Case, protocol: str) -> list[HistoryItem]:
    """The exchange a (live) case carries before its question: user turns, and the
    assistant's earlier replies as answered steps."""
    items: list[HistoryItem] = []
    for role, content in case.history:
        if role == "user":
            items.append(UserTurn(content))
        else:
            # The reply as it was written, sent back verbatim by every protocol.
            step = Step(
                index=0, kind="final", protocol=protocol, text=content, final_answer=content
            )
            items.append(step)
    return items


# --- recordings ------------------------------------------------------------------------------


def _reply_json(reply: ModelResponse) -> dict[str, Any]:
    return {
        "content": reply.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
        ],
        "reasoning": reply.reasoning,
        "finish_reason": reply.finish_reason,
        "usage": {
            "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
        },
    }


def _reply_from_json(data: Mapping[str, Any]) -> ModelResponse:
    usage = data.get("usage") or {}
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return ModelResponse(
        content=data.get("content"),
        tool_calls=[
            ToolCall(c.get("id"), c["name"], c["arguments"]) for c in data.get("tool_calls", ())
        ],
        reasoning=data.get("reasoning"),
        finish_reason=data.get("finish_reason"),
        usage=Usage(prompt, completion, prompt + completion, 0, 1),
    )


Recorded = ModelResponse | list[ModelResponse]
"""A case's recorded replies: one (an AST case), or every reply in order (multi-turn)."""


def _recorded_json(value: Recorded) -> Any:
    if isinstance(value, list):
        return [_reply_json(v) for v in value]
    return _reply_json(value)


def _recorded_from_json(data: Any) -> Recorded:
    if isinstance(data, list):
        return [_reply_from_json(v) for v in data]
    return _reply_from_json(data)


def save_recording(
    directory: Path, protocol: str, replies: Mapping[str, Recorded], meta: Mapping[str, Any]
) -> Path:
    """Write ``<protocol>.json``: the meta and each case's raw reply (multi-turn: the list
    of its replies), keyed by case id."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{protocol}.json"
    body = {"meta": dict(meta), "replies": {k: _recorded_json(v) for k, v in replies.items()}}
    path.write_text(json_text(body, indent=1), encoding="utf-8")
    return path


def load_recording(directory: Path, protocol: str) -> tuple[dict[str, Any], dict[str, Recorded]]:
    """The meta and the replies recorded for ``protocol`` in ``directory``."""
    path = directory / f"{protocol}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        replies = {k: _recorded_from_json(v) for k, v in data["replies"].items()}
    except FileNotFoundError:
        raise ConfigurationError(
            f"no recorded {protocol} replies in {directory} (record them with --record)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"cannot read the recording {path}: {exc}") from None
    return dict(data.get("meta") or {}), replies


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveEndpoint:
    """A model at an OpenAI-compatible endpoint."""

    model: str
    base_url: str | None
    api_key: str | None
    where: str = ""


AnyCase = Case | MultiTurnCase


async def _run_job(
    job: Job, live: ChatModel | None, model_name: str, settings: EvalSettings
) -> tuple[CaseResult, Any]:
    """One case under one protocol; the replies it got, as recorded, when it ran live."""
    case, protocol = job.case, job.protocol
    if live is not None:
        model: ChatModel = _Tap(live)
    else:
        reply = job.replies
        model = ScriptedModel(list(reply) if isinstance(reply, list) else [reply])
    if isinstance(case, MultiTurnCase):
        result = await run_multi_turn_case(case, protocol, model, model_name, settings)
    else:
        result = await run_case(case, protocol, model, model_name, settings)
    replies: Any = None
    if isinstance(model, _Tap):
        if isinstance(case, MultiTurnCase):
            replies = _recorded_json(list(model.replies))
        elif model.last is not None:
            replies = _recorded_json(model.last)
    return result, replies


def _connect_live(endpoint: LiveEndpoint | None) -> ChatModel | None:
    if endpoint is None:
        return None
    return OpenAIChatModel.connect(
        endpoint.base_url, endpoint.api_key or "sk-no-key-required", asynchronous=True
    )


def _ray_job(
    endpoint: LiveEndpoint | None, model_name: str, settings: EvalSettings, job: Job
) -> tuple[CaseResult, Any]:
    """A job as a Ray task: in the worker, on an event loop of its own."""
    return asyncio.run(_run_job(job, _connect_live(endpoint), model_name, settings))


def _ray_failed(job: Job, why: str) -> tuple[CaseResult, Any]:
    """A case whose Ray worker died: not answered, saying why (not a decode failure)."""
    case = job.case
    result = CaseResult(case.id, case.category, job.protocol, False, False, why, error=why)
    return result, None


def _verdict(result: CaseResult) -> str:
    return "ok" if result.correct else ("DECODE" if result.decode_failure else "no")


def run_bfcl(
    cases: Sequence[AnyCase],
    protocols: Sequence[str],
    *,
    endpoint: LiveEndpoint | None = None,
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
    """Every case under every protocol: live at ``endpoint``, or from ``recorded`` replies
    (``{protocol: {case id: reply, or a multi-turn case's replies}}``). ``record``, when
    given, collects the live replies.

    ``concurrency``: cases run at once, as async runs in this process; ``ray``: run them
    as tasks on the Ray cluster at that address (``""``: a local one). ``results``: a
    JSONL file each case's record is appended to as it finishes; ``resume`` skips the
    cases already there. The report's results are in the same order however they ran
    (:mod:`react_engine.harness.runner`)."""
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
        model=endpoint.model if endpoint is not None else model,
        source=endpoint.where if endpoint is not None else source,
        settings=settings or EvalSettings(),
        protocols=list(protocols),
        categories=list(dict.fromkeys(c.category for c in cases)),
    )
    replayed = recorded or {}
    jobs = [
        Job(i, protocol, case, None if endpoint is not None else replayed[protocol][case.id])
        for i, (protocol, case) in enumerate((p, c) for p in protocols for c in cases)
    ]
    progress = Progress(len(jobs), sys.stderr)
    if quiet:
        progress.live = False

    def finished(job: Job, outcome: Outcome, done: int, total: int) -> str | None:
        if quiet:
            return None
        return f"[{done:>4}/{total}] {job.protocol:<16} {job.case.id:<24} " + _verdict(outcome[0])

    live = _connect_live(endpoint) if ray is None else None
    outcomes = run_cases(
        jobs,
        lambda job: _run_job(job, live, report.model, report.settings),
        result_type=CaseResult,
        meta={"model": report.model, "source": report.source, "settings": asdict(report.settings)},
        results=results,
        resume=resume,
        concurrency=concurrency,
        ray=ray,
        ray_worker=functools.partial(_ray_job, endpoint, report.model, report.settings),
        ray_failed=_ray_failed,
        progress=progress,
        on_done=finished,
    )
    for job, (result, replies) in zip(jobs, outcomes, strict=True):
        report.results.append(result)
        if record is not None and replies is not None:
            record.setdefault(job.protocol, {})[job.case.id] = _recorded_from_json(replies)
    return report


# --- the table -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally(Figures):
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

    @classmethod
    def of(cls, r: CaseResult) -> _Tally:
        """One case's figures."""
        return cls(
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


def tally(results: Sequence[CaseResult]) -> _Tally:
    return _Tally.total(_Tally.of(r) for r in results)


def format_report(report: Report) -> str:
    """The table: one row per protocol and category, then each protocol's total."""
    s = report.settings
    multi = any(c in MULTI_TURN_CATEGORIES for c in report.categories)
    ast = any(c not in MULTI_TURN_CATEGORIES for c in report.categories)
    steps = []
    if ast:
        steps.append("one step per AST case" if multi else "one step each")
    if multi:
        steps.append(f"up to {s.max_turn_steps or step_limit() + 1} steps a turn")
    lines = [
        f"BFCL · {report.model} ({report.source}) · "
        f"{len({r.case for r in report.results})} cases × {len(report.protocols)} protocol(s)"
        f" · {' · '.join(steps)} · temperature {s.temperature:g} · seed {s.seed} · "
        f"max_tokens {s.max_tokens} · tool_choice {s.tool_choice}"
        + ("" if s.constrained else " · no constrained decoding"),
        "",
    ]
    head = [
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
    ]
    rows = [head]
    totals: dict[str, _Tally] = {}
    for protocol in report.protocols:
        mine = [r for r in report.results if r.protocol == protocol]
        totals[protocol] = tally(mine)
        for category in [*report.categories, "TOTAL"]:
            t = (
                totals[protocol]
                if category == "TOTAL"
                else tally([r for r in mine if r.category == category])
            )
            if not t.cases:
                continue
            rows.append(
                [
                    protocol,
                    category,
                    str(t.cases),
                    f"{t.correct}/{t.cases} {pct(t.correct, t.cases)}",
                    f"{t.decode_failures} {pct(t.decode_failures, t.cases)}",
                    str(t.calls),
                    per(t.prompt_tokens, t.requests),
                    per(t.completion_tokens, t.requests),
                    str(t.fallbacks),
                    str(t.repaired),
                ]
            )
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
    text = totals.get("text")
    if text is not None and text.cases:
        rate = text.decode_failures / text.cases
        verdict = "meets" if rate <= NATIVE_FC_DECODE_FAILURE_RATE else "misses"
        lines.append(
            f"text protocol decode failures: {pct(text.decode_failures, text.cases)} · target: at"
            f" or below BFCL's native-FC rate, {100 * NATIVE_FC_DECODE_FAILURE_RATE:.1f}% "
            f"(issue 14): {verdict} it"
        )
    errors = sum(t.errors for t in totals.values())
    if errors:
        lines.append(f"{errors} case(s) got no reply (API errors): counted as wrong")
    published = _published(report.model)
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
    """BFCL's own figures for one protocol's results, under the leaderboard's column names
    (``None`` where a category they need was not run):

    * **Python Simple AST**: our ``simple`` (BFCL's ``simple_python``);
    * **Non-Live AST Summary**: the *unweighted* mean of Simple, Multiple, Parallel and
      Parallel Multiple AST, as BFCL computes it, with Python Simple AST standing for
      Simple AST (BFCL averages Python, Java and JavaScript there; we run Python only);
    * **Irrelevance**, **Live Irrelevance**: as run;
    * **Live AST Summary**: the mean of the four live call categories *weighted* by their
      case counts (BFCL weights the live ones, not the non-live ones);
    * **Multi Turn** figures per category, and their unweighted mean as **Multi Turn
      Overall Acc** when all four ran.
    """
    acc: dict[str, float] = {}
    count: dict[str, int] = {}
    for category in {r.category for r in results}:
        t = tally([r for r in results if r.category == category])
        acc[category], count[category] = t.correct / t.cases, t.cases

    def unweighted(cats: Sequence[str]) -> float | None:
        return sum(acc[c] for c in cats) / len(cats) if all(c in acc for c in cats) else None

    def weighted(cats: Sequence[str]) -> float | None:
        if not all(c in acc for c in cats):
            return None
        return sum(acc[c] * count[c] for c in cats) / sum(count[c] for c in cats)

    return {
        "Python Simple AST": acc.get("simple"),
        "Non-Live AST Summary": unweighted(NON_LIVE_CALLS),
        "Irrelevance": acc.get("irrelevance"),
        "Live AST Summary": weighted(LIVE_CALLS),
        "Live Irrelevance": acc.get("live_irrelevance"),
        "Multi Turn Base": acc.get("multi_turn_base"),
        "Multi Turn Miss Func": acc.get("multi_turn_miss_func"),
        "Multi Turn Miss Param": acc.get("multi_turn_miss_param"),
        "Multi Turn Long Context": acc.get("multi_turn_long_context"),
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


def _published(model: str) -> tuple[float, float] | None:
    name = model.lower()
    return next((v for k, v in PUBLISHED.items() if k in name), None)


def report_json(report: Report) -> dict[str, Any]:
    totals = {}
    for protocol in report.protocols:
        mine = [r for r in report.results if r.protocol == protocol]
        totals[protocol] = {
            c: asdict(tally([r for r in mine if r.category == c])) for c in report.categories
        } | {"TOTAL": asdict(tally(mine))}
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
        "totals": totals,
        "bfcl_summary": {
            p: bfcl_summary([r for r in report.results if r.protocol == p])
            for p in report.protocols
        },
        "results": [asdict(r) for r in report.results],
    }
