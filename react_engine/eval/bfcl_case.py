"""One BFCL case under one protocol, run through the engine and scored: an AST case for
exactly one model turn, a multi-turn case through the whole agent loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelAPIError, ModelRequestError, RunAborted
from ..harness.settings import RunSettings, agent_options
from ..protocols.base import Protocol
from ..run.agent import Agent
from ..testing import ScriptExhausted
from ..transport.base import ChatModel
from ..transport.learned import CapabilityCache
from ..types import HistoryItem, Step, UserTurn
from .bfcl_checker import Call, check_calls
from .bfcl_data import Case, case_tools
from .bfcl_multi_turn import (
    Backends,
    MultiTurnCase,
    added_functions_prompt,
    call_string,
    calls_json,
    grade,
    step_limit,
    turn_tools,
)
from .bfcl_prompt import BFCL_PROMPT, BfclPromptProtocol

__all__ = ["CaseResult", "EvalSettings", "run_case", "run_multi_turn_case", "score_step"]


@dataclass(frozen=True, slots=True)
class EvalSettings(RunSettings):
    """What every request shares, so that only the protocol differs."""

    constrained: bool = True
    """Let protocols constrain decoding; ``False`` measures the parser alone."""
    max_turn_steps: int | None = None
    """Multi-turn: steps one turn may take before the case fails; ``None``: BFCL's own limit
    (plus the step that passes it, as BFCL counts)."""


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
    """An AST case's one reply as the protocol kept it, for the HTML report."""


class _StepTaken(Exception):
    """Raised from ``on_step`` to end a run after its first turn; carries the step."""


def _stop_after_first(step: Step) -> None:
    raise _StepTaken(step)


def _result(
    case: Case | MultiTurnCase,
    protocol: str,
    steps: Sequence[Step],
    correct: bool,
    reason: str,
    calls: list[dict[str, Any]],
    **more: Any,
) -> CaseResult:
    """A case's result from the steps it took: a reply the protocol could not read, or a
    call with unreadable arguments, is a decode failure."""
    return CaseResult(
        case=case.id,
        category=case.category,
        protocol=protocol,
        correct=correct,
        decode_failure=any(
            s.kind == "format_error" or any(a.status == "invalid_arguments" for a in s.actions)
            for s in steps
        ),
        reason=reason,
        calls=calls,
        prompt_tokens=sum(s.usage.prompt_tokens for s in steps),
        completion_tokens=sum(s.usage.completion_tokens for s in steps),
        events=[notice.message for s in steps for notice in s.notices],
        repaired=any(s.repairs or any(a.salvaged for a in s.actions) for s in steps),
        **more,
    )


def score_step(case: Case, protocol: str, step: Step, names: Mapping[str, str]) -> CaseResult:
    """Score the one step a case got."""
    calls = [
        Call(names.get(a.tool, a.tool), a.arguments if isinstance(a.arguments, dict) else {})
        for a in step.actions
    ]
    unreadable = [a for a in step.actions if a.status == "invalid_arguments"]
    if step.kind == "format_error":
        first = (step.feedback or "").strip().splitlines()[:1]
        correct, reason = False, f"format error: {first[0] if first else ''}".strip()
    elif unreadable:
        correct, reason = False, f"unreadable arguments: {unreadable[0].error or ''}".strip()
    else:
        verdict = check_calls(case.category, case.functions, calls, case.answers)
        correct, reason = verdict.ok, verdict.reason
    made = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
    return _result(case, protocol, [step], correct, reason, made, reply=step.text)


async def run_case(
    case: Case, protocol: str, model: ChatModel, model_name: str, settings: EvalSettings
) -> CaseResult:
    """One model turn on ``case`` under ``protocol``, scored."""
    tools, names = case_tools(case.functions)
    agent = Agent(
        model_name,
        tools,
        protocol=_protocol(case.functions, protocol),
        instructions=case.system,
        client=model,
        on_step=_stop_after_first,
        max_steps=1,
        **agent_options(settings, _case_cache(model, model_name, settings)),
    )
    try:
        result = await agent.arun(case.question, history=_case_history(case, protocol))
    except _StepTaken as taken:
        return score_step(case, protocol, taken.args[0], names)
    except ModelAPIError as exc:
        if isinstance(exc, ModelRequestError) and exc.status_code in (401, 403, 404):
            raise  # every case would fail the same way
        return _result(case, protocol, [], False, "no reply", [], error=str(exc))
    # Unreachable with on_step raising, unless a limit ended the run before any step.
    return _result(case, protocol, [], False, f"no step ({result.stop_reason})", [])


def _case_cache(model: ChatModel, model_name: str, settings: EvalSettings) -> CapabilityCache:
    """A case's own capability cache: nothing learned leaks from case to case."""
    cache = CapabilityCache()
    if not settings.constrained:
        cache.remember(model.base_url, model_name, constrained_decoding=False)
    return cache


async def run_multi_turn_case(
    case: MultiTurnCase, protocol: str, model: ChatModel, model_name: str, settings: EvalSettings
) -> CaseResult:
    """A multi-turn case: each turn one run of the agent loop, graded by BFCL's checker."""
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
                protocol=_protocol(functions, protocol),
                client=model,
                max_steps=limit,
                **agent_options(settings, cache),
            )
            try:
                result = await agent.arun(message or added_functions_prompt(), history=history)
            except RunAborted as aborted:  # too many failed steps: the turn ends there
                result = aborted.result
            steps += result.steps
            made = [
                [
                    c
                    for a in step.actions
                    if a.tool in names
                    and isinstance(a.arguments, dict)
                    and a.status != "invalid_arguments"
                    and (c := call_string(names[a.tool], a.arguments)) is not None
                ]
                for step in result.steps
            ]
            decoded.append([m for m in made if m])
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
    calls = calls_json(decoded)
    return _result(case, protocol, steps, correct, reason, calls, error=error, requests=len(steps))


def _protocol(functions: Sequence[Mapping[str, Any]], protocol: str) -> str | Protocol:
    return BfclPromptProtocol(functions) if protocol == BFCL_PROMPT else protocol


def _case_history(case: Case, protocol: str) -> list[HistoryItem]:
    """The exchange a live case carries before its question, replies as answered steps."""
    # A reply as written, sent back verbatim by every protocol.
    return [
        UserTurn(content)
        if role == "user"
        else Step(index=0, kind="final", protocol=protocol, text=content, final_answer=content)
        for role, content in case.history
    ]
