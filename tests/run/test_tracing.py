"""OpenTelemetry spans, recorded by the SDK's in-memory exporter.

Span names and their parent/child structure, GenAI attributes, errors on spans, and no
prompt or reply text unless asked for, under both protocols; and a program that does not
use tracing never imports opentelemetry.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from react_engine import (
    Agent,
    ErrorBudgetExhausted,
    ModelRequestError,
    ScriptedModel,
    reply,
    tool_call_reply,
)
from react_engine.testing import MockResponse, ScriptedServer, completion
from react_engine.testing.tools import get_weather

ROOT = Path(__file__).resolve().parents[2]
SECRET_QUESTION = "What is the weather in Paris, says agent 007?"
TEXT_ACTION = (
    'Thought: I need the weather.\nAction: get_weather\nAction Input: {"location": "Paris"}'
)
TEXT_FINAL = "Thought: I know it.\nFinal Answer: Overcast, 14 degrees."


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def script(protocol: str) -> list[Any]:
    if protocol == "function_calling":
        return [tool_call_reply(("get_weather", {"location": "Paris"})), reply("Overcast.")]
    return [TEXT_ACTION, TEXT_FINAL]


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def all_text(spans: tuple[ReadableSpan, ...]) -> str:
    parts = []
    for span in spans:
        parts.append(json.dumps({k: str(v) for k, v in (span.attributes or {}).items()}))
        for event in span.events:
            parts.append(json.dumps({k: str(v) for k, v in (event.attributes or {}).items()}))
    return "\n".join(parts)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_run_is_one_span_with_its_model_and_tool_calls_under_it(
    protocol: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(script(protocol))
    agent = Agent("gpt-x", [get_weather], client=model, protocol=protocol, tracer_provider=provider)
    result = agent.run(SECRET_QUESTION)
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert set(named) == {"invoke_agent", "chat gpt-x", "execute_tool get_weather"}
    (run,) = named["invoke_agent"]
    chats, (tool,) = named["chat gpt-x"], named["execute_tool get_weather"]
    assert len(chats) == 2
    assert run.parent is None
    for child in [*chats, tool]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    attrs = run.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.request.model"] == "gpt-x"
    assert attrs["react_engine.protocol"] == protocol
    assert attrs["react_engine.stop_reason"] == "final_answer"
    assert attrs["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens
    chat = chats[0].attributes or {}
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["react_engine.protocol"] == protocol
    assert chat["gen_ai.response.finish_reasons"] == (
        ("tool_calls",) if protocol == "function_calling" else ("stop",)
    )
    assert "gen_ai.usage.output_tokens" in chat
    tool_attrs = tool.attributes or {}
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "get_weather"
    assert tool_attrs["gen_ai.tool.call.id"] == result.tool_calls[0].id
    assert tool.status.status_code == StatusCode.UNSET
    # the tool ran between the two model calls
    assert chats[0].end_time <= tool.start_time <= tool.end_time <= chats[1].start_time  # type: ignore[operator]
    # no prompt, reply, arguments or result unless asked for
    text = all_text(spans)
    assert "007" not in text and "Overcast" not in text and "Paris" not in text


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_content_is_recorded_only_when_asked(
    protocol: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(script(protocol))
    agent = Agent(
        "m",
        [get_weather],
        client=model,
        protocol=protocol,
        tracer_provider=provider,
        trace_content=True,
    )
    agent.run(SECRET_QUESTION)
    named = by_name(exporter.get_finished_spans())
    first = named["chat m"][0].attributes or {}
    assert "007" in str(first["gen_ai.input.messages"])
    last = named["chat m"][1].attributes or {}
    assert "Overcast" in str(last["gen_ai.output.messages"])
    tool = named["execute_tool get_weather"][0].attributes or {}
    assert "Paris" in str(tool["gen_ai.tool.call.arguments"])
    assert "overcast" in str(tool["gen_ai.tool.call.result"])


@pytest.mark.parametrize(
    "variable", ["REACT_ENGINE_TRACE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"]
)
def test_the_environment_can_ask_for_content(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    monkeypatch.setenv(variable, "1")
    agent = Agent("m", client=ScriptedModel(["Hello."]), tracer_provider=provider)
    agent.run(SECRET_QUESTION)
    assert "007" in all_text(exporter.get_finished_spans())


def test_errors_are_recorded_on_their_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(city: str) -> str:
        """A tool that fails.

        Args:
            city: a city.
        """
        raise RuntimeError("the weather service is down")

    model = ScriptedModel([tool_call_reply(("broken", {"city": "Paris"})), reply("Sorry.")])
    Agent("m", [broken], client=model, protocol="function_calling", tracer_provider=provider).run(
        "q"
    )
    (tool,) = by_name(exporter.get_finished_spans())["execute_tool broken"]
    assert tool.status.status_code == StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "error"
    exporter.clear()

    model = ScriptedModel(default=reply(""))
    agent = Agent(
        "m", client=model, protocol="text", max_consecutive_errors=0, tracer_provider=provider
    )
    with pytest.raises(ErrorBudgetExhausted):
        agent.run("q")
    (run,) = by_name(exporter.get_finished_spans())["invoke_agent"]
    assert run.status.status_code == StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "ErrorBudgetExhausted"
    assert any(e.name == "exception" for e in run.events)
    exporter.clear()

    refused = MockResponse(401, {"error": {"message": "bad key"}})
    with ScriptedServer(refused) as server:
        agent = Agent("m", base_url=server.base_url, api_key="sk-x", tracer_provider=provider)
        with pytest.raises(ModelRequestError):
            agent.run("q")
    named = by_name(exporter.get_finished_spans())
    (chat,) = named["chat m"]
    assert chat.status.status_code == StatusCode.ERROR
    assert named["invoke_agent"][0].status.status_code == StatusCode.ERROR


def test_fallbacks_and_repairs_are_on_the_run_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def no_tools(body: dict[str, Any]) -> Any:
        if "tools" in body:
            return MockResponse(400, {"error": {"message": "tools are not supported"}})
        return completion("Thought: I know.\nFinal Answer：Overcast.")  # a fullwidth colon

    with ScriptedServer(default=no_tools) as server:
        agent = Agent(
            "m", [get_weather], base_url=server.base_url, api_key="sk-x", tracer_provider=provider
        )
        result = agent.run("q")
    assert result.protocol == "text"
    (run,) = by_name(exporter.get_finished_spans())["invoke_agent"]
    fallbacks = [e for e in run.events if e.name == "react_engine.fallback"]
    assert len(fallbacks) == 1 and "text" in str(fallbacks[0].attributes or {})
    assert (run.attributes or {})["react_engine.protocol"] == "text"
    assert "fullwidth_colon" in tuple((run.attributes or {})["react_engine.repairs"])  # type: ignore[arg-type]


async def test_a_streamed_run_is_traced_the_same_way(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(script("text"))
    agent = Agent("m", [get_weather], client=model, protocol="text", tracer_provider=provider)
    kinds = [event.kind async for event in agent.iter("q")]
    assert kinds[-1] == "done"
    named = by_name(exporter.get_finished_spans())
    assert len(named["chat m"]) == 2 and len(named["execute_tool get_weather"]) == 1


def test_a_global_provider_is_used_and_false_turns_tracing_off(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    Agent("m", client=ScriptedModel(["Hi."])).run("q")
    assert [s.name for s in exporter.get_finished_spans()] == ["chat m", "invoke_agent"]
    exporter.clear()
    Agent("m", client=ScriptedModel(["Hi."]), tracer_provider=False).run("q")
    assert exporter.get_finished_spans() == ()


def test_a_program_that_does_not_trace_never_imports_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from react_engine import Agent, ScriptedModel\n"
        "Agent('m', client=ScriptedModel(['Hi.'])).run('q')\n"
        "print([m for m in sys.modules if m.startswith('opentelemetry')])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _everything(spans: tuple[ReadableSpan, ...]) -> str:
    """Every string a span exports: attributes, events and status descriptions."""
    parts = [all_text(spans)]
    for span in spans:
        parts.append(span.status.description or "")
        parts.extend(e.name for e in span.events)
    return "\n".join(parts)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_failing_tool_leaks_nothing_without_content(
    protocol: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(city: str) -> str:
        """A tool whose error message holds secrets.

        Args:
            city: a city.
        """
        raise ValueError("db password=hunter2 for SSN-123-45-6789")

    calls = (
        [tool_call_reply(("broken", {"city": "Paris"})), reply("Sorry.")]
        if protocol == "function_calling"
        else [
            'Thought: t\nAction: broken\nAction Input: {"city": "Paris"}',
            "Thought: t\nFinal Answer: Sorry.",
        ]
    )
    agent = Agent(
        "m",
        [broken],
        client=ScriptedModel(calls),
        protocol=protocol,
        tracer_provider=provider,
        trace_content=False,
    )
    result = agent.run("q")
    assert "hunter2" in (result.steps[0].actions[0].observation or "")  # the model is told
    spans = exporter.get_finished_spans()
    (tool,) = by_name(spans)["execute_tool broken"]
    assert tool.status.status_code == StatusCode.ERROR
    text = _everything(spans)
    assert "hunter2" not in text and "SSN" not in text


def test_a_failed_run_leaks_no_message_without_content(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    secret = "Final Answer: the vault code is 4242"
    model = ScriptedModel([secret, secret], default=reply(""))
    agent = Agent(
        "m",
        client=model,
        protocol="text",
        max_consecutive_errors=0,
        tracer_provider=provider,
        output_type=int,
    )
    with pytest.raises(ErrorBudgetExhausted) as caught:
        agent.run("q")
    assert "4242" in str(caught.value) or "4242" in repr(caught.value.__dict__)
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans)["invoke_agent"]
    assert run.status.status_code == StatusCode.ERROR
    assert run.status.description == "ErrorBudgetExhausted"
    assert "4242" not in _everything(spans)
