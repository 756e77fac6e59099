"""Property: the ReAct shapes of :mod:`react_engine.parsing.shapes`, damaged, never give a
silent wrong answer under the text protocol.

Each reply writes one intended step (a call of an offered tool with random arguments, or a
final answer) in one shape: unlabelled prose, a JSON action behind a chat prefix, DeepSeek's
tokens, XML tags, a tool name with junk glued on, a Chinese finish, a JSON action inside a
sentence, a wrapped input. It is then damaged (cut short by the server, a bracket or tag
dropped or doubled, name and input swapped, a second conflicting call, junk inserted
between its parts) and read by ``TextReActProtocol`` with the shared policy (``decide``, as a run
does); a plain reply is read twice, so that the reminder rule decides it. Every reading
either is exactly the intended step or refuses: a call runs with the intended tool and
arguments (the second call, if any, is held back or is the one the model wrote), and an
answer is the intended one (cut short only where the reply was cut). ``max_examples`` times
the number of shapes is 20,000 (about 45 s of CPU), in ``make test`` as in ``make fuzz``.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from react_engine import Capabilities, FunctionCallingProtocol, TextReActProtocol, Tool
from react_engine.parsing.shapes import marked
from react_engine.protocols.base import RequestContext
from react_engine.protocols.decision import CallTools, FinalAnswer, FormatError
from react_engine.protocols.policy import decide
from react_engine.types import ModelResponse, Step

SHAPES = ["plain", "prefix", "deepseek", "xml", "junk", "chinese", "prose", "wrapped"]
FINAL = "Final Answer"
NAMES = ["get_weather", "search", "lookup_user", "send_mail", "query_engine_tool", "convert"]
WORDS = st.text(st.sampled_from("abcdefxyz Paris 北京上海 0123456789.,-"), min_size=1, max_size=20)
KEYS = st.sampled_from(["location", "query", "user_id", "to", "input", "amount"])
VALUES = st.one_of(WORDS.map(str.strip).filter(bool), st.integers(-1000, 10**6))
ARGS = st.dictionaries(KEYS, VALUES, min_size=1, max_size=3)
JUNK = ["<|channel|>", "```", "\n", "}", "]", "<action>", "Observation: ok\n", "例如", "e.g. "]
EXAMPLES = 20_000 // len(SHAPES)


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def render(shape: str, step: tuple[str, Any], pick: Callable[[list[Any]], Any]) -> list[str]:
    """The reply as parts: even indexes are structure, odd ones the tool name or input."""
    tool, value = step
    final = tool == FINAL
    blob = json.dumps({"action": tool, "action_input": value}, ensure_ascii=False)
    args = value if final else json.dumps(value, ensure_ascii=False)
    match shape:
        case "prefix":
            return [pick(["AI: ", "Assistant: ", "assistant:"]), blob, ""]
        case "deepseek" if not final:
            outer = pick([True, False])
            sep = "<｜tool▁sep｜>"
            head = "<｜tool▁calls▁begin｜>" if outer else "Let me check."
            if pick([True, False]):  # V3: function<sep>name, then a fenced input
                parts = [head + f"<｜tool▁call▁begin｜>function{sep}", tool, "\n```json\n"]
                parts += [args, "\n```<｜tool▁call▁end｜>"]
            else:  # V3.1: name<sep>input
                parts = [head + "<｜tool▁call▁begin｜>", tool, sep, args, "<｜tool▁call▁end｜>"]
            return [*parts[:-1], parts[-1] + ("<｜tool▁calls▁end｜>" if outer else "")]
        case "xml" | "deepseek":
            if final:
                return ["<thought>I know it.</thought>\n<final_answer>", value, "</final_answer>"]
            a, b = pick([("action", "action_input"), ("tool_name", "parameters")])
            return [f"<{a}>", tool, f"</{a}>\n<{b}>", args, f"</{b}>"]
        case "junk" if not final:
            glue = pick(["<|channel|>commentary", "<|constrain|>json"])
            return ["Thought: I need it.\nAction: ", tool, glue + "\nAction Input: ", args, ""]
        case "wrapped" if not final:
            if pick([True, False]):
                return ["Thought: a tool.\nAction: ", camel(tool), "(", args, ")"]
            pairs = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
            return ["Action: ", tool, "\nAction Input: ToolInput(", pairs, ")"]
        case "prose" | "junk" | "wrapped":
            return [pick(["I will call ", "Now "]), blob, " now."]
        case "chinese":
            if not final:
                return ["思考：需要工具。\n行动：", tool, "\n行动输入：", args, ""]
            label = pick(["最终答案", "最终的答案", "最终回答", "最终答复", "答案"])
            return [f"思考：我知道了。\n{label}：", value, ""]
    return ["", value if final else blob, ""]  # plain: the answer alone


@st.composite
def cases(draw: st.DrawFn, shape: str) -> tuple[str, str, tuple[str, Any], list[str], str]:
    offered = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4, unique=True))
    final = shape == "plain" or draw(st.booleans())
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731
    step: tuple[str, Any] = (
        (FINAL, draw(WORDS).strip() or "ok")
        if final
        else (
            draw(st.sampled_from(offered)),
            draw(ARGS),
        )
    )
    parts = render(shape, step, pick)
    damage = draw(st.sampled_from(["none", "cut", "drop", "double", "swap", "second", "junk"]))
    text = "".join(parts)
    if damage == "cut":
        text = text[: draw(st.integers(1, max(1, len(text) - 1)))]
    elif damage in ("drop", "double"):
        # a bracket of a call, or a whole tag (a bracket beside an answer is its text)
        mark = r"</?\w+>|<｜[^｜]*｜>" + (r"|[{}\[\]<>]" if step[0] != FINAL else "")
        marks = [m.start() for m in re.finditer(mark, text)]
        if marks:
            at = draw(st.sampled_from(marks))
            m = re.compile(r"</?\w+>|<｜[^｜]*｜>|.").match(text, at)
            assert m is not None
            text = text[:at] + (m.group() if damage == "double" else "") + text[at:]
            if damage == "drop":
                text = text[:at] + text[m.end() :]
    elif damage == "swap" and len(parts) >= 4:
        parts[1], parts[3] = parts[3], parts[1]
        text = "".join(parts)
    elif damage == "second" and shape != "plain":
        other = (draw(st.sampled_from(offered)), draw(ARGS))
        text += "\n" + "".join(render(shape, other, pick))
        step = (*step, other)  # type: ignore[assignment]
    elif damage == "junk":
        # between the parts of a call; before an answer only (after its label, it is text)
        structure = [sum(len(p) for p in parts[:i]) for i in range(0, len(parts) + 1, 2)]
        at = draw(st.sampled_from(structure)) if step[0] != FINAL else 0
        text = text[:at] + draw(st.sampled_from(JUNK)) + text[at:]
    # a reply cut short is one the server cut: it says so ("length"), as servers do
    finish = "length" if damage == "cut" else draw(st.sampled_from(["stop", "length"]))
    return text, damage, step, offered, finish


@functools.cache
def tool(name: str, required: tuple[str, ...]) -> Tool:
    """A tool taking any of the keys, ``required`` among them (checked before it runs)."""
    keys = ["location", "query", "user_id", "to", "input", "amount"]
    properties = {k: {"type": ["string", "integer"]} for k in keys}
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return Tool.from_schema(name, schema, lambda args: "ok")


def context(
    offered: list[str], step: tuple[Any, ...], history: list[Step] | None = None
) -> RequestContext:
    tools = [tool(n, tuple(sorted(step[1])) if n == step[0] else ()) for n in offered]
    return RequestContext("m", history or [], tools, "auto", Capabilities())


TEXT = TextReActProtocol()
FC = FunctionCallingProtocol()


def read(
    text: str, finish: str, offered: list[str], step: tuple[Any, ...]
) -> CallTools | FinalAnswer | FormatError:
    """The decision a run takes on ``text``; a plain reply is read again after its reminder."""
    ctx = context(offered, step)
    decision = decide(TEXT, ModelResponse(content=text, finish_reason=finish), ctx)
    if isinstance(decision, FormatError) and decision.plain is not None:
        reminded = Step(0, "format_error", "text", text=text, feedback=decision.feedback)
        again = ModelResponse(content=text, finish_reason=finish)
        decision = decide(TEXT, again, context(offered, step, [reminded]))
    assert isinstance(decision, CallTools | FinalAnswer | FormatError)
    return decision


def check(case: tuple[str, str, tuple[Any, ...], list[str], str], shape: str) -> None:
    text, damage, step, offered, finish = case
    decision = read(text, finish, offered, step)
    event(f"{damage}: {type(decision).__name__}")
    tools = {t.name: t for t in context(offered, step).tools}
    tool, value = step[0], step[1]
    if isinstance(decision, FormatError):
        return  # refused: the model is told
    if isinstance(decision, FinalAnswer):
        answer = decision.answer
        if "unlabeled_answer" in decision.repairs:  # prose, written twice: the reminder rule
            assert answer == text.strip() and not marked(text), (shape, damage, text, answer)
            return
        assert tool == FINAL, (shape, damage, text, answer)
        if shape == "plain":
            assert answer in text, (damage, text, answer)
        elif damage == "cut":
            assert answer and value.startswith(answer), (shape, text, answer)
        else:
            assert answer == value, (shape, damage, text, answer)
        return
    runs = [(c.tool, c.arguments) for c in decision.calls if c.error is None and c.skip is None]
    runs = [(t, a) for t, a in runs if t in offered and valid(tools[t], a)]  # else: refused
    if not runs:
        return
    assert tool != FINAL or damage == "second", (shape, damage, text, runs)
    expected = [(tool, value)] if tool != FINAL else []
    if damage == "second":
        expected.append(step[2])
    assert runs[0] in expected and all(r in expected for r in runs), (shape, damage, text, runs)


def valid(tool: Tool, arguments: Any) -> bool:
    """Whether the run lets the call through its tool's schema."""
    try:
        tool.check(arguments)
    except Exception:
        return False
    return True


