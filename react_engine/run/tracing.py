"""OpenTelemetry spans for runs, model calls and tool calls (the ``otel`` extra; docs/tracing.md).

A :class:`RunTracer` turns a run's events into spans under the GenAI semantic conventions
(``invoke_agent`` > ``chat {model}``, ``execute_tool {tool}``). ``opentelemetry`` is imported
only when tracing is on.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ..transport.wire import message_dict
from ..types import RunResult
from .config import SAMPLING_SHORTHANDS
from .events import (
    Event,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    RunDone,
    RunFailed,
    RunNotice,
    RunStarted,
    StepDone,
    StoppedLive,
    ToolFinished,
    ToolStarted,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["RunTracer", "run_tracer"]

_TRUE = ("1", "true", "yes", "on")


def run_tracer(provider: Any, content: bool | None) -> RunTracer | None:
    """The run's tracer, or None when tracing is off; ``content`` (``None``: as the
    environment says) puts prompts and replies in the spans."""
    if provider is False:
        return None
    if provider is None:
        api = sys.modules.get("opentelemetry.trace")
        if api is None:  # nobody imported opentelemetry: no provider can be set
            return None
        provider = api.get_tracer_provider()
        if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
            return None
    if content is None:
        names = ("REACT_ENGINE_TRACE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        content = any(os.environ.get(n, "").strip().lower() in _TRUE for n in names)
    # Read, not imported: an import of the package from here would close a cycle.
    version = getattr(sys.modules.get("react_engine"), "__version__", None)
    return RunTracer(provider.get_tracer("react_engine", version), content=content)


class RunTracer:
    def __init__(self, tracer: Tracer, *, content: bool = False) -> None:
        from opentelemetry import context, trace

        self._trace = trace
        self._context = context
        self.tracer = tracer
        self.content = content
        self._run: Span | None = None
        self._run_token: object | None = None
        self._chat: dict[int, Span] = {}
        self._tools: dict[int, tuple[Span, object]] = {}
        self._repairs: list[str] = []
        self._lossy: list[str] = []

    def __call__(self, event: Event) -> None:
        match event:
            case RunStarted():
                self._start_run(event)
            case ModelCallStarted():
                self._start_chat(event)
            case ModelCallFinished():
                self._end_chat(event)
            case ModelCallFailed(step=step, error=error) if step in self._chat:
                span = self._chat.pop(step)
                self._fail(span, error)
                span.end()
            case StoppedLive(step=step, stop=stop, completion_tokens=tokens) if step in self._chat:
                self._chat[step].add_event(
                    "react_engine.stopped_live",
                    {"react_engine.stop": stop, "react_engine.completion_tokens": tokens},
                )
            case RunNotice(message=message, source=source) if self._run is not None:
                name = "fallback" if source == "adaptation" else "event"
                self._run.add_event(f"react_engine.{name}", {"react_engine.message": message})
            case ToolStarted():
                self._start_tool(event)
            case ToolFinished():
                self._end_tool(event)
            case StepDone(step=step):
                self._repairs.extend(c for c in step.repairs if c not in self._repairs)
                for action in step.actions:
                    self._lossy.extend(c for c in action.lossy if c not in self._lossy)
            case RunDone(result=result):
                self._end_run(result, None)
            case RunFailed(error=error):
                failed = getattr(error, "result", None)
                self._end_run(failed if isinstance(failed, RunResult) else None, error)

    # --- the run ---------------------------------------------------------------------------

    def _start_run(self, event: RunStarted) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "react-engine",
            "gen_ai.request.model": event.model,
            "react_engine.protocol": event.protocol,
            "react_engine.protocol_reason": event.reason,
        }
        if self.content:
            attributes["react_engine.question"] = event.question
        self._run = self.tracer.start_span(
            "invoke_agent", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        )
        # Current while the run lasts: spans the tools open nest under the run's.
        self._run_token = self._context.attach(self._trace.set_span_in_context(self._run))

    def _end_run(self, result: RunResult[Any] | None, error: BaseException | None) -> None:
        """End the run's span, and first every span still open (a run cancelled mid-request)."""
        for child in [*self._chat.values(), *(span for span, _ in self._tools.values())]:
            child.end()
        self._chat.clear()
        self._tools.clear()
        if self._run_token is not None:
            self._context.detach(self._run_token)  # type: ignore[arg-type]
            self._run_token = None
        if (span := self._run) is None:
            return
        if result is not None:
            span.set_attribute("react_engine.stop_reason", result.stop_reason)
            span.set_attribute("react_engine.protocol", result.protocol)
            span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
            if self.content and result.answer is not None:
                span.set_attribute("react_engine.answer", result.answer)
        span.set_attribute("react_engine.repairs", list(self._repairs))
        if self._lossy:
            span.set_attribute("react_engine.lossy_repairs", list(self._lossy))
        if error is not None:
            self._fail(span, error)
        span.end()
        self._run = None

    # --- model calls -------------------------------------------------------------------------

    def _child(self, name: str, kind: Any, attributes: dict[str, Any]) -> Span:
        """A span under the run's."""
        parent = self._trace.set_span_in_context(self._run) if self._run is not None else None
        return self.tracer.start_span(name, context=parent, kind=kind, attributes=attributes)

    def _start_chat(self, event: ModelCallStarted) -> None:
        request = event.request
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": request.model,
            "react_engine.protocol": event.protocol,
            "react_engine.step": event.step,
        }
        for key in SAMPLING_SHORTHANDS:
            if (value := getattr(request.settings, key)) is not None:
                attributes[f"gen_ai.request.{key}"] = value
        if request.stop:
            attributes["gen_ai.request.stop_sequences"] = list(request.stop)
        if self.content:
            messages = [message_dict(m) for m in request.messages]
            attributes["gen_ai.input.messages"] = json.dumps(messages, ensure_ascii=False)
        client = self._trace.SpanKind.CLIENT
        self._chat[event.step] = self._child(f"chat {request.model}", client, attributes)

    def _end_chat(self, event: ModelCallFinished) -> None:
        if (span := self._chat.pop(event.step, None)) is None:
            return
        reply = event.reply
        span.set_attribute("gen_ai.usage.input_tokens", reply.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", reply.usage.completion_tokens)
        if reply.model:
            span.set_attribute("gen_ai.response.model", reply.model)
        if reply.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
        if self.content:
            output: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.tool_calls:
                output["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
                ]
            span.set_attribute("gen_ai.output.messages", json.dumps([output], ensure_ascii=False))
        span.end()

    # --- tool calls --------------------------------------------------------------------------

    def _start_tool(self, event: ToolStarted) -> None:
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "react_engine.step": event.step,
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = call.raw_arguments
        span = self._child(f"execute_tool {call.tool}", self._trace.SpanKind.INTERNAL, attributes)
        # Current while the tool runs (in the tool's own task): its spans nest under it.
        token = self._context.attach(self._trace.set_span_in_context(span))
        self._tools[id(call)] = (span, token)

    def _end_tool(self, event: ToolFinished) -> None:
        if (entry := self._tools.pop(id(event.call), None)) is None:
            return
        span, token = entry
        self._context.detach(token)  # type: ignore[arg-type]
        call = event.call
        span.set_attribute("react_engine.tool.status", call.status)
        if self.content:
            span.set_attribute("gen_ai.tool.call.result", call.observation)
        if call.status != "ok":
            span.set_attribute("error.type", call.status)
            # The error's text may quote the tool's data: content, kept out unless wanted.
            detail = (call.error.text() if call.error else "") if self.content else call.status
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, detail))
        span.end()

    def _fail(self, span: Span, error: BaseException) -> None:
        kind = type(error).__qualname__
        span.set_attribute("error.type", kind)
        if self.content:
            span.record_exception(error)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)[:300]))
            return
        # An error's message may quote content: only its type goes in.
        span.add_event("exception", {"exception.type": kind})
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, kind))
