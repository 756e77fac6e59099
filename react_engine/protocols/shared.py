"""What every protocol reads and renders the same way, written once: native and salvaged
calls, argument decoding, reasoning, the history as messages, constraint styles and typed
answers. It imports nothing of the seam or the policy, so that both can use it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import JSONRepairError
from ..nesting import TOO_DEEP, exceeds_depth
from ..parsing import read_think, repair_json
from ..parsing.salvage import FORMATS, read_salvaged, strip_salvaged
from ..types import (
    Message,
    ModelResponse,
    PendingCall,
    Step,
    SystemMessage,
    UserMessage,
    UserTurn,
)
from ..wording import Notice, NoticeCode
from .decision import CallTools
from .limits import READ_LIMIT

if TYPE_CHECKING:
    from ..parsing.placement import NotAction
    from ..transport.capabilities import ConstraintStyle
    from .base import RequestContext
    from .prompts import PromptTemplate

__all__ = [
    "arguments_json",
    "close_input",
    "constraint_style",
    "decode_arguments",
    "guard_depth",
    "join",
    "json_object",
    "native_calls",
    "output_instruction",
    "parsed_arguments_error",
    "reasoning",
    "render_history",
    "salvaged_calls",
    "salvaged_reply",
    "step_shape",
]


def _cut_parameter(content: str, span: tuple[int, int], fmt: str = "qwen_xml") -> bool:
    """Whether an XML-ish call ends the reply inside its last value (no closing tag)."""
    registered = FORMATS.get(fmt)
    if registered is None or registered.values is None:
        return False
    opening, closings = registered.values
    body = content[span[0] : span[1]]
    last = body.rfind(opening)
    if last < 0 or content[span[1] :].strip():
        return False
    tail = body[last:]
    return not any(tag in tail for tag in closings)


def salvaged_calls(content: str, found: list[PendingCall]) -> tuple[list[PendingCall], list[str]]:
    """The salvaged calls of ``content`` completed (raw arguments, ``salvaged:FORMAT``, a
    cut), and the repairs. Decoded arguments are encoded here, once (``exact``)."""
    repairs = []
    for call in found:
        args = call.arguments
        fixes = call.repairs
        if isinstance(args, str):
            call.raw_arguments = args
            if args.lstrip()[:1] in ("{", "["):
                call.arguments, call.error, decoded = decode_arguments(args)
                fixes = [*fixes, *decoded]
        elif exceeds_depth(args):  # not encoded: json.dumps may not get that deep
            call.raw_arguments = call.arguments = content[call.span[0] : call.span[1]]
            call.error = TOO_DEEP
        else:
            call.raw_arguments = json.dumps(args, ensure_ascii=False)
            call.exact = True
        repairs.extend(fixes)
        if _cut_parameter(content, call.span, call.format):
            # refused by the policy, which owns length cuts
            call.cut = Notice(NoticeCode.CUT_PARAMETER)
        call.salvaged = True
        call.repairs = [f"salvaged:{call.format}", *fixes]
        repairs.append(f"salvaged:{call.format}")
    return found, repairs


def salvaged_reply(
    content: str, names: list[str], ctx: RequestContext
) -> tuple[CallTools | None, NotAction | None]:
    """The calls ``content`` writes in a model family's own format, completed
    (:func:`salvaged_calls`), with the rest of the text as the thought; else ``None`` and
    why a call was set aside as not the action, if one was."""
    schemas = {t.name: t.parameters for t in ctx.tools}
    prefer = ctx.capabilities.call_format or None
    found = read_salvaged(content, names, limit=READ_LIMIT, schemas=schemas, prefer=prefer)
    if not found.calls:
        return None, found.withheld
    calls, repairs = salvaged_calls(content, found.calls)
    rest = strip_salvaged(content, found.calls)
    return CallTools(
        text=rest or None, thought=reasoning(rest)[2], calls=calls, repairs=repairs
    ), None


def decode_arguments(raw: str) -> tuple[dict[str, Any] | str, Notice | None, list[str]]:
    """Decode a call's argument text: (arguments, error for the model, repairs applied)."""
    text = raw.strip()
    if not text:
        return {}, None, ["empty_arguments"]
    try:
        value = json.loads(text)
        repairs: list[str] = []
    except RecursionError:
        return raw, TOO_DEEP, []
    except ValueError:
        try:
            # Sloppy but complete JSON is repaired; cut-off JSON is not, but for closing
            # brackets after a complete value (one completion; refused if cut by length).
            fixed = repair_json(text, allow_truncated=False, close_brackets=True)
        except JSONRepairError as exc:
            return raw, Notice(NoticeCode.INVALID_JSON, detail=str(exc)), []
        value = fixed.value
        repairs = [f"json:{r}" for r in fixed.repairs]
    if exceeds_depth(value):
        return raw, TOO_DEEP, repairs
    if isinstance(value, str):
        # Double-encoded arguments ("{\"a\": 1}") happen with some servers.
        try:
            inner = json.loads(value)
        except RecursionError:
            return raw, TOO_DEEP, repairs
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            if exceeds_depth(inner):
                return raw, TOO_DEEP, repairs
            return inner, None, [*repairs, "double_encoded_arguments"]
    if not isinstance(value, dict):
        return raw, Notice(NoticeCode.NOT_AN_OBJECT, kind=type(value).__name__), repairs
    return value, None, repairs


