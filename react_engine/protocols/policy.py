"""The rules every protocol's reading obeys, written once and applied to its :data:`Decision`.

A protocol reads a reply in its own format (:meth:`Protocol.read_reply`); what must hold
whatever the format is decided here, in this order:

1. **Reasoning stays apart.** A server's ``reasoning_content`` never becomes the answer, a
   call or the thought: the loop keeps it verbatim as ``Step.reasoning``.
2. **Call ids.** Every call gets an id unique within the run (earlier turns included): the
   provider's when new; a reused one (servers that number each reply's calls ``call_0``...)
   gets ``-2``, ``-3``... (the first free: the same on a replay; ``-`` passes the strictest
   id patterns); a generated one when none was sent. Each change is an event.
3. **Only what the model wrote runs.** A call runs with exactly the arguments the model
   wrote, after lossless repairs only, or not at all: a lossy repair (which is which:
   :mod:`react_engine.parsing.repairs`) makes it an error observation. A final answer may
   be read with any repair.
   **Only the model's action runs.** A call written in the text runs unless something marks
   it as not meant now (after an invented ``Observation:`` or the final answer, in prose
   presenting it as an example, a refusal, a condition or a quote, in a fenced example or
   a think block, or an opening tag never closed); one reader,
   :mod:`react_engine.parsing.placement`, decides it. An unclosed call is an error
   observation, and a reply whose only calls were set aside is refused as a final answer
   (:func:`_not_the_action`). JSON that is neither an object nor a string is never
   turned into an argument value (:func:`~react_engine.parsing.arguments.read_text_arguments`).
4. **Length cuts.** In a reply cut by ``max_tokens``, a call whose arguments may be cut short
   never runs (JSON repair would "complete" ``{"path": "/tmp/imp``). The protocol says what
   it knows (:attr:`PendingCall.cut`); without a verdict only complete JSON is trusted.
5. **``tool_choice`` and forced answers** hold even where the server ignores them: no call
   runs when none may be made, only the named tool runs when one is named, a final answer is
   refused while a call is required, and a forced final answer that is a call is no answer.
6. **Typed answers.** With an ``output_type`` the final answer must be JSON valid for it; the
   value becomes :attr:`FinalAnswer.output`, a failure names the failing fields.
7. **Effects** (:func:`effects`). Of several calls, what ``multi_action`` allows runs (by
   default every read-only call plus the first other one; a read-only call after that one
   waits too), and never a *blind* later call whose arguments hold a :func:`placeholder`.
   A held call is recorded as ``skipped`` and its observation says why.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import ReActParseError
from ..parsing import parse_react
from ..parsing import patterns as P
from ..parsing.arguments import read_text_arguments
from ..parsing.duplicates import decode
from ..parsing.placement import REASONS
from ..parsing.repairs import lossy_repairs, refusal
from ..parsing.salvage import read_salvaged, written_call
from ..types import ModelResponse, PendingCall, Step
from ..wording import Notice, NoticeCode
from .decision import CallTools, Decision, FinalAnswer, FormatError
from .limits import MAX_CALLS, TOO_MANY_CALLS, too_large
from .output import OutputError
from .shared import join, native_calls, reasoning

if TYPE_CHECKING:  # the seam applies this module: it is imported for types only
    from .base import Protocol
    from .base import RequestContext as Context

__all__ = ["CUT_OFF", "WRITTEN_CALL", "apply", "decide", "effects", "new_call_id", "placeholder"]

CUT_OFF = Notice(NoticeCode.CUT_OFF)
WRITTEN_CALL = Notice(NoticeCode.WRITTEN_CALL)
_WRITTEN = "a tool call written as text"
_LARGE = "a reply past the limits of what is read"


def new_call_id() -> str:
    """``"call_"`` and 24 hex digits of a UUID4, built from 12 random bytes (4x cheaper)."""
    raw = bytearray(os.urandom(12))
    raw[6] = (raw[6] & 0x0F) | 0x40  # the version nibble of a UUID4
    raw[8] = (raw[8] & 0x3F) | 0x80  # its variant bits
    return "call_" + raw.hex()


def decide(protocol: Protocol, reply: ModelResponse, ctx: Context) -> Decision:
    """The protocol's reading of ``reply`` under the shared rules (:func:`apply`); a reply
    past the bounds of :mod:`.limits` is refused before any reader runs."""
    refused = too_large(reply)
    if refused is None:
        decision = protocol.read_reply(reply, ctx)
        if not isinstance(decision, CallTools) or len(decision.calls) <= MAX_CALLS:
            return apply(protocol, decision, reply, ctx)
        refused = TOO_MANY_CALLS
    unread = FormatError(text=(reply.content or "").strip() or None, feedback="")
    return protocol.reject(unread, refused, problem=_LARGE)


def apply(protocol: Protocol, decision: Decision, reply: ModelResponse, ctx: Context) -> Decision:
    """``decision`` with the shared rules applied; a refused reply becomes a format error."""
    decision = _native_calls_first(protocol, decision, reply)
    decision = _forced_written_call(protocol, decision, reply, ctx)
    decision = _plain_after_reminder(decision, ctx)
    match decision:
        case CallTools():
            _assign_ids(decision, ctx)
            _refuse_cut(decision.calls, reply)
            _refuse_lossy(decision.calls)
            _text_inputs(decision, ctx)
            allowed = _calls_allowed(protocol, decision, ctx)
            if isinstance(allowed, CallTools):
                effects(allowed, ctx)
            return allowed
        case FinalAnswer():
            refused = _not_the_action(protocol, decision, reply, ctx)
            if refused is not None:
                return refused
            _unlabel(decision)
            allowed = _answer_allowed(protocol, decision, ctx)
            return _typed(protocol, allowed, ctx) if isinstance(allowed, FinalAnswer) else allowed
        case FormatError():
            return decision


def _native_calls_first(protocol: Protocol, decision: Decision, reply: ModelResponse) -> Decision:
    """Native ``tool_calls`` win over the text, which becomes the thought."""
    if not reply.tool_calls or protocol.reads_native_calls:
        return decision
    calls = native_calls(reply)
    thought = decision.thought
    if thought is None:
        think, said, _ = reasoning(reply.content or "")
        thought = join(think, _unlabelled(said.strip()))
    return CallTools(
        text=None,  # the step is shown to the model as calls, in its protocol's own format
        thought=thought,
        calls=calls,
        repairs=[r for c in calls for r in c.repairs],
        events=[*decision.events, Notice(NoticeCode.NATIVE_TOOL_CALLS)],
    )


def _forced_written_call(
    protocol: Protocol, decision: Decision, reply: ModelResponse, ctx: Context
) -> Decision:
    """Rule 5: an unreadable forced final reply that is a call is told no tool can run now."""
    if not ctx.force_final or not isinstance(decision, FormatError):
        return decision
    if not written_call(reply.content or "", ctx.tool_names()):
        return decision
    return protocol.reject(decision, WRITTEN_CALL, forced=True, problem=_WRITTEN)


def _not_the_action(
    protocol: Protocol, decision: FinalAnswer, reply: ModelResponse, ctx: Context
) -> FormatError | None:
    """Rule 3: an answer beside a call set aside as not the action is refused, with why."""
    names = ctx.tool_names()
    content = reply.content or ""
    if ctx.force_final or not names or not content:
        return None
    reason = read_salvaged(content, names, limit=1).withheld
    if reason is None:
        return None
    return protocol.reject(
        decision,
        Notice(NoticeCode.NOT_ACTION, reason=REASONS[reason]),
        problem="a tool call that is not the action",
    )


def _plain_after_reminder(decision: Decision, ctx: Context) -> Decision:
    """A plain reply (no label, no call) after a reminder of the format is the answer."""
    if not isinstance(decision, FormatError) or decision.plain is None:
        return decision
    names = ctx.tool_names()
    if names and (
        written_call(decision.plain, names) or P.tool_call_anywhere(names).search(decision.plain)
    ):
        return decision  # a call written as text is no answer, however often it comes
    # Reminded once: the step before is this same refusal (same feedback text).
    last = ctx.history[-1] if ctx.history else None
    if not (isinstance(last, Step) and last.kind == "format_error"):
        return decision
    if last.feedback != decision.feedback:
        return decision
    return FinalAnswer(
        text=decision.text,
        thought=decision.thought,
        answer=decision.plain,
        repairs=[*decision.repairs, "unlabeled_answer"],
        events=list(decision.events),
    )


def _text_inputs(decision: CallTools, ctx: Context) -> None:
    """Text inputs read onto the tool's parameters where that is no guess."""
    tools = {t.name: t for t in ctx.tools}
    for call in decision.calls:
        tool = tools.get(call.tool)
        if call.error is not None or not isinstance(call.arguments, str) or tool is None:
            continue
        read = read_text_arguments(call.arguments, tool.parameters, call.raw_arguments)
        if read.error is not None:
            call.error = read.error
        elif read.arguments is not None and read.repair is not None:
            call.arguments = read.arguments
            call.repairs.append(read.repair)
            if read.repair not in decision.repairs:
                decision.repairs.append(read.repair)


