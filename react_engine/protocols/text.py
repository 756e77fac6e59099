"""``TextReActProtocol``: Thought / Action / Observation as plain text.

For models and deployments without function calling: the tools are described in the
system prompt, the model writes ``Thought:``/``Action:``/``Action Input:`` (or a JSON blob,
or Chinese labels, per the template), :func:`react_engine.parse_react` reads the reply.

Each step is one assistant message (cut before any invented observation) and one user
message of observations, so each prompt extends the previous one and prompt caches hit.
Observations are wrapped in ``<observation>`` tags (any such tag inside is defused) and
only the model's own reply is parsed: a tool result cannot end the run or trigger a tool.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ReActParseError
from ..parsing import parse_react
from ..parsing.placement import REASONS
from ..parsing.salvage import read_salvaged
from ..transport.grammar import GrammarError, ReactLabels, react_grammar
from ..types import (
    AssistantMessage,
    Constraint,
    Message,
    ModelRequest,
    ModelResponse,
    ParsedStep,
    Step,
    UserMessage,
)
from ..wording import Notice, NoticeCode, word
from .base import Protocol, RequestContext
from .decision import CallTools, Decision, FinalAnswer, FormatError
from .limits import READ_LIMIT
from .prompts import PromptTemplate, load_template
from .shared import (
    close_input,
    constraint_style,
    guard_depth,
    output_instruction,
    parsed_arguments_error,
    render_history,
    salvaged_reply,
    step_shape,
)

if TYPE_CHECKING:
    from .registry import ProtocolOptions, ScriptStep

__all__ = ["TemplatedProtocol", "TextReActProtocol", "system_prompt"]

_MAY_HOLD_CALL = re.compile(r"[{\[<>(]")  # every native call format needs one of these
_EXAMPLE_ONLY = (
    "the only call in the reply is an example inside a code block, which is not run; "
    "write the Action outside any code block"
)
# repairs meaning parse_react found no label of its own: the reply may be a native call
_UNLABELED = frozenset({"json_blob", "implicit_final_answer", "deepseek_tokens"})

log = logging.getLogger("react_engine")

_OBS_TAG = re.compile(r"<(\s*/?\s*observation\b[^<>]*)>", re.IGNORECASE)


def system_prompt(template: PromptTemplate, ctx: RequestContext) -> str:
    """A prompt template's system text: instructions, tools, what ``tool_choice`` asks for
    and a typed answer's schema, in the template's words (a run builds it once)."""
    t = template
    names = ctx.tool_names()
    tools = (  # one JSON line per tool
        json.dumps(
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
            ensure_ascii=False,
        )
        for tool in ctx.tools
    )
    system = t.fill(
        "system",
        instructions=ctx.instructions or "",
        tools="\n".join(tools) or "(no tools)",
        tool_names=", ".join(names),
    ).strip()
    extra = None
    if not names and "no_tools" in t.texts:
        extra = t.fill("no_tools")
    elif ctx.tool_choice == "none" and "tool_none" in t.texts:
        extra = t.fill("tool_none")
    elif ctx.tool_choice in names and "tool_named" in t.texts:
        extra = t.fill("tool_named", tool=ctx.tool_choice)
    elif ctx.tool_choice == "required" and "tool_required" in t.texts:
        extra = t.fill("tool_required", tool_names=", ".join(names))
    parts = [system, extra, output_instruction(ctx, t)]
    return "\n\n".join(p for p in parts if p)


def wrap_observation(text: str) -> str:
    """Mark a tool result as data: any spelling of the tag inside it (``</Observation >``)
    is escaped, so the block has exactly one opening and one closing tag."""
    safe = _OBS_TAG.sub(lambda m: f"&lt;{m.group(1)}&gt;", text)
    return f"<observation>{safe}</observation>"


_CUT_AFTER_ACTION = frozenset({"cut_observation", "cut_stop_word", "trim_partial_stop"})


class TemplatedProtocol(Protocol):
    """A protocol prompted by a :class:`PromptTemplate` (``template``): it refuses a reply
    and asks again for a typed answer in the template's words."""

    template: PromptTemplate
    send_stop: bool = False
    _render_step: Callable[[Step, object], list[Message]]
    _constraint: Callable[[RequestContext], Constraint | None]

    def _system(self, ctx: RequestContext) -> str:
        """The system message (``bfcl-prompt`` sends BFCL's own)."""
        key = ("system_prompt", ctx.instructions, ctx.tool_choice, ctx.output)
        return ctx.once((self.template,), key, functools.partial(system_prompt, self.template, ctx))

    def render(self, ctx: RequestContext) -> list[Message]:
        def question(text: str) -> Message:
            return UserMessage(self.template.fill("question", text, question=text))

        return render_history(ctx, self, self._system(ctx), self._render_step, question=question)

    def build_request(self, ctx: RequestContext) -> ModelRequest:
        t = self.template
        messages = self.render(ctx)
        if ctx.force_final and "force_final" in t.texts:
            messages.append(UserMessage(t.fill("force_final")))
        stop = t.stop[:4] if (self.send_stop and ctx.capabilities.stop) else None
        return ModelRequest(
            model=ctx.model,
            messages=tuple(messages),
            stop=stop or None,
            settings=ctx.settings,
            constraint=self._constraint(ctx),
        )

    def output_retry(self) -> str:
        return self.template.fill("output_retry", super().output_retry())

    def feedback(self, error: Notice | str, *, forced: bool = False) -> str:
        """The template's ``format_error`` message in its language, with its
        ``format_reminder`` unless the request was a forced final one."""
        t, said = self.template, word(error, self.template.language)
        reminder = "" if forced else t.fill("format_reminder", "")
        return t.fill("format_error", error=said, reminder=reminder).strip()

    def _format_error(
        self,
        text: str | None,
        error: Notice | str,
        thought: str | None = None,
        *,
        forced: bool = False,
    ) -> FormatError:
        problem = f"not in the expected format ({error})" if forced else None
        unread = FormatError(text=text, thought=thought, feedback="")
        return self.reject(unread, error, forced=forced, problem=problem)


