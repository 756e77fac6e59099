"""The tolerant parser of text ReAct replies: :func:`parse_react` reads one reply (Thought /
Action / Action Input / Final Answer, or a dialect) into a :class:`~react_engine.types.ParsedStep`.

The reply is cut (:mod:`.cut`), its labels found (:mod:`.labels`), each section read
(:mod:`.blobs`) and the step chosen here; a plain reply takes a shortcut to the same result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any, Final

from ..errors import ReActParseError
from ..types import ParsedStep, PendingCall
from ..wording import Notice, NoticeCode
from . import patterns as P
from .blobs import (
    BLOB_CHARS,
    FINISH_NAMES,
    BrokenChain,
    Item,
    answer_text,
    call_args,
    is_finish,
    read_blobs,
    read_input,
    search_blobs,
)
from .cut import Cut, cut_reply, partial_stop, tidy
from .labels import PREAMBLE, Label, Section, plain_labels, scan_labels, split_sections
from .shapes import marked, resolve_tools, rewrite

__all__ = ["EXPECTED_STEP", "parse_react"]

EXPECTED_STEP: Final = "'Thought:' then 'Action:' and 'Action Input:', or 'Final Answer:'"

_NOOP_NAMES: Final = frozenset(
    {"none", "null", "n/a", "na", "noaction", "nothing", "无", "没有", "-", "—"}
)

_NOT_CALLS: Final = FINISH_NAMES | _NOOP_NAMES
_BLOB_OPENERS: Final = ("{", "[", "```", "~~~", P.CALL_OPEN, P.PYTHON_TAG, P.FUNCTION_OPEN)

_END: Final = 1 << 62


def parse_react(
    text: str,
    *,
    multi_action: bool = True,
    stop_words: Sequence[str] | None = None,
    implicit_final_answer: bool = False,
    limit: int | None = None,
    tools: Sequence[str] = (),
) -> ParsedStep:
    """Parse one text ReAct reply.

    ``stop_words`` are the request's stop sequences: the reply is also cut at the first
    one the server failed to honour, and a partial one at the very end is trimmed.
    ``implicit_final_answer`` takes a reply with no label at all (and no tool-call blob)
    as the final answer; by default such a reply is an error.
    ``limit``: at most this many actions are returned (the reader stops there).
    ``tools``: the offered tools' names, for the shapes that need them (:mod:`.shapes`).
    Raises :class:`~react_engine.errors.ReActParseError` when nothing can be recovered.
    """
    try:
        try:
            step = _parse(text, multi_action, stop_words, implicit_final_answer, tools)
        except ReActParseError:
            shaped = _shape(text, multi_action, stop_words, tools)
            if shaped is None:
                raise
            step = shaped
        if "implicit_final_answer" in step.repairs:
            shaped = _shape(text, multi_action, stop_words, tools)
            if shaped is None and marked(text):
                raise ReActParseError(
                    _SHAPE_UNREAD, text=text, pos=0, expected=EXPECTED_STEP, code=NoticeCode.NO_STEP
                ) from None
            step = shaped or step
    except BrokenChain as exc:
        raise ReActParseError(
            "a call chained with ';' after another cannot be read",
            text=text,
            pos=exc.pos,
            expected="every chained call as complete JSON",
        ) from None
    if limit is not None:
        del step.actions[limit:]
    return step


_SHAPE_UNREAD: Final = "the reply has no label, and its action cannot be read"


def _shape(
    text: str, multi_action: bool, stop_words: Sequence[str] | None, tools: Sequence[str]
) -> ParsedStep | None:
    """The reply read as the labelled one its shape stands for (:mod:`.shapes`), or None."""
    shaped = rewrite(text)
    if shaped is None:
        return None
    try:
        step = _parse(shaped[0], multi_action, stop_words, False, tools)
    except ReActParseError:
        return None
    cut = ["cut_observation"] if shaped[2] < len(text) else []
    step.text = cut_reply(text[: shaped[2]], stop_words).text
    step.repairs = list(dict.fromkeys([*cut, *step.repairs, shaped[1]]))
    return step


def _parse(
    text: str,
    multi_action: bool,
    stop_words: Sequence[str] | None,
    implicit_final_answer: bool,
    tools: Sequence[str],
) -> ParsedStep:
    if not text.strip():
        raise ReActParseError(
            "the reply is empty", text=text, pos=0, expected=EXPECTED_STEP, code=NoticeCode.EMPTY
        )
    kept = text.rstrip()
    labels = plain_labels(text, stop_words)
    if labels is not None and partial_stop(kept, stop_words) == len(kept):
        step = _plain_step(kept, labels)
        if step is not None and (not tools or not step.actions or step.actions[0].tool in tools):
            return step
        cut = Cut(kept, [], None, 0, unclosed_think=False, masked=kept)
    else:
        cut = cut_reply(text, stop_words)
        labels = scan_labels(cut.masked)
    offset = cut.body_start
    body = cut.masked  # the kept body, every later think block blanked out
    think = "\n\n".join(t for t in (cut.think.strip() if cut.think else "", *cut.later_think) if t)
    if not body.strip():
        pos, code = len(cut.text), NoticeCode.ONLY_REASONING
        if cut.unclosed_think:
            why = "the reasoning block is never closed and no action or answer follows it"
            expected = "'</think>' then " + EXPECTED_STEP
        elif cut.think is not None or cut.blanked:
            why = "the reply is only reasoning, with no action or final answer after it"
            expected = EXPECTED_STEP + " after the reasoning"
        else:
            why, pos = "nothing is left of the reply once the invented Observation is cut", 0
            expected, code = EXPECTED_STEP + " before any 'Observation:'", NoticeCode.NO_STEP
        raise ReActParseError(why, text=text, pos=pos, expected=expected, code=code)
    sections = split_sections(body, labels)
    try:
        reading = _read(sections)
        if not any(sec.kind == P.ACTION for sec in sections):
            _find_blobs(sections, reading)
    except BrokenChain as exc:
        raise BrokenChain(offset + exc.pos) from None
    labelled = any(sec.kind != PREAMBLE for sec in sections)
    if not labelled and not reading.items:
        if not implicit_final_answer:
            raise ReActParseError(
                "the reply has no label: neither an Action nor a Final Answer",
                text=text,
                pos=offset + len(body) - len(body.lstrip()),
                expected=EXPECTED_STEP,
                code=NoticeCode.UNLABELED,
            )
        return ParsedStep(
            thought=think or None,
            final_answer=tidy(body) if cut.blanked else body.strip(),
            repairs=[*cut.codes, "implicit_final_answer"],
            text=cut.text,
        )
    step = _choose(reading, cut, think, text, multi_action)
    if tools:
        resolve_tools(step, tools)
    if cut.blanked:
        step.final_answer = tidy(step.final_answer)
        step.thought = tidy(step.thought) or None
    return step


def _plain_step(kept: str, labels: list[Label]) -> ParsedStep | None:
    """A plain reply (``Thought:``, then ``Final Answer:`` or ``Action:`` and an optional
    ``Action Input:``) read directly; None for anything more, which the full passes read to
    the same result."""
    kinds = tuple(label.kind for label in labels)
    if not 2 <= len(kinds) <= 3 or kinds[0] != P.THOUGHT or labels[0].start != 0:
        return None
    second = labels[1]
    thought = kept[labels[0].content : second.start]
    if P.INLINE_LABEL.search(thought) is not None:
        return None
    thought = thought.strip()
    if kinds == (P.THOUGHT, P.FINAL):
        answer = kept[second.content :].strip()
        if not answer or any(c in thought for c in BLOB_CHARS):
            return None
        return ParsedStep(thought=thought or None, final_answer=answer, repairs=[], text=kept)
    if kinds not in ((P.THOUGHT, P.ACTION), (P.THOUGHT, P.ACTION, P.ACTION_INPUT)):
        return None
    end = labels[2].start if len(labels) == 3 else len(kept)
    items, problem = _action(kept[second.content : end], second.content)
    if problem is not None or len(items) != 1:
        return None
    item = items[0]
    tool = item.tool
    if tool is None or item.final is not None or P.normalise_word(tool) in _NOT_CALLS:
        return None
    if len(labels) == 3:
        if item.has_input:
            return None  # a second input: a second call
        _fill(item, kept[labels[2].content :], [])
    codes = list(dict.fromkeys(item.codes))
    return ParsedStep(thought=thought or None, actions=[_pending(item)], repairs=codes, text=kept)


@dataclass(slots=True)
class _Problem:
    pos: int
    message: str
    expected: str


@dataclass(slots=True)
class _Reading:
    """Everything found in the sections, by position in the reply."""

    items: list[Item] = field(default_factory=list)
    thoughts: list[tuple[int, str]] = field(default_factory=list)
    codes: list[tuple[int, str]] = field(default_factory=list)
    problems: list[_Problem] = field(default_factory=list)
    others: list[int] = field(default_factory=list)  # sections that are neither: a late Question


def _read(sections: list[Section]) -> _Reading:
    r = _Reading()
    labelled = any(sec.kind != PREAMBLE for sec in sections)
    last_action: Item | None = None
    orphan: Section | None = None  # an Action Input still waiting for its Action
    for index, sec in enumerate(sections):
        r.codes.extend((sec.start, code) for code in sec.codes)
        if sec.kind == PREAMBLE:
            if labelled:
                r.thoughts.append((sec.start, sec.content.strip()))
                r.codes.append((sec.start, "unlabeled_thought"))
        elif sec.kind == P.THOUGHT:
            r.thoughts.append((sec.start, sec.content.strip()))
        elif sec.kind == P.QUESTION:
            if index == 0 or (index == 1 and sections[0].kind == PREAMBLE):
                r.codes.append((sec.start, "question_echo"))
            else:
                r.others.append(sec.start)
        elif sec.kind == P.ACTION:
            items, problem = _action(sec.content, sec.content_start)
            if problem is not None:
                r.problems.append(problem)
            r.items.extend(items)
            last = items[-1] if items else None
            last_action = last if last and last.tool is not None and last.final is None else None
            if orphan is not None and last_action is not None and not last_action.has_input:
                _fill(last_action, orphan.content, ["input_before_action"])
                orphan = None
        elif sec.kind == P.ACTION_INPUT:
            if last_action is None:
                if orphan is not None:
                    _orphan(r, orphan)
                orphan = sec
            else:
                _attach_input(r, last_action, sec)
        else:  # P.FINAL
            r.items.append(Item(sec.start, final=sec.content.strip()))
    if orphan is not None:
        _orphan(r, orphan)
    return r


def _orphan(r: _Reading, sec: Section) -> None:
    r.problems.append(
        _Problem(sec.start, "an Action Input with no Action before it", "'Action: <tool name>'")
    )
    r.codes.append((sec.start, "orphan_input_dropped"))


def _attach_input(r: _Reading, action: Item, sec: Section) -> None:
    """Give an Action its input; a second Action Input is a second call, except after input
    written with the Action: after an empty one it is the input, the same one is dropped, a
    different one is ambiguous and never runs."""
    if not action.has_input:
        _fill(action, sec.content, [])
        return
    inline, action.inline = action.inline, False  # a further Action Input is a second call
    if action.args == {}:  # tool(), tool[], tool {}, an empty Action Input: no arguments yet
        action.codes = [c for c in action.codes if c != "empty_action_input"]
        _fill(action, sec.content, ["input_after_empty_call"])
    elif inline:
        if read_input(sec.content)[0] == action.args:
            action.codes.append("duplicate_input_dropped")
        else:
            action.error = Notice(NoticeCode.AMBIGUOUS_INPUT, tool=action.tool or "")
            action.codes.append("ambiguous_action_input")
    else:
        item = Item(sec.start, tool=action.tool)
        _fill(item, sec.content, ["repeated_action_input"])
        r.items.append(item)


def _fill(action: Item, raw: str, codes: list[str]) -> None:
    args, more = read_input(raw)
    action.args, action.raw_input, action.has_input = args, raw.strip(), True
    action.codes = [c for c in action.codes if c != "missing_action_input"] + codes + more


def _action(content: str, pos: int) -> tuple[list[Item], _Problem | None]:
    """The item(s) an Action section names (several for a list blob), or a problem."""
    stripped = content.strip()
    at = pos + (len(content) - len(content.lstrip()))
    missing = _Problem(at, "the Action has no tool name", "a tool name after 'Action:'")
    if not stripped:
        return [], missing
    if stripped.startswith(_BLOB_OPENERS):
        try:
            chain = read_blobs(stripped, 0)
        except BrokenChain as exc:
            raise BrokenChain(at + exc.pos) from None
        if chain:
            items, end = [item for _, _, found in chain for item in found], chain[-1][1]
            trailing = bool(stripped[end:].strip())
            for item in items:
                item.pos = at
                item.inline = len(items) == 1
                if trailing:
                    item.codes.append("text_after_input")
            return items, None
        if stripped.startswith(("{", "```", "~~~")):
            return [], missing  # JSON that names no tool
    first, _, rest = stripped.partition("\n")
    item = Item(at)
    if not P.TOOL_NAME.fullmatch(first):  # not the usual "Action: tool_name"
        item.inline = True  # every form below writes its input on the Action line
        m = P.INLINE_INPUT.search(first)
        if m is not None:
            _fill(item, stripped[m.end() :], ["inline_label"])
            return _named(item, first[: m.start()].rstrip(" \t,;"), missing)
        m = P.BRACKET_ACTION.match(first)
        if m is not None:
            item.codes.append("bracket_action")
            close = stripped.rfind("]")
            if close < m.end():
                inner, after = stripped[m.end() :], ""
                item.codes.append("unclosed_bracket")
            else:
                inner, after = stripped[m.end() : close], stripped[close + 1 :]
            if after.strip():
                item.codes.append("text_after_input")
            _fill(item, inner, [])
            return _named(item, m.group("tool"), missing)
        m = P.PAREN_ACTION.match(first)
        if m is not None and stripped.endswith(")"):
            item.codes.append("paren_action")
            inner = stripped[m.end() : -1].strip()
            if inner:
                item.args, item.raw_input = call_args(inner, item.codes), inner
            item.has_input = True
            return _named(item, m.group("tool"), missing)
        m = P.NAME_THEN_JSON.match(first)
        if m is not None:
            _fill(item, stripped[m.end() :], ["inline_input"])
            return _named(item, m.group("tool"), missing)
        item.inline = False
    if rest.strip():  # "Action: tool", its input (if any) on the following lines
        if rest.lstrip()[:1] in ("{", "[", "`", "~"):
            _fill(item, rest, ["unlabeled_action_input"])
            item.inline = True
        else:
            item.codes.append("ignored_text")
    return _named(item, first, missing)


def _named(item: Item, name: str, missing: _Problem) -> tuple[list[Item], _Problem | None]:
    tool = name.strip(P.TOOL_NAME_DECORATION).rstrip(".,;:。，；：").strip(P.TOOL_NAME_DECORATION)
    if not tool:
        return [], missing
    if tool != name.strip():
        item.codes.append("decorated_tool_name")
    item.tool = tool
    if not item.has_input:
        item.codes.append("missing_action_input")
    return [item], None


def _find_blobs(sections: list[Section], r: _Reading) -> None:
    """Tool-call blobs in a reply with no Action label: those of the first section holding
    any; the text before them is the thought, the text after is ignored."""
    for sec in sections:
        if sec.kind not in (P.THOUGHT, PREAMBLE):
            continue
        try:
            found = search_blobs(sec.content)
        except BrokenChain as exc:
            raise BrokenChain(sec.content_start + exc.pos) from None
        if not found:
            continue
        start = found[0][0]
        before = sec.content[:start].strip()
        r.thoughts = [(p, t) for p, t in r.thoughts if p != sec.start]
        if before:
            r.thoughts.append((sec.start, before))
            if sec.kind == PREAMBLE and (sec.start, "unlabeled_thought") not in r.codes:
                r.codes.append((sec.start, "unlabeled_thought"))
        if sec.content[found[-1][1] :].strip():
            found[-1][2][-1].codes.append("text_after_input")
        for at, _end, items in found:
            for item in items:
                item.pos = sec.content_start + at
                if item.thought:
                    r.thoughts.append((item.pos, item.thought))
                r.items.append(item)
        r.items.sort(key=lambda it: it.pos)
        r.thoughts.sort(key=lambda pt: pt[0])
        return


def _usable(r: _Reading) -> list[Item]:
    """The items that say something: finish actions become answers, no-ops and empty
    answers are dropped (and remembered as problems, in case nothing else is left)."""
    items: list[Item] = []
    for item in r.items:
        if item.final is None and item.tool is not None and is_finish(item.tool):
            item.final = answer_text(item.args)
            item.codes = [c for c in item.codes if c != "missing_action_input"]
            item.codes.append("final_as_action")
        if item.final is None and P.normalise_word(item.tool or "") in _NOOP_NAMES:
            r.codes.append((item.pos, "noop_action_dropped"))
            r.problems.append(
                _Problem(item.pos, "the Action is a no-op", "a tool name or 'Final Answer:'")
            )
            continue
        if item.final == "":
            r.codes.append((item.pos, "empty_final_dropped"))
            r.problems.append(_Problem(item.pos, "the final answer is empty", "the answer text"))
            continue
        items.append(item)
    return items


def _choose(r: _Reading, cut: Cut, think: str, text: str, multi_action: bool) -> ParsedStep:
    offset = cut.body_start
    items = _usable(r)
    if not items:
        only_thoughts = _Problem(
            len(cut.text) - offset,
            "the reply has thoughts but no action and no final answer",
            "'Action:' and 'Action Input:', or 'Final Answer:'",
        )
        problem = min(r.problems, key=lambda p: p.pos, default=only_thoughts)
        raise ReActParseError(
            problem.message,
            text=text,
            pos=offset + problem.pos,
            expected=problem.expected,
            code=NoticeCode.UNREADABLE if r.problems else NoticeCode.NO_STEP,
        )
    for problem in r.problems:  # recovered from: say what was dropped
        if problem.message == "the Action has no tool name":
            r.codes.append((problem.pos, "empty_action_dropped"))
    first = items[0]
    drops: list[str] = []
    later = [p for p, _ in r.thoughts] + r.others + [it.pos for it in items]
    if first.final is not None:
        kept = [first]
        keep_until = min((p for p in later if p > first.pos), default=_END)
        if any(it.final is None for it in items[1:]):
            drops.append("action_after_final_dropped")
        elif keep_until != _END:
            drops.append("text_after_final_dropped")
    else:
        kept = list(takewhile(lambda it: it.final is None, items))
        last = kept[-1].pos
        if len(kept) < len(items):
            drops.append("final_after_action_dropped")
        if not multi_action and len(kept) > 1:
            kept, last = kept[:1], kept[0].pos
            drops.append("first_action_only")
        keep_until = min((p for p in later if p > last), default=_END) if drops else _END
    codes = [code for pos, code in sorted(r.codes, key=lambda pc: pc[0]) if pos < keep_until]
    codes += [code for item in kept for code in item.codes]
    thoughts = [think, *(t for pos, t in r.thoughts if pos < keep_until)]
    return ParsedStep(
        thought="\n\n".join(t for t in thoughts if t) or None,
        actions=[_pending(item) for item in kept if item.tool is not None and item.final is None],
        final_answer=first.final,
        repairs=list(dict.fromkeys([*cut.codes, *codes, *drops])),
        text=cut.text,
    )


def _pending(item: Item) -> PendingCall:
    args, raw, codes = item.args, item.raw_input, list(dict.fromkeys(item.codes))
    exact = _exact(args, raw)
    tool = item.tool or ""
    return PendingCall(None, tool, args, raw, error=item.error, repairs=codes, exact=exact)


def _exact(args: dict[str, Any] | str, raw: str) -> bool:
    """Whether ``raw`` is JSON that decodes as it stands to the object ``args``."""
    if not isinstance(args, dict) or raw[:1] != "{":
        return False
    try:
        return bool(json.loads(raw) == args)
    except (ValueError, RecursionError):
        return False