def _unlabel(decision: FinalAnswer) -> None:
    """An answer written as ReAct steps becomes the text after its final-answer label."""
    answer = decision.answer
    label = P.LABEL.match(answer.lstrip())
    if label is None or not (label["colon"] or label["em"]):
        return
    try:
        parsed = parse_react(answer)
    except ReActParseError:
        parsed = None
    if parsed is not None and parsed.actions:
        return  # a call written as text, not labels around an answer
    if parsed is not None and parsed.final_answer:
        decision.answer = parsed.final_answer
        decision.thought = join(decision.thought, parsed.thought)
    else:
        rest = _unlabelled(answer.lstrip())
        if not rest or rest == answer.lstrip():
            return
        decision.answer = rest
    decision.repairs.append("answer_labels")


def _unlabelled(text: str) -> str:
    """``text`` without a leading thought label ("Thought: I will look it up")."""
    found = P.LABEL.match(text)
    if found is None or not found["colon"]:
        return text
    kind, _ = P.LABEL_WORDS.get(P.normalise_word(found["word"]), ("", 0))
    return text[found.end() :].strip() if kind == P.THOUGHT else text


def _assign_ids(decision: CallTools, ctx: Context) -> None:
    """Rule 2: ids unique within the run, an id already used made unique deterministically."""
    used = {a.id for item in ctx.history if isinstance(item, Step) for a in item.actions}
    for call in decision.calls:
        if not call.id:
            if call.id is not None:  # the provider sent an empty one (text calls have none)
                decision.events.append(Notice(NoticeCode.GENERATED_CALL_ID))
            call.id = new_call_id()
        elif call.id in used:
            decision.events.append(Notice(NoticeCode.DUPLICATE_CALL_ID))
            call.id = next(
                f"{call.id}-{n}" for n in itertools.count(2) if f"{call.id}-{n}" not in used
            )
        used.add(call.id)


