"""The rules every protocol's reading obeys, written once and applied to its :data:`Decision`.

A protocol reads a reply in its own format (:meth:`Protocol.read_reply`); what must hold
whatever the format is decided here, in this order:

1. **Reasoning stays apart.** A server's separate ``reasoning_content`` never becomes the
   answer or a call, and never joins the thought: the loop keeps it verbatim as
   :attr:`Step.reasoning <react_engine.types.Step.reasoning>`, so that it can be sent back
   as it came where the provider wants it (see ``Capabilities.reasoning_echo``).
2. **Call ids.** Every call gets an id that is unique within the reply: the provider's
   when it sent a usable one, a generated one otherwise (reported as an event).
3. **Only what the model wrote runs.** A call runs with exactly the arguments the model
   wrote, after lossless repairs only (a fence, a label, a quote style, full-width
   delimiters...), or not at all: a call whose reading took a lossy repair (a quote that
   may or may not end its string, tokens merged, unquoted text, a value cut off) becomes
   an error observation that says what was wrong, and the model writes it again. Which
   repair is which is one table, :mod:`react_engine.parsing.repairs`; the trace keeps
   both lists (:attr:`ActionRecord.repairs <react_engine.types.ActionRecord.repairs>`,
   ``.lossy``). A final answer may be read with any repair.
4. **Length cuts.** In a reply cut by ``max_tokens``, a call whose arguments may be cut
   short never runs: JSON repair would "complete" ``{"path": "/tmp/imp`` into a value the
   model never wrote. The protocol says what it knows (:attr:`PendingCall.cut`); without
   a verdict only arguments that are complete JSON as they stand are trusted.
5. **``tool_choice`` and forced answers.** Many servers ignore ``tool_choice``, and the
   text protocols can only ask; the user's choice holds anyway. No call runs when none may
   be made (``"none"``, no tools, a forced final answer), only the named tool runs when one
   is named, and a final answer is refused while a call is required. A forced final answer
   that is a call written as text is no answer.
6. **Typed answers.** With an ``output_type`` (:attr:`RequestContext.output`), the final
   answer must be JSON valid for it (read with :func:`~react_engine.parsing.repair_json`);
   the validated value becomes :attr:`FinalAnswer.output` and the answer its JSON text. A
   failure names the failing fields, with the protocol's way to answer again.

6. **Effects** (:func:`effects`). A reply with several calls (parallel ``tool_calls``,
   several Actions, a JSON list of actions) runs what :attr:`RequestContext.multi_action`
   allows: by default (``"independent"``) every call to a read-only tool
   (:class:`~react_engine.tools.ToolAnnotations`) plus the first call to any other tool;
   a read-only call written after that one waits as well, since it would run at the same
   time as the change. In every mode a *blind* later call does not run: one whose
   arguments hold a placeholder (:func:`placeholder`) instead of a value the model could
   not know yet. A call held back is recorded as ``skipped``, its observation tells the
   model why (it can make the call in its next step), and the step's events say so.

A refused reply becomes a :class:`FormatError` worded by the protocol (:meth:`Protocol.reject`),
so the model is told what to write instead, within the run's error budget.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any, Final

from .output import OutputError
from .parsing.repairs import lossy_repairs, refusal
from .parsing.salvage import written_call
from .protocol import (
    CallTools,
    Decision,
    FinalAnswer,
    FormatError,
    MultiAction,
    PendingCall,
    Protocol,
)
from .protocol import RequestContext as Context
from .types import ModelResponse

__all__ = ["CUT_OFF", "WRITTEN_CALL", "apply", "effects", "new_call_id", "placeholder"]

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
            _refuse_lossy(decision.calls)
            _refuse_cut(decision.calls, reply)
            allowed = _calls_allowed(protocol, decision, ctx)
            if isinstance(allowed, CallTools):
                effects(allowed, ctx)
            return allowed
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


def _refuse_lossy(calls: list[PendingCall]) -> None:
    """A call whose arguments were read with a guess does not run (rule 3)."""
    for call in calls:
        call.lossy = lossy_repairs(call.repairs)
        if call.lossy and call.error is None:
            call.error = refusal(call.lossy)


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


# --- effects: which of a reply's calls run ---------------------------------------------------

_WORDS: Final = r"[^\W\d_][^<>\[\]{}=\"'`\n]{0,78}"
"""The inside of a bracketed placeholder: starts with a letter (any script), one line,
no quotes, ``=`` or brackets (so no HTML tag with attributes, no JSON, no code)."""
_ANGLE: Final = re.compile(rf"<(?P<inner>{_WORDS})>")
"""``<the file Grep finds>``, ``<file_path>``."""
_MUSTACHE: Final = re.compile(r"\$?\{\{(?P<inner>[^{}\n]{1,80})\}\}")
"""``{{grep.output}}``, ``${{path}}``."""
_SQUARE: Final = re.compile(rf"\[(?P<inner>{_WORDS})\]")
"""``[result of Grep]``, ``[file path]``."""
_MAX_NAMED: Final = 8
"""Calls held back that a step's event names one by one; the rest are counted."""
_MAX_STRINGS: Final = 1000
"""Strings of one call's arguments looked at, at most (a bound for hostile arguments)."""


