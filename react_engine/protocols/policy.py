"""The rules every protocol's reading obeys, written once and applied to its :data:`Decision`.

A protocol reads a reply in its own format (:meth:`Protocol.read_reply`); what must hold
whatever the format is decided here, in this order:

1. **Reasoning stays apart.** A server's separate ``reasoning_content`` never becomes the
   answer or a call, and never joins the thought: the loop keeps it verbatim as
   :attr:`Step.reasoning <react_engine.types.Step.reasoning>`, so that it can be sent back
   as it came where the provider wants it (see ``Capabilities.reasoning_echo``).
2. **Call ids.** Every call gets an id that is unique within the run (in the history the
   request was built from, a conversation's earlier turns included, and in its reply):
   the provider's when it sent one not used before; for one already used (servers that
   number each reply's calls ``call_0``, ``call_1``... repeat them), that id with ``-2``,
   ``-3``... (the first not used: the same on a replay; ``-`` passes the strictest
   providers' id patterns and needs no quoting in a shell); a generated one when it sent
   none. Either is reported as an event; the history sent back pairs each call with its
   result under its new id, and an approval given for an id never reaches a later call
   that reused it.
3. **Only what the model wrote runs.** A call runs with exactly the arguments the model
   wrote, after lossless repairs only (a fence, a label, a quote style, full-width
   delimiters...), or not at all: a call whose reading took a lossy repair (a quote that
   may or may not end its string, tokens merged, unquoted text, a value cut off) becomes
   an error observation that says what was wrong, and the model writes it again. Which
   repair is which is one table, :mod:`react_engine.parsing.repairs`; the trace keeps
   both lists (:attr:`ActionRecord.repairs <react_engine.types.ActionRecord.repairs>`,
   ``.lossy``). A final answer may be read with any repair.
   **Only the model's action runs.** A complete, valid call of an offered tool, in the
   model's own format, written in the reply's text (on its own line or inside a
   sentence), runs when nothing marks it as not meant now; the text around it is the
   step's thought. Never one written after an ``Observation:`` the model wrote
   itself, after its final answer, inside prose that presents it as an example, a
   description of how one would call it, a refusal, a condition or a quote, inside a
   fenced example or a think block, or whose opening tag is never closed; under every
   protocol, streamed or not, whether the server honoured ``stop`` or not. When in doubt
   it does not run, and the model is asked: an unclosed call is an error observation, and
   a reply whose only such calls were set aside is refused as a final answer
   (:func:`_not_the_action`) with the reason. Where a call is the action is read by one
   reader, :mod:`react_engine.parsing.placement`, for every reader of calls in text
   (:mod:`react_engine.parsing.salvage`). An input that is JSON but neither an object
   nor a string is never turned into an argument value: ``null`` is refused, and a
   number, boolean or list is the one parameter's only where its schema takes it as it
   is (:func:`~react_engine.parsing.arguments.read_text_arguments`). Text is what the
   model wrote: ``Action Input: rm -rf /`` for a tool with one string parameter is that
   string.
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
7. **Effects** (:func:`effects`). A reply with several calls (parallel ``tool_calls``,
   several Actions, a JSON list of actions) runs what :attr:`RequestContext.multi_action`
   allows: by default (``"independent"``) every call to a read-only tool
   (:class:`~react_engine.tools.ToolAnnotations`) plus the first call to any other tool;
   a read-only call written after that one waits as well, since it would run at the same
   time as the change. In every mode a *blind* later call does not run: one whose
   arguments hold a placeholder (:func:`placeholder`) instead of a value the model could
   not know yet. A call held back is recorded as ``skipped``, its observation tells the
   model why (it can make the call in its next step), and the step's events say so.

Four more rules, each its own step of :func:`apply` (the first two before the others):

* **Native calls first.** A reply that carries native ``tool_calls`` is read as those calls
  under every protocol (seed 003 checks ``tool_calls`` first, then the text), where the
  protocol does not read them itself (:attr:`Protocol.reads_native_calls`).
* **A plain reply, after one reminder, is the answer.** A reply in no format at all
  (:attr:`FormatError.plain`: no label, no call) is sent back once with a reminder of the
  format; when the next reply is plain prose again, it is the final answer, marked
  ``unlabeled_answer``.
* **Text inputs onto parameters.** A call whose input is text is read onto the tool's
  parameters where that is not a guess (:mod:`react_engine.parsing.arguments`): a bare
  value for a tool with one required parameter, ``key: value`` pairs naming parameters.
* **Labels never reach an answer.** A final answer written as ReAct steps
  (``Thought: ...`` then ``Final Answer: ...``, in any spelling the parser knows) is the
  text after its final-answer label; the rest is the thought.

A refused reply becomes a :class:`FormatError` worded by the protocol (:meth:`Protocol.reject`),
so the model is told what to write instead, within the run's error budget.
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
from ..types import ModelResponse, Step
from ..wording import Notice, NoticeCode
from .decision import (
    CallTools,
    Decision,
    FinalAnswer,
    FormatError,
    PendingCall,
)
from .limits import MAX_CALLS, too_large, too_many_calls
from .output import OutputError
from .shared import join, native_calls, reasoning

if TYPE_CHECKING:  # the seam applies this module: it is imported for types only
    from .base import Protocol
    from .base import RequestContext as Context

__all__ = ["CUT_OFF", "WRITTEN_CALL", "apply", "decide", "effects", "new_call_id", "placeholder"]

CUT_OFF = Notice(NoticeCode.CUT_OFF)
"""The error of a call whose arguments a length cut may have shortened."""

WRITTEN_CALL = Notice(NoticeCode.WRITTEN_CALL)
"""Why a forced final answer that is a call (in any syntax) is not an answer."""
_WRITTEN = "a tool call written as text"
_LARGE = "a reply past the limits of what is read"


def new_call_id() -> str:
    """``"call_"`` and the first 24 hex digits of a random UUID (version 4), made from the
    12 random bytes they show without building the UUID (a quarter of the cost)."""
    raw = bytearray(os.urandom(12))
    raw[6] = (raw[6] & 0x0F) | 0x40  # the version nibble of a UUID4
    raw[8] = (raw[8] & 0x3F) | 0x80  # its variant bits
    return "call_" + raw.hex()


def decide(protocol: Protocol, reply: ModelResponse, ctx: Context) -> Decision:
    """The decision on ``reply``: the protocol's reading of it
    (:meth:`~react_engine.protocols.base.Protocol.read_reply`) under the rules every protocol
    shares (:func:`apply`). The loop calls this; ``Protocol.parse_reply`` is the same.

    A reply past the bounds of :mod:`.limits` is refused before any reader runs, and so is
    one in which the readers find more than :data:`~.limits.MAX_CALLS` calls."""
    refused = too_large(reply)
    if refused is None:
        decision = protocol.read_reply(reply, ctx)
        if not isinstance(decision, CallTools) or len(decision.calls) <= MAX_CALLS:
            return apply(protocol, decision, reply, ctx)
        refused = too_many_calls()
    text = (reply.content or "").strip() or None
    unread = FormatError(text=text, feedback="")
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
    """The reply's native ``tool_calls``, where the protocol read only its text: the calls
    run, and the text is the thought (an Action written beside them is not run twice)."""
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
    """On a forced final request, a reply the protocol could not read that is a call
    written as text (in any syntax) is refused as such (rule 5): the model is told that
    no tool can run now, not how to call one."""
    if not ctx.force_final or not isinstance(decision, FormatError):
        return decision
    if not written_call(reply.content or "", ctx.tool_names()):
        return decision
    return protocol.reject(decision, WRITTEN_CALL, forced=True, problem=_WRITTEN)


def _not_the_action(
    protocol: Protocol, decision: FinalAnswer, reply: ModelResponse, ctx: Context
) -> FormatError | None:
    """A final answer whose reply holds a call that was set aside as not the model's action
    (rule 3): the model is asked which it meant, with the reason the call did not run."""
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
    # Reminded once: the step before is this same refusal (a plain reply's reminder says
    # nothing about the reply itself, so the feedback is the same text).
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
    """Text inputs read onto the tool's parameters where that is no guess (see
    :func:`~react_engine.parsing.arguments.read_text_arguments`); ambiguous ones refused."""
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
    """An answer written as ReAct steps becomes the text after its final-answer label; one
    that is only a labelled thought, the text after the label."""
    answer = decision.answer
    if not _starts_with_label(answer):
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


def _starts_with_label(text: str) -> bool:
    found = P.LABEL.match(text.lstrip())
    return found is not None and bool(found["colon"] or found["em"])


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
    """A call whose arguments were read with a guess does not run (rule 3). Arguments
    whose JSON text gives one key two different values (``{"path": "/tmp/a", "path":
    "/home"}``) are such a guess: decoding keeps the last, the model may have meant either.
    The readers report it in the call's repairs; the raw text is checked here for calls
    decoded without them (native calls, text a reader kept as written)."""
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
    """Whether ``raw``, read as strict JSON, gives a key of one object two different
    values; text that is no strict JSON is left to the readers' own repairs."""
    if raw.count(":") < 2:  # one key at most: nothing can be written twice
        return False
    try:
        return decode(raw)[2]
    except (ValueError, RecursionError):
        return False


