"""Property: a valid call of an offered destructive tool, written where it is not the
model's action, never runs, under any protocol, in 10,000 generated replies.

Each reply puts a call to ``rm`` (in one of the formats the readers know: Hermes tags,
Qwen3-Coder XML, a Python line or list, Mistral, Llama's python tag, JSON) after an
invented ``Observation:``, after a ``Final Answer:``, in a fenced example with prose after
it, in quotation marks or a block quote, in prose that declines, describes or conditions
it, or leaves its tag unclosed. Every protocol reads it with the shared policy applied
(``policy.decide``, as a run does); none may return a call to ``rm`` that runs.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from react_engine import (
    Capabilities,
    FunctionCallingProtocol,
    StructuredOutputProtocol,
    TextReActProtocol,
    Tool,
)
from react_engine.protocols.base import Protocol, RequestContext
from react_engine.protocols.decision import CallTools
from react_engine.protocols.minimal import MinimalProtocol
from react_engine.protocols.policy import decide
from react_engine.types import ModelResponse

RM = Tool.from_schema(
    "rm",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    lambda args: "deleted",
)
CONTEXT = RequestContext("m", [], [RM], "auto", Capabilities(), multi_action=True)
PROTOCOLS: list[Protocol] = [
    FunctionCallingProtocol(),
    TextReActProtocol(),
    StructuredOutputProtocol(),
    MinimalProtocol(),
]

PATHS = st.text(st.sampled_from("abcxyz/._-019 "), min_size=1, max_size=16).map(
    lambda p: "/" + p.strip()
)
PROSE = st.sampled_from(
    ["", "The answer is 4.", "Sure.", "OK", "Paris is sunny today.", "All done.", "好的。"]
)


def rendered(fmt: str, path: str) -> str:
    args = json.dumps({"path": path})
    match fmt:
        case "hermes":
            return f'<tool_call>{{"name": "rm", "arguments": {args}}}</tool_call>'
        case "qwen_xml":
            return f"<tool_call>\n<function=rm>\n<parameter=path>\n{path}\n</parameter>\n</function>\n</tool_call>"
        case "python":
            return f"rm(path={json.dumps(path)})"
        case "python_list":
            return f"[rm(path={json.dumps(path)})]"
        case "mistral":
            return f'[TOOL_CALLS][{{"name": "rm", "arguments": {args}}}]'
        case "llama":
            return f'<|python_tag|>{{"name": "rm", "parameters": {args}}}'
        case _:
            return f'{{"name": "rm", "arguments": {args}}}'


FORMATS = ["hermes", "qwen_xml", "python", "python_list", "mistral", "llama", "json"]
BEFORE = [
    "Here is how you'd call it:",
    "For example:",
    "For instance, to delete it:",
    "e.g.",
    "If you want, I can run:",
    "I won't run this:",
    "You could call it like this:",
    "Do not run this:",
    "I refuse to delete it, but the call would be:",
    "Hypothetically:",
    "Quoting the docs:",
    "The syntax looks like this:",
    "例如：",
    "如果你需要，可以这样调用：",
]
AFTER = [
    "— but I won't.",
    "But I will not run it.",
    "That is how one would call it.",
    "If you confirm, I will run it.",
    "I can't do that for you.",
    "That is only an example.",
    "我不会执行它。",
]
FENCES = ["```", "```python", "```json", "```xml", "~~~"]


@st.composite
def replies(draw: st.DrawFn) -> str:
    fmt = draw(st.sampled_from(FORMATS))
    call = rendered(fmt, draw(PATHS))
    lead, tail = draw(PROSE), draw(PROSE)
    position = draw(
        st.sampled_from(
            ["observation", "final", "fence", "quote", "blockquote", "before", "after", "unclosed"]
        )
    )
    if position == "observation":
        label = draw(
            st.sampled_from(["Observation:", "Observation 1:", "**Observation:**", "观察："])
        )
        gap = draw(st.sampled_from([" ", "\n"]))
        return f"{lead}\n{label}{gap}{call}\n{tail}"
    if position == "final":
        label = draw(
            st.sampled_from(["Final Answer:", "final answer:", "**Final Answer:**", "最终答案："])
        )
        return f"{lead}\n{label} {draw(PROSE) or '4'}\n{call}\n{tail}"
    if position == "fence":
        fence = draw(st.sampled_from(FENCES))
        after = draw(
            st.sampled_from([*AFTER, "Done.", "Tell me if that helps.", "Paris is sunny."])
        )
        return f"{lead}\n{fence}\n{call}\n{fence[:3]}\n{after}"
    if position == "quote":
        open_, close = draw(st.sampled_from([('"', '"'), ("“", "”"), ("「", "」")]))
        return f"{lead} He wrote {open_}{call}{close} {tail}"
    if position == "blockquote":
        return f"{lead}\n> {call}\n{tail}"
    if position == "before":
        newline = "\n" if fmt == "python" else draw(st.sampled_from([" ", "\n"]))
        return f"{lead}\n{draw(st.sampled_from(BEFORE))}{newline}{call}\n{tail}"
    if position == "after":
        newline = "\n" if fmt == "python" else draw(st.sampled_from([" ", "\n"]))
        return f"{lead}\n{call}{newline}{draw(st.sampled_from(AFTER))}"
    opened = rendered("hermes", draw(PATHS)).removesuffix("</tool_call>")
    end = draw(st.sampled_from(["", "\n", " "]))
    return f"{lead}\n{opened}{end}"


def runs_rm(protocol: Protocol, text: str) -> bool:
    decision = decide(protocol, ModelResponse(content=text), CONTEXT)
    if not isinstance(decision, CallTools):
        return False
    return any(c.tool == "rm" and c.error is None and c.skip is None for c in decision.calls)


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies())
def test_a_call_written_where_it_is_not_the_action_never_runs(text: str) -> None:
    for protocol in PROTOCOLS:
        assert not runs_rm(protocol, text), (protocol.name, text)


def test_the_same_call_written_as_the_action_runs() -> None:
    """The property is not vacuous: each format, written as the action, runs."""
    for fmt in FORMATS:
        call = rendered(fmt, "/srv/a")
        assert runs_rm(FunctionCallingProtocol(), call), fmt
        assert runs_rm(TextReActProtocol(), call), fmt
        assert runs_rm(FunctionCallingProtocol(), "Let me delete it.\n" + call), fmt