def _refuse_lossy(calls: list[PendingCall]) -> None:
    """Rule 3. A key given two values (``{"path": "/a", "path": "/b"}``) is a guess too;
    the raw text is checked here for calls no reader repaired (native ones)."""
    for call in calls:
        if (
            isinstance(call.arguments, dict)
            and not any(c.endswith("duplicate_key") for c in call.repairs)
            and _conflicting_keys(call.raw_arguments)
        ):
            call.repairs.append("duplicate_key")
        call.lossy = lossy_repairs(call.repairs)
        if call.lossy and call.error is None:
            call.error = refusal(call.lossy)


def _conflicting_keys(raw: str) -> bool:
    """Whether ``raw`` (strict JSON only) gives one key two different values."""
    if raw.count(":") < 2:  # one key at most: nothing can be written twice
        return False
    try:
        return decode(raw)[2]
    except (ValueError, RecursionError):
        return False


def _refuse_cut(calls: list[PendingCall], reply: ModelResponse) -> None:
    """Rule 4: a call the protocol marks cut, and the last call of a reply cut by length
    unless known complete (``cut is False``) or complete JSON, does not run."""
    for call in calls:
        if isinstance(call.cut, Notice) and call.error is None:
            call.error = call.cut
    if reply.finish_reason != "length" or not calls:
        return
    last = calls[-1]
    if last.cut is False or isinstance(last.cut, Notice):
        return
    if not last.cut:  # no verdict: complete JSON runs
        try:
            json.loads(last.raw_arguments)
            return
        except (ValueError, RecursionError):
            pass
    last.error = CUT_OFF


def _calls_allowed(protocol: Protocol, decision: CallTools, ctx: Context) -> Decision:
    names = ctx.tool_names()
    if ctx.force_final:
        return protocol.reject(decision, WRITTEN_CALL, forced=True, problem=_WRITTEN)
    if ctx.tool_choice == "none" or not names:
        error = Notice(NoticeCode.TOOL_NONE)
    elif ctx.tool_choice in names and any(c.tool != ctx.tool_choice for c in decision.calls):
        wrong = next(c.tool for c in decision.calls if c.tool != ctx.tool_choice)
        error = Notice(NoticeCode.TOOL_NAMED, tool=ctx.tool_choice, wrong=wrong)
    else:
        return decision
    refused = protocol.reject(decision, error)
    refused.events.append(Notice(NoticeCode.TOOL_CHOICE_ENFORCED))
    return refused


def _answer_allowed(protocol: Protocol, decision: FinalAnswer, ctx: Context) -> Decision:
    names = ctx.tool_names()
    if ctx.force_final:
        if written_call(decision.answer, names):
            return protocol.reject(decision, WRITTEN_CALL, forced=True, problem=_WRITTEN)
        return decision
    if names and (ctx.tool_choice == "required" or ctx.tool_choice in names):
        tools = ctx.tool_choice if ctx.tool_choice in names else ", ".join(names)
        return protocol.reject(decision, Notice(NoticeCode.TOOL_REQUIRED, tools=tools))
    return decision


