"""``bfcl-prompt``: the text protocol with BFCL's own Prompt-mode system prompt (read from
the wheel), its reply read as BFCL's decoder does: ``[get_weather(city="Paris"), ...]``.
A call whose arguments are not literals is kept with unreadable arguments, never guessed.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..protocols.base import RequestContext
from ..protocols.decision import CallTools, Decision, FinalAnswer
from ..protocols.text import TextReActProtocol
from ..types import Constraint, ModelResponse, PendingCall
from ..wording import Notice, NoticeCode
from .bfcl_data import PYTHON_HINT, api_name, wheel

__all__ = ["BFCL_PROMPT", "BfclPromptProtocol", "bfcl_system_prompt", "parse_python_calls"]

BFCL_PROMPT = "bfcl-prompt"
"""The name of this protocol in the eval: run with ``--protocol bfcl-prompt``."""


def bfcl_system_prompt(functions: Sequence[Mapping[str, Any]]) -> str:
    """BFCL's default Prompt-mode system prompt for ``functions`` (as the case ships them)."""
    p = wheel("bfcl_eval.constants.default_prompts")
    style = p.PROMPT_STYLE_TEMPLATES["classic"]
    output_format = p.OUTPUT_FORMAT_MAPPING["python"]
    hinted = [
        {**f, "description": str(f.get("description") or "") + PYTHON_HINT} for f in functions
    ]
    tools = style["available_tools"].format(format="json", functions=json.dumps(hinted, indent=4))
    return str(
        p.PROMPT_TEMPLATE_MAPPING["plaintext"].format(
            persona=style["persona"],
            task=style["task"],
            tool_call_format=style["tool_call_no_tag"].format(
                output_format=output_format, param_types=p.PARAM_TYPE_MAPPING["python"]
            ),
            multiturn_behavior=style["multiturn_behavior"],
            available_tools=tools,
        )
    )


class _NotLiteral(ValueError):
    pass


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head is not None else None
    return None


def parse_python_calls(text: str) -> list[tuple[str, dict[str, Any] | str, str | None]] | None:
    """A reply as BFCL's Prompt-mode decoder reads it (brackets optional, fences stripped);
    ``None`` when it is no list of calls. Each call is ``(name, arguments, error)``, the
    arguments being the call's source text when one is not a literal."""
    body = text.strip("`\n ").removeprefix("python\n").strip()
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(tree.body, ast.List):
        return None
    calls: list[tuple[str, dict[str, Any] | str, str | None]] = []
    for node in tree.body.elts:
        if not isinstance(node, ast.Call):
            return None
        name = _dotted(node.func)
        if name is None:
            return None
        source = ast.get_source_segment(body, node) or name
        try:
            if node.args:
                raise _NotLiteral("positional arguments: BFCL's functions take keywords")
            args: dict[str, Any] = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise _NotLiteral("a **mapping argument")
                try:  # through JSON: tuples become lists; sets, bytes, complex: none
                    args[kw.arg] = json.loads(json.dumps(ast.literal_eval(kw.value)))
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    raise _NotLiteral(f"the value of {kw.arg!r} is not a JSON literal") from None
        except _NotLiteral as exc:
            calls.append((name, source, str(exc)))
            continue
        calls.append((name, args, None))
    return calls


class BfclPromptProtocol(TextReActProtocol):
    """The text protocol, prompted and read as BFCL's Prompt mode (see the module)."""

    name = "bfcl-prompt"

    def __init__(self, functions: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(send_stop=False)
        self.functions = tuple(functions)
        self._prompt = bfcl_system_prompt(self.functions)

    def __repr__(self) -> str:
        return f"BfclPromptProtocol({len(self.functions)} functions)"

    def _system(self, ctx: RequestContext) -> str:
        # As BFCL: a case's own system message follows the generated prompt.
        return f"{self._prompt}\n\n{ctx.instructions}" if ctx.instructions else self._prompt

    def _constraint(self, ctx: RequestContext) -> Constraint | None:
        return None  # BFCL's Prompt mode decodes freely

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        raw = (reply.content or "").strip()
        parsed = parse_python_calls(raw) if raw else None
        if not parsed:
            return FinalAnswer(text=raw or None, answer=raw)
        calls = [
            PendingCall(
                id=None,
                tool=api_name(name),
                arguments=args,
                raw_arguments=args if isinstance(args, str) else json.dumps(args),
                error=None
                if error is None
                else Notice(NoticeCode.INVALID_ARGUMENTS, tool=name, detail=error),
            )
            for name, args, error in parsed
        ]
        return CallTools(text=raw, calls=calls)