def native_calls(reply: ModelResponse) -> list[PendingCall]:
    """The reply's native ``tool_calls``, decoded (:func:`decode_arguments`), in order."""
    calls: list[PendingCall] = []
    for raw in reply.tool_calls:
        arguments, error, repairs = decode_arguments(raw.arguments)
        call = PendingCall(raw.id or "", raw.name, arguments, raw.arguments, error, repairs=repairs)
        # valid JSON as written, no repair: sent back byte for byte, never re-encoded
        call.exact = not repairs and error is None and isinstance(arguments, dict)
        calls.append(call)
    return calls


def arguments_json(arguments: dict[str, Any] | str, raw: str, *, exact: bool = False) -> str:
    """The JSON object text of a call's arguments, for native ``tool_calls`` messages:
    ``raw`` as it is when ``exact`` or itself a JSON object, else encoded (text as
    ``{"input": text}``)."""
    if isinstance(arguments, dict):
        return raw if exact else json.dumps(arguments, ensure_ascii=False)
    if json_object(raw) is not None:
        return raw
    return json.dumps({"input": arguments}, ensure_ascii=False)


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` decoded when it is one JSON object, else ``None``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parsed_arguments_error(args: dict[str, Any] | str, repairs: Sequence[str]) -> Notice | None:
    """Why a parsed action must not run, or None: input that starts like JSON but could not
    be decoded must never reach a tool as plain text."""
    if (
        "action_input_not_json" in repairs
        and isinstance(args, str)
        and args.lstrip()[:1] in ("{", "[")
    ):
        return Notice(NoticeCode.NOT_JSON)
    return None


def close_input(call: PendingCall, finish_reason: str | None) -> None:
    """The closing-bracket rule for an Action Input the parser kept as text with brackets
    still open: in a reply not cut by length, brackets open right after a complete value
    have one completion (``json:missing_closing_bracket``); anything else stays refused."""
    text = call.arguments
    if (
        finish_reason == "length"
        or not isinstance(text, str)
        or "action_input_not_json" not in call.repairs
        or "json_blob" in call.repairs  # the blob's whole text, not its arguments
    ):
        return
    try:
        fixed = repair_json(text, allow_truncated=False, close_brackets=True)
    except JSONRepairError:
        return
    if isinstance(fixed.value, dict):
        call.arguments = fixed.value
        kept = [c for c in call.repairs if c != "action_input_not_json"]
        call.repairs = [*kept, *(f"json:{c}" for c in fixed.repairs)]


def guard_depth(call: PendingCall) -> None:
    """Refuse arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH`, keeping the raw text
    (which rendering and the trace handle at any depth)."""
    if call.error is None and isinstance(call.arguments, dict) and exceeds_depth(call.arguments):
        call.error = TOO_DEEP
        call.arguments, call.exact = call.raw_arguments, False


def join(*parts: str | None) -> str | None:
    """The non-blank ``parts``, stripped, one paragraph each; ``None`` when none is left."""
    kept = [p.strip() for p in parts if p and p.strip()]
    return "\n\n".join(kept) if kept else None


def reasoning(content: str) -> tuple[str | None, str, str | None]:
    """A reply's text read for its reasoning: ``(think, said, thought)``, ``thought`` both
    joined (reasoning never reaches an answer or a call's arguments)."""
    thinking = read_think(content)
    think, said = thinking.reasoning, thinking.rest
    return think, said, join(think, said)


def render_history(
    ctx: RequestContext,
    owner: object,
    system: str,
    step: Callable[[Step, Any], list[Message]],
    *,
    question: Callable[[str], Message] = UserMessage,
    flag: Callable[[int], Hashable] | None = None,
) -> list[Message]:
    """The history as one protocol's messages: ``system``, each user turn as
    ``question(text)``, each step as ``step(step, flag(i))``, rendered once per run."""
    messages: list[Message] = [SystemMessage(system)]
    for i, item in enumerate(ctx.history):
        if isinstance(item, UserTurn):
            messages.append(question(item.content))
        else:
            key = flag(i) if flag is not None else None
            messages.extend(ctx.once((item, owner), key, functools.partial(step, item, key)))
    return messages


def constraint_style(ctx: RequestContext, *, grammar: bool = False) -> ConstraintStyle | None:
    """The server's constraint style when this request may be constrained, else ``None``;
    with ``grammar``, only a style that takes a grammar."""
    caps = ctx.capabilities
    style = caps.constraint_style if caps.constrained_decoding else None
    # llama.cpp and vLLM (its guided decoding) take a GBNF grammar
    return None if grammar and style not in ("llama.cpp", "vllm") else style


def step_shape(ctx: RequestContext) -> dict[str, Any]:
    """What the next reply may be, as the builders of a step's grammar or schema take it: the
    tools it may call (none: only an answer), an answer at all, a typed answer's JSON Schema."""
    only = ctx.tool_choice if ctx.tool_choice in ctx.tool_names() else None
    final_only = ctx.force_final or ctx.tool_choice == "none"
    return {
        "tools": [
            t.openai_schema() for t in ctx.tools if not final_only and only in (None, t.name)
        ],
        "allow_final": ctx.tool_choice == "auto",
        "answer_schema": ctx.output.schema if ctx.output is not None else None,
    }


def output_instruction(ctx: RequestContext, template: PromptTemplate | None = None) -> str | None:
    """What a prompted protocol tells the model of a typed final answer, ``None`` if untyped."""
    if ctx.output is None:
        return None
    schema = json.dumps(ctx.output.schema, ensure_ascii=False)
    if template is not None and "output_schema" in template.texts:
        return template.fill("output_schema", schema=schema, type_name=ctx.output.name)
    return f"The final answer must be one JSON value valid for this JSON Schema:\n{schema}"