def _typed(protocol: Protocol, decision: FinalAnswer, ctx: Context) -> Decision:
    if ctx.output is None:
        decision.output = decision.answer
        return decision
    try:
        value, repairs = ctx.output.read(decision.answer)
    except OutputError as exc:
        retry = protocol.output_retry()
        return protocol.reject(
            decision,
            Notice(NoticeCode.OUTPUT, detail=str(exc), retry=retry),
            forced=ctx.force_final,
            problem="an answer that does not match the output type",
        )
    decision.output = value
    decision.answer = ctx.output.dump(value)
    decision.repairs.extend(r for r in repairs if r not in decision.repairs)
    return decision


# a letter first, one line, no quotes, "=" or brackets: no tag with attributes, no JSON
_WORDS: Final = r"[^\W\d_][^<>\[\]{}=\"'`\n]{0,78}"
_ANGLE: Final = re.compile(rf"<(?P<inner>{_WORDS})>")  # <file_path>
_MUSTACHE: Final = re.compile(r"\$?\{\{(?P<inner>[^{}\n]{1,80})\}\}")  # {{grep.output}}
_SQUARE: Final = re.compile(rf"\[(?P<inner>{_WORDS})\]")  # [result of Grep]
_MAX_NAMED: Final = 8  # held calls an event names one by one; the rest are counted
_MAX_STRINGS: Final = 1000  # strings of one call's arguments looked at (hostile input)


def placeholder(value: str, earlier: Sequence[str] = ()) -> str | None:
    """The placeholder ``value`` holds instead of a value, or ``None``.

    Conservative, since a false positive holds back a real call: ``value`` is *wholly*
    ``<words>`` (with a space, ``_``, ``-``, non-ASCII or in capitals; not ``<div>``),
    ``{{anything}}``/``${{anything}}``, or ``[two or more words]``; or a span of one of those
    shapes inside it names a tool in ``earlier`` (``/src/<the file Grep finds>``).
    """
    text = value.strip()
    if len(text) <= 200:
        m = _ANGLE.fullmatch(text)
        if m is not None and _wordy(m.group("inner")):
            return text
        if _MUSTACHE.fullmatch(text) is not None:
            return text
        m = _SQUARE.fullmatch(text)
        if m is not None and len(m.group("inner").split()) >= 2:
            return text
    if not earlier:
        return None
    names = _names(tuple(earlier))
    for shape in (_ANGLE, _MUSTACHE, _SQUARE):
        for found in shape.finditer(value):
            if names.search(found.group("inner")):
                return found.group()
    return None


@functools.lru_cache(maxsize=64)
def _names(tools: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(name) for name in tools)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def _wordy(inner: str) -> bool:
    return (
        any(c.isspace() or c in "_-" for c in inner)
        or not inner.isascii()
        or (inner.isupper() and len(inner) > 1)
    )


def _strings(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack and len(found) < _MAX_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


def effects(decision: CallTools, ctx: Context) -> None:
    """Rule 7: set :attr:`PendingCall.skip` on the calls that must not run now."""
    calls = decision.calls
    if len(calls) < 2:
        return
    mode = ctx.multi_action
    known = set(ctx.tool_names())
    read_only = {t.name for t in ctx.tools if t.annotations.read_only}
    changing: str | None = None  # the first call to a tool that is not read-only
    held: list[str] = []
    seen: dict[str, None] = {}  # the agent's tools called so far in the reply, in order
    for index, call in enumerate(calls):
        earlier = tuple(seen)
        if call.tool in known:
            seen[call.tool] = None
        if call.error is None and call.skip is None:
            strings = _strings(call.arguments) if index else []  # the first call is never blind
            found = next(filter(None, (placeholder(text, earlier) for text in strings)), None)
            tool = call.tool
            if found is not None:
                call.skip = Notice(NoticeCode.BLIND, tool=tool, placeholder=repr(found))
                held.append(f"{tool} (blind: {found!r})")
            elif mode == "first" and index:
                call.skip = Notice(NoticeCode.ONE_PER_REPLY, tool=tool)
                held.append(f"{tool} (one call per reply)")
            elif mode == "independent" and changing is not None and tool in read_only:
                call.skip = Notice(NoticeCode.AFTER_CHANGE, tool=tool, changing=changing)
                held.append(f"{tool} (after {changing})")
            elif mode == "independent" and changing is not None:
                call.skip = Notice(NoticeCode.ONE_CHANGE, tool=tool, changing=changing)
                held.append(f"{tool} (one call with effects per reply)")
        if call.tool not in read_only:
            changing = changing or call.tool
    if held:
        named = ", ".join(held[:_MAX_NAMED])
        if len(held) > _MAX_NAMED:
            named += f" and {len(held) - _MAX_NAMED} more"
        counts = {"count": str(len(calls)), "ran": str(len(calls) - len(held)), "mode": repr(mode)}
        decision.events.append(Notice(NoticeCode.CALLS_HELD, held=named, **counts))
