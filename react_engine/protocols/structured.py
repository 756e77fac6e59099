"""``StructuredOutputProtocol``: each reply is one JSON object, a tool call or the answer.

For models that can be held to a JSON Schema but have no native tool calling. A step is::

    {"thought": "...", "action": {"tool": "get_weather", "arguments": {"location": "Paris"}}}
    {"thought": "...", "action": {"final_answer": "Sunny in Paris."}}

Where the server constrains decoding the request carries
:func:`~react_engine.transport.grammar.step_schema` (as a GBNF grammar for llama.cpp);
without, the reply is read tolerantly, a flat ``{"tool": ..., "arguments": ...}`` too.
Each step is an assistant message with the JSON object (a canonical one for steps made
under another protocol) and a user message with the observation.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import JSONRepairError
from ..nesting import CUT, TOO_DEEP, exceeds_depth
from ..parsing import read_think, repair_json
from ..tools.schema import meets_strict_mode
from ..transport.grammar import GrammarError, schema_grammar, step_schema
from ..types import (
    ActionRecord,
    AssistantMessage,
    Constraint,
    Message,
    ModelResponse,
    PendingCall,
    Step,
    UserMessage,
)
from ..wording import Notice, NoticeCode
from .base import RequestContext
from .decision import CallTools, Decision, FinalAnswer
from .prompts import PromptTemplate, load_template
from .shared import constraint_style, decode_arguments, join, json_object, step_shape
from .text import TemplatedProtocol, wrap_observation

if TYPE_CHECKING:
    from .registry import ScriptStep

__all__ = ["CUT_SHORT", "PLAIN", "UNCLOSED_THINK", "StructuredOutputProtocol", "step_json"]

log = logging.getLogger("react_engine")

CUT_SHORT = (
    "the reply was cut off by the length limit (max_tokens) before its JSON object was "
    "complete; write the whole object again, with a shorter thought"
)
UNCLOSED_THINK = (
    "the reply ends inside its reasoning (a <think> block that is never closed), so "
    "nothing in it was used; close the reasoning with </think> and write the JSON object "
    "after it"
)
PLAIN = "the reply is plain text, not a JSON object"
# JSON repairs that mean the text ended before the value did
_TRUNCATION: frozenset[str] = frozenset({"missing_quote", "missing_closing_bracket"})
# an answer that only echoes the prompt's placeholder (``<your answer>``, ``...``)
_PLACEHOLDER = re.compile(r"\s*(?:<[^<>\n]{0,40}\banswer\b[^<>\n]{0,20}>|\.{3}|…)\s*", re.I)
_JSON_OPENS = "{[`"  # think blocks are read before the JSON (or its fence), never inside
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "action_input", "input")
_FINAL_NAMES = frozenset({"final answer", "final_answer", "finalanswer", "finish"})


def step_json(
    thought: str | None,
    *,
    tool: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    final_answer: str | None = None,
) -> str:
    """The canonical JSON text of one step: a call (``tool``) or a final answer."""
    action: dict[str, Any]
    if tool is not None:
        action = {"tool": tool, "arguments": dict(arguments or {})}
    else:
        action = {"final_answer": final_answer or ""}
    return json.dumps({"thought": thought or "", "action": action}, ensure_ascii=False)


class StructuredOutputProtocol(TemplatedProtocol):
    """Tool calls and answers as one JSON object per reply, held to a JSON Schema where the
    server constrains decoding."""

    name = "structured"

    def __init__(self, *, template: str | PromptTemplate = "structured") -> None:
        self.template = load_template(template, kind="structured")
        """The prompt template: ``"structured"`` or a loaded ``kind = "structured"`` one."""

    @staticmethod
    def script(step: ScriptStep) -> list[dict[str, Any]]:
        """One JSON object per reply: a step of several calls is several replies."""
        if step.answer is not None:
            return [{"content": step_json("I now know the final answer", final_answer=step.answer)}]
        out = []
        for i, (tool, args) in enumerate(step.calls):
            thought = (step.thought or "I will use a tool.") if i == 0 else "Next call."
            content = step_json(thought, tool=tool, arguments={} if isinstance(args, str) else args)
            if isinstance(args, str):  # the arguments as written, JSON or not
                content = content.removesuffix("{}}}") + args + "}}"
            out.append({"content": content})
        return out

    def __repr__(self) -> str:
        return f"StructuredOutputProtocol(template={self.template.name!r})"

    def _render_step(self, step: Step, _: object = None) -> list[Message]:
        native = step.protocol == self.name and bool(step.text and step.text.strip())
        if step.kind == "final":
            if native:
                return [AssistantMessage(step.text)]
            thought = (step.thought or "").strip() or "I now know the final answer"
            return [AssistantMessage(step_json(thought, final_answer=step.final_answer))]
        if step.kind == "format_error":
            return self._refused(step)
        out: list[Message] = []
        if native:
            out.append(AssistantMessage(step.text))
            if step.actions:
                out.append(UserMessage("\n".join(self._observation(a) for a in step.actions)))
        for i, action in enumerate([] if native else step.actions):
            # a step made under another protocol: one object per call, each with its observation
            out.append(AssistantMessage(self._foreign_call(step, i)))
            out.append(UserMessage(self._observation(action)))
        if step.feedback:
            out.append(UserMessage(step.feedback))
        return out

    def _foreign_call(self, step: Step, index: int) -> str:
        action = step.actions[index]
        thought = (step.thought or "").strip() if index == 0 else ""
        arguments = action.arguments  # text input is {"input": text}, unless its raw text
        if not isinstance(arguments, dict):  # is a JSON object
            value = json_object(action.raw_arguments)
            arguments = value if value is not None else {"input": arguments}
        return step_json(thought or "I will use a tool.", tool=action.tool, arguments=arguments)

    def _observation(self, action: ActionRecord) -> str:
        return self.template.fill(
            "observation", tool=action.tool, observation=wrap_observation(action.observation)
        )

    def _constraint(self, ctx: RequestContext) -> Constraint | None:
        style = constraint_style(ctx)
        if style is None:
            return None
        shape = step_shape(ctx)
        schema = step_schema(**shape)
        # the tools the schema admits: ``strict`` only when each of them meets strict mode
        functions = [entry["function"] for entry in shape["tools"]]
        strict = all(
            f.get("strict") and meets_strict_mode(f["parameters"]) for f in functions
        ) and (ctx.output is None or ctx.output.strict)
        grammar = None
        if style == "llama.cpp":
            # vLLM and json_schema servers take the schema (not every vLLM backend reads GBNF)
            try:
                grammar = schema_grammar(schema, "step")
            except GrammarError as exc:
                log.warning("no grammar for this request, sending the JSON Schema: %s", exc)
        return Constraint(style=style, grammar=grammar, json_schema=schema, strict=strict)

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        # a forced final request's refusal does not remind the model of tools
        fail = functools.partial(self._format_error, forced=ctx.force_final)
        raw = reply.content or ""
        thinking = read_think(raw, payload=_JSON_OPENS)
        reasoning, body, repairs = thinking.reasoning, thinking.rest, list(thinking.codes)
        text = body.strip() or None
        if not body.strip():
            error = "the reply was empty"
            if "unclosed_think" in repairs:
                error = CUT_SHORT if reply.finish_reason == "length" else UNCLOSED_THINK
            return fail(raw.strip() or None, error, reasoning)
        cut = reply.finish_reason == "length"
        try:
            decoded = repair_json(body.strip())
        except JSONRepairError as exc:
            if cut:
                error = CUT_SHORT
            elif "nesting deeper than" in str(exc):
                # almost always a call's arguments: said as the other protocols say it
                error = f"the reply nests too deeply to be read: {TOO_DEEP}"
            elif body.lstrip()[:1] not in _JSON_OPENS:
                refused = fail(text, PLAIN, reasoning)
                refused.plain = body.strip()  # prose: the answer, should it come again
                return refused
            else:
                error = f"the reply is not a JSON object ({exc})"
            return fail(text, error, reasoning)
        repairs += [f"json:{r}" for r in decoded.repairs]
        truncated = cut and bool(_TRUNCATION.intersection(decoded.repairs))
        value = decoded.value
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            value = value[0]
            repairs.append("unwrapped_array")
        if not isinstance(value, dict):
            return fail(
                text, f"the reply must be a JSON object, not {type(value).__name__}", reasoning
            )

        read = _read_step(value)
        thought = join(reasoning, read.thought)
        repairs += read.repairs
        if read.error is not None:
            return fail(text, CUT_SHORT if truncated else read.error, thought)

        if read.tool is not None:
            call = _pending(read.tool, read.arguments)
            repairs += call.repairs
            # the call is the whole reply: every repair of its JSON may have moved it
            call.repairs = list(dict.fromkeys(repairs))
            # JSON completed by repair: the policy refuses it in a reply cut by length
            call.cut = bool(_TRUNCATION.intersection(decoded.repairs))
            return CallTools(text=text, thought=thought, calls=[call], repairs=repairs)

        answer = read.final_answer or ""
        if not answer.strip():
            return fail(text, "the final answer was empty", thought)
        if _PLACEHOLDER.fullmatch(answer):
            return fail(
                text,
                f"the final answer {answer.strip()!r} is the placeholder from the instructions: "
                "write the answer itself",
                thought,
            )
        if truncated:
            repairs.append("cut_by_length")
        return FinalAnswer(text=text, thought=thought, answer=answer.strip(), repairs=repairs)


@dataclass(slots=True)
class _Read:
    """What one decoded reply object says: a call, a final answer, or an error."""

    thought: str | None = None
    tool: str | None = None
    arguments: Any = None
    final_answer: str | None = None
    error: str | None = None
    repairs: list[str] = field(default_factory=list)


def _read_step(value: Mapping[str, Any]) -> _Read:
    out = _Read()
    thought = value.get("thought")
    if thought is not None:
        out.thought = _as_text(thought)
    action = value.get("action")
    if isinstance(action, Mapping):
        body: Mapping[str, Any] = action
    elif isinstance(action, str) and action.strip():
        # A LangChain-style blob: {"action": "get_weather", "action_input": {...}}.
        out.repairs.append("action_blob")
        if action.strip().lower() in _FINAL_NAMES:
            answer = _first(value, ("action_input", "final_answer", "answer"))
            body = {"final_answer": answer}
        else:
            body = {"tool": action, "arguments": _first(value, _ARGUMENT_KEYS)}
    elif action is None and ("tool" in value or "final_answer" in value):
        out.repairs.append("flat_step")
        body = value
    else:
        out.error = (
            'the JSON object has no "action": write {"thought": ..., "action": {"tool": ..., '
            '"arguments": {...}}} or {"thought": ..., "action": {"final_answer": ...}}'
        )
        return out

    tool = body.get("tool", body.get("name"))
    has_answer = "final_answer" in body
    if tool is not None and has_answer:
        out.error = "the action has both a tool and a final_answer: write only one of them"
        return out
    if has_answer:
        out.final_answer = _as_text(body["final_answer"])
        return out
    if not isinstance(tool, str) or not tool.strip():
        out.error = (
            'the action names no tool: give "tool" (a tool name) and "arguments", or "final_answer"'
        )
        return out
    out.tool = tool.strip()
    # A key beside the arguments may be an argument one bracket too late ({"arguments":
    # {"a": 1}, "b": 2}): dropping it or moving it inside would be a guess. Refused.
    known = {"tool", "name", *_ARGUMENT_KEYS}
    stray = [k for k in body if k not in known]
    if body is value:  # a flat step: the thought sits beside the call
        stray = [k for k in stray if k not in ("thought", "action")]
    elif isinstance(action, Mapping):
        stray += [k for k in value if k not in ("thought", "action")]
    if stray:
        names = ", ".join(json.dumps(k, ensure_ascii=False) for k in stray[:5])
        out.error = (
            f"the step has keys beside the tool and its arguments ({names}): put every "
            'argument inside "arguments" and write the step again'
        )
        return out
    present = [k for k in _ARGUMENT_KEYS if k in body]
    if not present:
        out.arguments = {}
        out.repairs.append("missing_arguments")
    else:
        if present[0] != "arguments":
            out.repairs.append("arguments_key")
        out.arguments = body[present[0]]
    return out


def _pending(tool: str, arguments: Any) -> PendingCall:
    if exceeds_depth(arguments):  # checked before json.dumps, which may not get that deep
        return PendingCall(None, tool, CUT, CUT, error=TOO_DEEP)
    if isinstance(arguments, dict):
        text = json.dumps(arguments, ensure_ascii=False)  # the one encoding, kept
        return PendingCall(None, tool, arguments, text, exact=True)
    if isinstance(arguments, str):
        # Arguments written as a JSON string ("{\"city\": \"Paris\"}"), or plain text.
        if arguments.lstrip()[:1] in ("{", "["):
            decoded, error, fixes = decode_arguments(arguments)
            repairs = ["arguments_as_string", *fixes]
            return PendingCall(None, tool, decoded, arguments, error=error, repairs=repairs)
        return PendingCall(None, tool, arguments, arguments)
    if arguments is None:
        return PendingCall(None, tool, {}, "{}", repairs=["null_arguments"])
    text = json.dumps(arguments, ensure_ascii=False)
    error = Notice(NoticeCode.NOT_AN_OBJECT, kind=type(arguments).__name__)
    return PendingCall(None, tool, text, text, error=error)


def _first(value: Mapping[str, Any], keys: Sequence[str]) -> Any:
    return next((value[k] for k in keys if k in value), None)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
