"""What every protocol reads and renders the same way, written once: native and salvaged
calls, argument decoding, reasoning, the history as messages, constraint styles and typed
answers. It imports nothing of the seam or the policy, so that both can use it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Final

from ..errors import JSONRepairError
from ..nesting import TOO_DEEP, exceeds_depth
from ..parsing import read_think, repair_json
from ..parsing.salvage import FORMATS
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

if TYPE_CHECKING:
    from ..transport.capabilities import ConstraintStyle
    from .base import RequestContext
    from .prompts import PromptTemplate

__all__ = [
    "CUT_PARAMETER",
    "GRAMMAR_STYLES",
    "answer_schema",
    "constraint_style",
    "decode_arguments",
    "join",
    "native_calls",
    "output_instruction",
    "reasoning",
    "render_history",
    "salvaged_calls",
]


# --- calls ---------------------------------------------------------------------------------


CUT_PARAMETER = Notice(NoticeCode.CUT_PARAMETER)


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
            call.cut = CUT_PARAMETER  # refused by the policy, which owns length cuts
        call.salvaged = True
        call.repairs = [f"salvaged:{call.format}", *fixes]
        repairs.append(f"salvaged:{call.format}")
    return found, repairs


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
        calls.append(
            PendingCall(
                id=raw.id or "",
                tool=raw.name,
                arguments=arguments,
                raw_arguments=raw.arguments,
                error=error,
                repairs=repairs,
                # valid JSON as written, no repair: sent back byte for byte, never re-encoded
                exact=not repairs and error is None and isinstance(arguments, dict),
            )
        )
    return calls


# --- reasoning ------------------------------------------------------------------------------


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


# --- the history ----------------------------------------------------------------------------


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


# --- constrained decoding -----------------------------------------------------------------

GRAMMAR_STYLES: Final = frozenset({"llama.cpp", "vllm"})
"""The constraint styles that take a GBNF grammar (vLLM's guided decoding reads one too)."""


def constraint_style(
    ctx: RequestContext, *, wanted: bool = True, grammar: bool = False
) -> ConstraintStyle | None:
    """The server's constraint style when this request may be constrained, else ``None``;
    with ``grammar``, only a style that takes a grammar."""
    caps = ctx.capabilities
    style = caps.constraint_style if wanted and caps.constrained_decoding else None
    return None if grammar and style not in GRAMMAR_STYLES else style


# --- typed answers ----------------------------------------------------------------------------


def answer_schema(ctx: RequestContext) -> dict[str, Any] | None:
    """The JSON Schema a typed final answer must meet, ``None`` when any text is one."""
    return ctx.output.schema if ctx.output is not None else None


def output_instruction(ctx: RequestContext, template: PromptTemplate | None = None) -> str | None:
    """What a prompted protocol tells the model of a typed final answer, ``None`` if untyped."""
    if ctx.output is None:
        return None
    schema = ctx.output.schema_text()
    if template is not None and template.has("output_schema"):
        return template.fill("output_schema", schema=schema, type_name=ctx.output.name)
    return f"The final answer must be one JSON value valid for this JSON Schema:\n{schema}"
