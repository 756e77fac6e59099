"""A toy protocol in one file, for the test that a new protocol needs nothing else.

The model is asked to reply with one line: ``CALL <tool> <json arguments>`` or
``ANSWER <text>``. Tool results come back as ``RESULT <tool>: <observation>`` user
messages. It is deliberately naive: no repairs, no templates, no constraints.
"""

from __future__ import annotations

import json

from react_engine.protocols.base import Protocol, RequestContext
from react_engine.protocols.decision import CallTools, Decision, FinalAnswer, FormatError
from react_engine.types import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    PendingCall,
    Step,
    SystemMessage,
    UserMessage,
    UserTurn,
)


class ToyProtocol(Protocol):
    name = "toy"

    def render(self, ctx: RequestContext) -> list[Message]:
        tools = "\n".join(f"- {t.name}: {t.description}" for t in ctx.tools)
        out: list[Message] = [
            SystemMessage(
                "Reply with one line: CALL <tool> <json arguments>, or ANSWER <text>.\n"
                f"Tools:\n{tools}"
            )
        ]
        for item in ctx.history:
            if isinstance(item, UserTurn):
                out.append(UserMessage(item.content))
            elif isinstance(item, Step):
                out.append(AssistantMessage(item.text or ""))
                if item.feedback:
                    out.append(UserMessage(item.feedback))
                for action in item.actions:
                    out.append(UserMessage(f"RESULT {action.tool}: {action.observation}"))
        return out

    def build_request(self, ctx: RequestContext) -> ModelRequest:
        return ModelRequest(
            model=ctx.model, messages=tuple(self.render(ctx)), settings=ctx.settings
        )

    def read_reply(self, reply: ModelResponse, ctx: RequestContext) -> Decision:
        text = (reply.content or "").strip()
        head, _, rest = text.partition(" ")
        if head == "ANSWER" and rest:
            return FinalAnswer(text=text, answer=rest)
        if head == "CALL":
            tool, _, raw = rest.partition(" ")
            try:
                arguments = json.loads(raw or "{}")
            except ValueError:
                arguments = None
            if isinstance(arguments, dict):
                call = PendingCall(id=None, tool=tool, arguments=arguments, raw_arguments=raw)
                return CallTools(text=text, calls=[call])
        return FormatError(text=text, feedback="Reply with CALL <tool> <json> or ANSWER <text>.")