def _refuse_cut(calls: list[PendingCall], reply: ModelResponse) -> None:
    """A call whose arguments may be cut short never runs (rule 4): one the protocol says
    ends inside a value it never closed (:attr:`PendingCall.cut` in its words), and in a
    reply cut by the length limit, the last one unless the protocol knows the reply went
    on past it or its arguments are complete JSON as they stand."""
    for call in calls:
        if isinstance(call.cut, Notice) and call.error is None:
            call.error = call.cut
    if reply.finish_reason != "length" or not calls:
        return
    last = calls[-1]
    if last.cut is False or isinstance(last.cut, Notice):
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
        return protocol.reject(
            decision,
            Notice(NoticeCode.TOOL_REQUIRED, tools=tools),
        )
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
        if call.error is not None or call.skip is not None:
            if call.tool not in read_only:
                changing = changing or call.tool
            continue
        why: Notice | None = None
        found = _blind(call, earlier) if index else None
        if found is not None:
            why = Notice(NoticeCode.BLIND, tool=call.tool, placeholder=repr(found))
            held.append(f"{call.tool} (blind: {found!r})")
        elif mode == "first" and index:
            why = Notice(NoticeCode.ONE_PER_REPLY, tool=call.tool)
            held.append(f"{call.tool} (one call per reply)")
        elif mode == "independent" and changing is not None:
            if call.tool in read_only:
                why = Notice(NoticeCode.AFTER_CHANGE, tool=call.tool, changing=changing)
                held.append(f"{call.tool} (after {changing})")
            else:
                why = Notice(NoticeCode.ONE_CHANGE, tool=call.tool, changing=changing)
                held.append(f"{call.tool} (one call with effects per reply)")
        if call.tool not in read_only:
            changing = changing or call.tool
        call.skip = why
    if held:
        ran = len(calls) - len(held)
        named = ", ".join(held[:_MAX_NAMED])
        if len(held) > _MAX_NAMED:
            named += f" and {len(held) - _MAX_NAMED} more"
        counts = {"count": str(len(calls)), "ran": str(ran), "mode": repr(mode)}
        decision.events.append(Notice(NoticeCode.CALLS_HELD, held=named, **counts))
