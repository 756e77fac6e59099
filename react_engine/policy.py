"""The rules every protocol's reading obeys, written once and applied to its :data:`Decision`.

A protocol reads a reply in its own format (:meth:`Protocol.read_reply`); what must hold
whatever the format is decided here, in this order:

1. **Reasoning stays apart.** A server's separate ``reasoning_content`` never becomes the
   answer or a call, and never joins the thought: the loop keeps it verbatim as
   :attr:`Step.reasoning <react_engine.types.Step.reasoning>`, so that it can be sent back
   as it came where the provider wants it (see ``Capabilities.reasoning_echo``).
2. **Call ids.** Every call gets an id that is unique within the reply: the provider's
   when it sent a usable one, a generated one otherwise (reported as an event).
3. **Length cuts.** In a reply cut by ``max_tokens``, a call whose arguments may be cut
   short never runs: JSON repair would "complete" ``{"path": "/tmp/imp`` into a value the
   model never wrote. The protocol says what it knows (:attr:`PendingCall.cut`); without
   a verdict only arguments that are complete JSON as they stand are trusted.
4. **``tool_choice`` and forced answers.** Many servers ignore ``tool_choice``, and the
   text protocols can only ask; the user's choice holds anyway. No call runs when none may
   be made (``"none"``, no tools, a forced final answer), only the named tool runs when one
   is named, and a final answer is refused while a call is required. A forced final answer
   that is a call written as text is no answer.
5. **Typed answers.** With an ``output_type`` (:attr:`RequestContext.output`), the final
   answer must be JSON valid for it (read with :func:`~react_engine.parsing.repair_json`);
   the validated value becomes :attr:`FinalAnswer.output` and the answer its JSON text. A
   failure names the failing fields, with the protocol's way to answer again.

A refused reply becomes a :class:`FormatError` worded by the protocol (:meth:`Protocol.reject`),
so the model is told what to write instead, within the run's error budget.
"""

from __future__ import annotations

import json
import uuid

from .output import OutputError
from .parsing.salvage import written_call
from .protocol import CallTools, Decision, FinalAnswer, FormatError, PendingCall, Protocol
from .protocol import RequestContext as Context
from .types import ModelResponse

__all__ = ["CUT_OFF", "WRITTEN_CALL", "apply", "new_call_id"]

CUT_OFF = (
    "the reply was cut off by the length limit (max_tokens) inside this call's arguments, "
    "so the call was not run; call the tool again with complete arguments"
)
"""The error of a call whose arguments a length cut may have shortened."""

WRITTEN_CALL = (
    "it is a tool call written as text, and no tool can run now: using only the results "
    "you already have, write your final answer in words"
)
"""Why a forced final answer that is a call (in any syntax) is not an answer."""


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def apply(protocol: Protocol, decision: Decision, reply: ModelResponse, ctx: Context) -> Decision:
    """``decision`` with the shared rules applied; a refused reply becomes a format error."""
    match decision:
        case CallTools():
            _assign_ids(decision)
            _refuse_cut(decision.calls, reply)
            return _calls_allowed(protocol, decision, ctx)
        case FinalAnswer():
            allowed = _answer_allowed(protocol, decision, ctx)
            return _typed(protocol, allowed, ctx) if isinstance(allowed, FinalAnswer) else allowed
        case FormatError():
            return decision


def _assign_ids(decision: CallTools) -> None:
    seen: set[str] = set()
    for call in decision.calls:
        if not call.id or call.id in seen:
            if call.id is not None:  # the provider sent none, or one already used
                decision.events.append("duplicate_call_id" if call.id else "generated_call_id")
            call.id = new_call_id()
        seen.add(call.id)


def _refuse_cut(calls: list[PendingCall], reply: ModelResponse) -> None:
    if reply.finish_reason != "length" or not calls:
        return
    last = calls[-1]
    if last.cut is False:
        return
    if last.cut or not _complete_json(last.raw_arguments):
        last.error = CUT_OFF


def _complete_json(raw: str) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def _calls_allowed(protocol: Protocol, decision: CallTools, ctx: Context) -> Decision:
    names = ctx.tool_names()
    if ctx.force_final:
        return protocol.reject(
            decision, WRITTEN_CALL, forced=True, problem="a tool call written as text"
        )
    if ctx.tool_choice == "none" or not names:
        error = "no tool may be used for this question: write the final answer"
    elif ctx.tool_choice in names and any(c.tool != ctx.tool_choice for c in decision.calls):
        wrong = next(c.tool for c in decision.calls if c.tool != ctx.tool_choice)
        error = f"only {ctx.tool_choice} may be called now, not {wrong}: call {ctx.tool_choice}"
    else:
        return decision
    refused = protocol.reject(decision, error)
    refused.events.append("tool_choice_enforced")
    return refused


def _answer_allowed(protocol: Protocol, decision: FinalAnswer, ctx: Context) -> Decision:
    names = ctx.tool_names()
    if ctx.force_final:
        if written_call(decision.answer, names):
            return protocol.reject(
                decision, WRITTEN_CALL, forced=True, problem="a tool call written as text"
            )
        return decision
    if names and (ctx.tool_choice == "required" or ctx.tool_choice in names):
        wanted = ctx.tool_choice if ctx.tool_choice in names else "one of: " + ", ".join(names)
        return protocol.reject(
            decision, f"a tool must be used before the final answer: call {wanted}"
        )
    return decision


def _typed(protocol: Protocol, decision: FinalAnswer, ctx: Context) -> Decision:
    if ctx.output is None:
        decision.output = decision.answer
        return decision
    try:
        value, repairs = ctx.output.read(decision.answer)
    except OutputError as exc:
        return protocol.reject(
            decision,
            f"{exc}; {protocol.output_retry()}",
            forced=ctx.force_final,
            problem="an answer that does not match the output type",
        )
    decision.output = value
    decision.answer = ctx.output.dump(value)
    decision.repairs.extend(r for r in repairs if r not in decision.repairs)
    return decision