def placeholder(value: str, earlier: Sequence[str] = ()) -> str | None:
    """The placeholder ``value`` holds instead of a value, or ``None``.

    Conservative on purpose, since a false positive holds back a real call. A string is a
    placeholder when, stripped, it is *wholly* one of

    * ``<words>`` with a space, ``_`` or ``-`` inside, or non-ASCII letters, or in
      capitals (``<the file Grep finds>``, ``<file_path>``, ``<文件路径>``, ``<PATH>``; not
      ``<div>``, ``</p>`` or a tag with attributes);
    * ``{{anything}}`` or ``${{anything}}`` on one line (``{{grep.output}}``);
    * ``[two or more words]`` starting with a letter (``[result of Grep]``; not
      ``[1, 2]``, ``["a"]`` or ``[x]``);

    or when a span of one of those shapes *inside* it names one of ``earlier`` (the tools
    of the calls before it in the same reply, as a whole word, in any case):
    ``/src/<the file Grep finds>``, ``{{Grep.output}}/x``. Text that merely holds markup
    or a template (``<b>{{ name }}</b>``) is a value.
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
    """Any of ``tools`` as a whole word, in any case."""
    alternatives = "|".join(re.escape(name) for name in tools)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def _wordy(inner: str) -> bool:
    """Whether the inside of ``<...>`` reads as words rather than as a tag name."""
    return (
        any(c.isspace() or c in "_-" for c in inner)
        or not inner.isascii()
        or (inner.isupper() and len(inner) > 1)
    )


def _strings(value: Any) -> list[str]:
    """The strings in a call's arguments (values, not keys), at most ``_MAX_STRINGS``."""
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


def _blind(call: PendingCall, earlier: tuple[str, ...]) -> str | None:
    for text in _strings(call.arguments):
        found = placeholder(text, earlier)
        if found is not None:
            return found
    return None


def effects(decision: CallTools, ctx: Context) -> None:
    """Hold back the calls of a several-call reply that must not run now (see rule 6 of
    the module docstring): each gets :attr:`PendingCall.skip`, the decision an event."""
    calls = decision.calls
    if len(calls) < 2:
        return
    mode = _mode(ctx.multi_action)
    known = set(ctx.tool_names())
    read_only = {t.name for t in ctx.tools if t.annotations.read_only}
    changing: str | None = None  # the first call to a tool that is not read-only
    held: list[str] = []
    seen: dict[str, None] = {}  # the agent's tools called so far in the reply, in order
    for index, call in enumerate(calls):
        earlier = tuple(seen)
        if call.tool in known:
            seen[call.tool] = None
        if call.error is not None or call.skip is not None:
            if call.tool not in read_only:
                changing = changing or call.tool
            continue
        why: str | None = None
        found = _blind(call, earlier) if index else None
        if found is not None:
            why = (
                f"{call.tool} was not run: its arguments hold the placeholder {found!r}, not "
                f"a value, and the calls before it in your reply had not run yet; call "
                f"{call.tool} again in your next step with the real value"
            )
            held.append(f"{call.tool} (blind: {found!r})")
        elif mode == "first" and index:
            why = (
                f"{call.tool} was not run: one call runs per reply (multi_action='first'); "
                "call it again in your next step if you still need it"
            )
            held.append(f"{call.tool} (one call per reply)")
        elif mode == "independent" and changing is not None:
            if call.tool in read_only:
                why = (
                    f"{call.tool} was not run: it came after {changing}, which may change "
                    "what it reads, and would have run at the same time; call it again in "
                    "your next step if you still need it"
                )
                held.append(f"{call.tool} (after {changing})")
            else:
                why = (
                    f"{call.tool} was not run: it is not read-only, and only one such call "
                    f"runs per reply ({changing} came first); call it again in your next "
                    "step if you still need it"
                )
                held.append(f"{call.tool} (one call with effects per reply)")
        if call.tool not in read_only:
            changing = changing or call.tool
        call.skip = why
    if held:
        ran = len(calls) - len(held)
        named = ", ".join(held[:_MAX_NAMED])
        if len(held) > _MAX_NAMED:
            named += f" and {len(held) - _MAX_NAMED} more"
        decision.events.append(
            f"{len(calls)} tool calls in one reply (multi_action={mode!r}): "
            f"{ran} may run; not run: {named}"
        )


def _mode(option: MultiAction | bool) -> MultiAction:
    if option is True:
        return "all"
    if option is False:
        return "first"
    return option