class TextReActProtocol(TemplatedProtocol):
    """ReAct over plain chat: prompt templates, stop sequences and a tolerant parser."""

    name = "text"

    def __init__(
        self,
        *,
        template: str | PromptTemplate = "classic",
        send_stop: bool = True,
        implicit_final_answer: bool = False,
    ) -> None:
        self.template = load_template(template, kind="text")
        """The prompt template: a shipped name (classic, json, zh) or a loaded template."""
        self.send_stop = send_stop
        """Send the template's stop sequences where the model supports ``stop`` (replies are
        cut at an invented observation either way)."""
        self.implicit_final_answer = implicit_final_answer
        """Take a reply with no label at all as the final answer. Off by default: such a
        reply is sent back once with a reminder (the model may be answering without the
        facts a tool would give); a plain reply again is the answer."""
        chinese = any(not label.isascii() for label in self.template.labels.values())
        # parser codes for what this template itself asks for: not repairs under it
        self._own_style = frozenset({"chinese_label", "fullwidth_colon"} if chinese else ())

    @classmethod
    def from_options(cls, options: ProtocolOptions) -> TextReActProtocol:
        return cls(
            template=options.template or options.capabilities.text_template,
            implicit_final_answer=options.implicit_final_answer,
        )

    @staticmethod
    def script(step: ScriptStep) -> list[dict[str, Any]]:
        if step.answer is not None:
            return [
                {"content": f"Thought: I now know the final answer\nFinal Answer: {step.answer}"}
            ]
        lines = [f"Thought: {step.thought or 'I will use a tool.'}"]
        for tool, args in step.calls:
            shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            lines.append(f"Action: {tool}\nAction Input: {shown}")
        return [{"content": "\n".join(lines)}]

    def _repairs(self, codes: list[str]) -> list[str]:
        return [c for c in codes if c not in self._own_style] if self._own_style else codes

    def __repr__(self) -> str:
        implicit = ", implicit_final_answer=True" if self.implicit_final_answer else ""
        return f"TextReActProtocol(template={self.template.name!r}{implicit})"

    def _render_step(self, step: Step, _: object = None) -> list[Message]:
        t = self.template
        native = step.protocol == self.name and bool(step.text)
        if step.kind == "final":
            answer, thought = step.final_answer or "", "I now know the final answer"
            said = step.text if native else t.fill("final_example", thought=thought, answer=answer)
            return [AssistantMessage(said or answer)]
        if step.kind == "format_error":
            return self._refused(step)
        if native:
            said = step.text or ""
        else:
            blocks = []
            for i, action in enumerate(step.actions):
                thought = ((step.thought or "").strip() if i == 0 else "") or "I will use a tool."
                args = action.arguments
                shown = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else args
                block = t.fill("action_example", thought=thought, tool=action.tool, input=shown)
                blocks.append(block)
            said = "\n".join(blocks)
        out: list[Message] = [AssistantMessage(said), UserMessage(self._observations(step))]
        if step.feedback:
            out.append(UserMessage(step.feedback))
        return out

    def _observations(self, step: Step) -> str:
        t = self.template
        several = len(step.actions) > 1 and "observation_item" in t.texts
        key = "observation_item" if several else "observation"
        return "\n".join(
            t.fill(key, index=i, tool=a.tool, observation=wrap_observation(a.observation))
            for i, a in enumerate(step.actions, 1)
        )

    def _labels(self) -> ReactLabels:
        words: dict[str, Any] = dict(self.template.labels)  # LABEL_KEYS: ReactLabels' fields
        blob = words.pop("action_format", "lines") == "json_blob"
        words.setdefault("colon", "：" if self._own_style else ": ")
        return ReactLabels(**words, json_blob=blob)

    def _constraint(self, ctx: RequestContext) -> Constraint | None:
        """A grammar for the reply: a thought, then a valid action or a final answer."""
        style = constraint_style(ctx, grammar=True)
        if style is None:
            return None  # no constraint, or a JSON Schema (which cannot describe a text reply)
        try:
            grammar = react_grammar(labels=self._labels(), **step_shape(ctx))
        except GrammarError as exc:
            log.warning("no grammar for this request: %s", exc)
            return None
        return Constraint(style=style, grammar=grammar)

    def _native(self, raw: str, parsed: ParsedStep | None, ctx: RequestContext) -> Decision | None:
        """The calls of a reply written in a model family's own tool-call format, where the
        Thought/Action reading found no label of its own (or only a bare JSON blob, of which
        it reads the first; the native reader reads them all)."""
        if ctx.force_final or not ctx.tools or not _MAY_HOLD_CALL.search(raw):
            return None
        labeled = parsed is not None and (parsed.actions or parsed.final_answer is not None)
        if labeled and parsed is not None and not _UNLABELED.intersection(parsed.repairs):
            return None
        names = ctx.tool_names()
        blob = parsed is not None and parsed.actions and "json_blob" in parsed.repairs
        # A blob reply is read with the examples first: no call there means none outside
        # them either, so the usual blob reply is read once, not twice.
        if blob and not read_salvaged(raw, names, limit=READ_LIMIT, examples=True).calls:
            return None
        salvaged, withheld = salvaged_reply(raw, names, ctx)
        if salvaged is not None:
            salvaged.text = raw.strip() or None  # the reply as written stays in the transcript
            return salvaged
        if blob and withheld is not None:
            refusal = Notice(NoticeCode.NOT_ACTION, reason=REASONS[withheld])
            return self._format_error(raw.strip() or None, refusal)
        return self._format_error(raw.strip() or None, _EXAMPLE_ONLY) if blob else None

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        raw = reply.content or ""
        try:
            parsed = parse_react(
                raw,
                multi_action=True,  # which of several actions run: the policy's choice
                stop_words=self.template.stop,
                implicit_final_answer=self.implicit_final_answer,
                limit=READ_LIMIT,  # stops there: more is refused (protocols.limits)
                tools=ctx.tool_names(),
            )
        except ReActParseError as exc:
            native = self._native(raw, None, ctx)
            if native is not None:
                return native
            unlabeled = exc.code == NoticeCode.UNLABELED
            where = {"line": str(exc.line), "column": str(exc.column), "expected": exc.expected}
            if unlabeled:
                label = self.template.labels.get("final_answer", "Final Answer")
                error = Notice(NoticeCode.UNLABELED, label=label)
            else:
                error = Notice(exc.code, reason=exc.reason, **where)
            refused = self._format_error(raw.strip() or None, error, forced=ctx.force_final)
            refused.plain = self._plain(raw) if unlabeled else None
            return refused
        native = self._native(raw, parsed, ctx)
        if native is not None:
            return native
        text = parsed.text or raw.strip()
        repairs = self._repairs(parsed.repairs)
        if parsed.actions:
            # An invented observation cut after the action: the reply went on past it.
            went_on = bool(_CUT_AFTER_ACTION.intersection(parsed.repairs))
            calls = parsed.actions  # the parser's own calls, completed here
            for call in calls:
                close_input(call, reply.finish_reason)
                call.error = call.error or parsed_arguments_error(call.arguments, parsed.repairs)
                call.repairs = self._repairs(call.repairs)
                call.cut = False if went_on else None
                guard_depth(call)
            return CallTools(text=text, thought=parsed.thought, calls=calls, repairs=repairs)
        if parsed.final_answer is not None:
            return FinalAnswer(
                text=text, thought=parsed.thought, answer=parsed.final_answer, repairs=repairs
            )
        return self._format_error(
            text,
            Notice(NoticeCode.NO_STEP),
            parsed.thought,
            forced=ctx.force_final,
        )

    def _plain(self, raw: str) -> str | None:
        """A reply with no label at all, read as the answer it would be."""
        stop = self.template.stop
        try:
            read = parse_react(raw, multi_action=True, stop_words=stop, implicit_final_answer=True)
        except ReActParseError:
            return None
        return (read.final_answer or None) if "implicit_final_answer" in read.repairs else None
