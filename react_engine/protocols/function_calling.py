"""``FunctionCallingProtocol``: native ``tools`` / ``tool_calls`` / ``tool_call_id``.

The reply's ``tool_calls`` become the step's calls and its ``content`` the thought; tool
results go back as ``tool`` messages in call order. A think block in the content is
reasoning: it joins the thought, never the answer.

With an ``output_type`` the request also carries a ``final_result`` tool (the type's JSON
Schema): calling it is the final answer, never run as a tool, and refused beside other
calls (it would answer before their results are in).

With ``salvage=True`` (the default) calls a model wrote in its text instead of
``tool_calls`` (:mod:`react_engine.parsing.salvage`, or a Thought/Action block) run as
calls, marked ``salvaged``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..errors import JSONRepairError, ReActParseError
from ..parsing import parse_react, repair_json
from ..parsing.salvage import read_salvaged
from ..types import (
    AssistantMessage,
    Constraint,
    Message,
    ModelRequest,
    ModelResponse,
    Step,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    UserTurn,
)
from ..wording import Notice, NoticeCode
from .base import Protocol, RequestContext
from .decision import CallTools, Decision, FinalAnswer, FormatError
from .output import FINAL_RESULT
from .prompts import PromptTemplate, load_template
from .shared import (
    arguments_json,
    constraint_style,
    guard_depth,
    native_calls,
    parsed_arguments_error,
    reasoning,
    render_history,
    salvaged_reply,
)

__all__ = ["FINAL_ALONE", "FunctionCallingProtocol"]


FINAL_ALONE = Notice(NoticeCode.FINAL_ALONE, tool=FINAL_RESULT)


_ANSWER_GRAMMAR = "root ::= [^<{\\[ \\t\\n] [^\\x00]*\n"  # no call markup to open with


class FunctionCallingProtocol(Protocol):
    """Tools as native ``tools`` / ``tool_calls``; parallel calls; JSON Schema arguments
    (sent ``strict`` when every property is required, see :attr:`Tool.strict`)."""

    name = "function_calling"
    reads_native_calls = True

    def __init__(
        self,
        *,
        salvage: bool = True,
        template: str | PromptTemplate = "function_calling",
        parallel_tool_calls: bool | None = None,
    ) -> None:
        self.salvage = salvage
        """Execute calls written in the reply's text when ``tool_calls`` is empty."""
        self.template = load_template(template, kind="function_calling")
        self.parallel_tool_calls = parallel_tool_calls
        """Sent as ``parallel_tool_calls`` when set and the model accepts the parameter
        (:attr:`Capabilities.parallel_tool_calls`); ``None`` leaves the provider default."""

    def render(self, ctx: RequestContext) -> list[Message]:
        """The history as messages.

        With ``capabilities.reasoning_echo`` (DeepSeek thinking mode, Kimi K2 Thinking), every
        assistant message since the last user question carries its ``reasoning_content``
        (``""`` if none: DeepSeek answers HTTP 400 without it); earlier ones carry none.
        Without the capability no message does (most servers reject the field).
        """
        system = self.template.fill("system", instructions=ctx.instructions or "").strip()
        last_question = max(
            (i for i, item in enumerate(ctx.history) if isinstance(item, UserTurn)), default=-1
        )
        echo = ctx.capabilities.reasoning_echo
        return render_history(
            ctx, self, system, self._render_step, flag=lambda i: echo and i > last_question
        )

    def _render_step(self, step: Step, echo: bool = False) -> list[Message]:
        native = step.protocol == self.name
        content = step.text if native else step.thought
        reasoning = (step.reasoning or "") if echo else None
        if step.kind == "final":
            return [AssistantMessage((step.text if native else None) or step.final_answer)]
        if step.kind == "format_error":
            return self._refused(step, reasoning)
        calls = tuple(
            ToolCall(a.id, a.tool, arguments_json(a.arguments, a.raw_arguments, exact=a.exact))
            for a in step.actions
        )
        out: list[Message] = [AssistantMessage(content or None, calls, reasoning=reasoning)]
        out.extend(ToolMessage(a.id, a.tool, a.observation) for a in step.actions)
        if step.feedback:
            out.append(UserMessage(step.feedback))
        return out

    def build_request(self, ctx: RequestContext) -> ModelRequest:
        messages = self.render(ctx)
        tools = [t.openai_schema() for t in ctx.tools]
        choice: str | None = ctx.tool_choice if tools else None
        required = "required" if ctx.capabilities.tool_choice_required else "auto"
        if ctx.output is not None:  # the answer is a call to final_result: a call is asked for
            t = self.template
            if "output_system" in t.texts and isinstance(messages[0], SystemMessage):
                messages[0] = SystemMessage(f"{messages[0].content}\n\n{t.fill('output_system')}")
            describe = "Give your final answer by calling this tool with it."
            describe = t.fill("output_tool", describe, type_name=ctx.output.name)
            final_only = ctx.force_final or ctx.tool_choice == "none" or not tools
            tools = [*([] if final_only else tools), ctx.output.tool_schema(describe)]
            named = not final_only and ctx.tool_choice in ctx.tool_names()
            choice = ctx.tool_choice if named else required
        elif ctx.force_final and tools:
            choice = "none"
        elif choice == "required":
            choice = required  # else enforced here: a reply without a call is a format error
        if ctx.force_final and tools:
            messages.append(UserMessage(self._force_final_text(ctx)))
        # Under tool_choice="none", rule out a call written as text where grammars are taken
        # (a small model copies the calls it sees in the transcript).
        style = constraint_style(ctx, grammar=True) if choice == "none" else None
        accepted = ctx.capabilities.parallel_tool_calls  # else rejected, or learned so
        return ModelRequest(
            model=ctx.model,
            messages=tuple(messages),
            tools=tuple(tools) or None,
            tool_choice=choice,
            parallel_tool_calls=self.parallel_tool_calls if accepted and tools else None,
            settings=ctx.settings,
            constraint=Constraint(style=style, grammar=_ANSWER_GRAMMAR) if style else None,
        )

    def _force_final_text(self, ctx: RequestContext) -> str:
        typed = ctx.output is not None and "output_force_final" in self.template.texts
        return self.template.fill("output_force_final" if typed else "force_final")

    def output_retry(self) -> str:
        retry = f"call {FINAL_RESULT}, alone, with arguments valid for its schema"
        return self.template.fill("output_retry", retry)

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        if ctx.output is None:
            return self._read(reply, ctx)
        finals = [c for c in reply.tool_calls if c.name == FINAL_RESULT]
        if finals and (ctx.force_final or len(finals) == len(reply.tool_calls)):
            return self._final_result(reply, finals[0].arguments, ctx)
        decision = self._read(reply, ctx)
        if isinstance(decision, CallTools):
            if all(c.salvaged and c.tool == FINAL_RESULT for c in decision.calls):
                # final_result written in the text (a <tool_call> block...): the answer.
                arguments = decision.calls[0].raw_arguments
                return self._final_result(reply, arguments, ctx, decision.repairs)
            for call in decision.calls:
                if call.tool == FINAL_RESULT:
                    call.error = FINAL_ALONE
        return decision

    def _final_result(
        self, reply: ModelResponse, answer: str, ctx: RequestContext, repairs: Sequence[str] = ()
    ) -> FinalAnswer:
        """A ``final_result`` call's arguments as the final answer, as JSON text for the
        policy to validate."""
        assert ctx.output is not None
        content = reply.content or ""
        _, _, thought = reasoning(content)
        repairs = list(repairs)
        try:
            decoded = repair_json(answer, allow_truncated=False)
        except JSONRepairError:
            pass
        else:
            repairs += [f"json:{r}" for r in decoded.repairs]
            answer = json.dumps(ctx.output.unwrap(decoded.value), ensure_ascii=False)
        return FinalAnswer(text=content or None, thought=thought, answer=answer, repairs=repairs)

    def _read(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        content = reply.content or ""
        think, said, thought = reasoning(content)
        calls = [] if ctx.force_final else native_calls(reply)  # forced: only text can answer
        if calls:
            return CallTools(
                text=content or None,
                thought=thought,
                calls=calls,
                repairs=[r for c in calls for r in c.repairs],
            )
        salvage = self.salvage and not ctx.force_final and (ctx.tools or ctx.output)
        if salvage and content.strip():
            salvaged = self._salvage(content, ctx)
            if salvaged is not None:
                return salvaged
        if said.strip():
            return FinalAnswer(text=content, thought=think, answer=said.strip())
        if ctx.force_final:
            problem = "only reasoning" if think or reply.reasoning else "empty"
            return FormatError(
                text=content, thought=think, feedback=self._force_final_text(ctx), problem=problem
            )
        return FormatError(text=content, thought=think, feedback=self.template.fill("empty_reply"))

    def _salvage(self, content: str, ctx: RequestContext) -> CallTools | None:
        names = ctx.tool_names()
        if ctx.output is not None:
            names.append(FINAL_RESULT)
        salvaged, _ = salvaged_reply(content, names, ctx)
        if salvaged is not None:
            return salvaged
        # A Thought/Action block: its calls name tools as written or in another case and
        # spelling (QueryEngineTool, query-engine-tool), unless escaped, so a reply holding
        # no tool's name in any such spelling (the usual answer) has none to read.
        squashed = content.lower().replace("_", "").replace("-", "")
        if "\\" not in content and not any(
            name.lower().replace("_", "").replace("-", "") in squashed for name in names
        ):
            return None
        try:
            parsed = parse_react(content, tools=names)
        except ReActParseError:
            return None
        if not parsed.actions or not all(a.tool in names for a in parsed.actions):
            return None
        if "json_blob" in parsed.repairs and read_salvaged(content, names, examples=True).calls:
            return None  # the only calls are examples in a code fence: not calls
        calls = parsed.actions  # the parser's own calls, completed here
        for call in calls:
            call.error = call.error or parsed_arguments_error(call.arguments, parsed.repairs)
            call.salvaged = True
            call.repairs = ["salvaged:react_text", *call.repairs]
            guard_depth(call)
        return CallTools(
            text=parsed.thought,
            thought=parsed.thought,
            calls=calls,
            repairs=[*parsed.repairs, "salvaged:react_text"],
        )
