"""``MinimalProtocol``: one line per call, ``CALL <tool> <json>``, or ``ANSWER <text>``.

The smallest protocol, and the one to copy when you write your own: it only words the
request and reads the reply; :mod:`react_engine.protocols.policy` decides the rest.

The model is asked to reply with either::

    CALL get_weather {"location": "Paris"}
    CALL calculator {"expression": "2 + 2"}

(one call per line, arguments as one JSON object) or::

    ANSWER It is 14°C in Paris.

Tool results come back as user messages, ``RESULT <tool>: <observation>``. There are no
repairs: arguments run exactly as written, and a reply in no format gets a reminder.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..types import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    PendingCall,
    Step,
    UserMessage,
)
from ..wording import Notice
from .base import Protocol, RequestContext
from .decision import CallTools, Decision, FinalAnswer, FormatError
from .shared import arguments_json, guard_depth, output_instruction, reasoning, render_history

if TYPE_CHECKING:
    from .registry import ScriptStep

__all__ = ["MinimalProtocol"]

FORMAT = (
    "Reply with one line per tool call, CALL <tool> <json arguments>, or with ANSWER "
    "followed by your final answer."
)
REMINDER = "Reply with CALL <tool> <json> or ANSWER <text>."


class MinimalProtocol(Protocol):
    """Calls as ``CALL <tool> <json>`` lines, the answer as ``ANSWER <text>``."""

    name = "minimal"

    @staticmethod
    def script(step: ScriptStep) -> list[dict[str, Any]]:
        if step.answer is not None:
            return [{"content": f"ANSWER {step.answer}"}]
        lines = []
        for tool, args in step.calls:
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            lines.append(f"CALL {tool} {raw}")
        return [{"content": "\n".join(lines)}]

    def render(self, ctx: RequestContext) -> list[Message]:
        tools = "\n".join(
            f"- {t.name}: {t.description} Arguments: {json.dumps(t.parameters)}" for t in ctx.tools
        )
        system = [ctx.instructions, FORMAT, f"Tools:\n{tools or '(none)'}", output_instruction(ctx)]
        prompt = "\n\n".join(p for p in system if p)
        return render_history(ctx, self, prompt, self._step)

    def _step(self, step: Step, _: object = None) -> list[Message]:
        said = step.text if step.protocol == self.name else None
        if said is None and step.kind == "final":
            said = f"ANSWER {step.final_answer or ''}"
        elif said is None:
            said = "\n".join(
                f"CALL {a.tool} {arguments_json(a.arguments, a.raw_arguments, exact=a.exact)}"
                for a in step.actions
            )
        out: list[Message] = [AssistantMessage(said)]
        if step.feedback:
            out.append(UserMessage(step.feedback))
        out.extend(UserMessage(f"RESULT {a.tool}: {a.observation}") for a in step.actions)
        return out

    def build_request(self, ctx: RequestContext) -> ModelRequest:
        messages = self.render(ctx)
        if ctx.force_final:
            messages.append(UserMessage("No more tools: reply with ANSWER and your answer."))
        return ModelRequest(model=ctx.model, messages=tuple(messages), settings=ctx.settings)

    def feedback(self, error: Notice | str, *, forced: bool = False) -> str:
        return f"Your reply could not be used: {error}." + ("" if forced else f" {REMINDER}")

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        content = reply.content or ""
        thought, said, _ = reasoning(content)
        text = said.strip()
        head, *rest = text.split(maxsplit=1) or [""]  # ANSWER, then a space or a line break
        if head == "ANSWER" and rest:
            return FinalAnswer(text=content.strip(), thought=thought, answer=rest[0].strip())
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        calls = [c for line in lines if line.startswith("CALL ") and (c := _call(line)) is not None]
        if lines and len(calls) == len(lines):  # every line a call, every call readable
            return CallTools(text=content.strip(), thought=thought, calls=calls)
        return FormatError(text=content.strip() or None, thought=thought, feedback=REMINDER)


def _call(line: str) -> PendingCall | None:
    """``CALL <tool> <json>`` as a call, ``None`` when its arguments are no JSON object."""
    tool, _, raw = line.removeprefix("CALL ").strip().partition(" ")
    try:
        arguments = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return None
    if not tool or not isinstance(arguments, dict):
        return None
    call = PendingCall(None, tool, arguments, raw or "{}", exact=True)  # sent back as written
    guard_depth(call)
    return call