def _property(shape: str) -> Any:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(shape))
    def test(case: tuple[str, str, tuple[Any, ...], list[str], str]) -> None:
        check(case, shape)

    test.__name__ = f"test_a_damaged_{shape}_reply_reads_right_or_refuses"
    return test


for _shape in SHAPES:
    globals()[f"test_a_damaged_{_shape}_reply_reads_right_or_refuses"] = _property(_shape)


def test_every_shape_undamaged_reads_right() -> None:
    """The property is not vacuous: each shape, undamaged, is read as the intended step by
    the text protocol, and its calls by function calling too (which reads ReAct text with
    the same parser, given the offered tools' names)."""
    args = {"location": "Paris"}
    offered = ["get_weather", "search"]
    for shape, first in itertools.product(SHAPES, (True, False)):
        pick = (lambda options: options[0]) if first else (lambda options: options[-1])
        call = "".join(render(shape, ("get_weather", args), pick))
        final = "".join(render(shape, (FINAL, "Paris it is"), pick))
        for protocol in (TEXT, FC):
            response = ModelResponse(content=call, finish_reason="stop")
            decision = decide(protocol, response, context(offered, ("get_weather", args)))
            assert isinstance(decision, CallTools), (shape, call, decision)
            assert [(c.tool, c.arguments, c.error) for c in decision.calls] == [
                ("get_weather", args, None)
            ], (protocol.name, shape)
        decision = read(final, "stop", offered, (FINAL, ""))
        assert isinstance(decision, FinalAnswer) and decision.answer == "Paris it is", shape


def test_json_that_lost_a_bracket_is_never_one_parameter() -> None:
    """Found by the property: a DeepSeek call whose JSON lost its ``{`` was read as text
    and the whole text became the tool's one parameter (``location='"location": "0"}'``).
    Text naming a parameter as a quoted key is refused, like an unquoted one."""
    reply = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n"location": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    step = ("get_weather", {"location": "Paris"})
    decision = decide(TEXT, ModelResponse(content=reply), context(["get_weather"], step))
    assert isinstance(decision, CallTools) and decision.calls[0].error is not None
