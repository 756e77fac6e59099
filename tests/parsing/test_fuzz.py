"""Property-based fuzzing of what sits between the model and the tools.

* ``Tool.validate`` on arbitrary JSON values and strings: a validated model or a
  :class:`ToolArgumentsError` written for the model, never anything else;
* ``render_observation`` on arbitrary values (nested, huge, circular, unprintable): always
  a string, valid UTF-8, within the length limit;
* both protocols' ``decide`` on arbitrary replies: never raises, and returns exactly one
  of calls, a final answer or a format error, with unique call ids and ``tool_choice`` kept;
* a megabyte of adversarial text through the whole agent (text protocol): a result or our
  own typed error.

(The parser and JSON repair are fuzzed in ``test_properties.py``.) Example counts
come from :mod:`support.fuzzing`: short by default, long under ``make fuzz``.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import json
import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from support.fuzzing import HEAVY, PROFILE

from react_engine import (
    Agent,
    CallTools,
    Capabilities,
    Decision,
    FinalAnswer,
    FormatError,
    FunctionCallingProtocol,
    ModelResponse,
    ReactEngineError,
    RequestContext,
    RunAborted,
    ScriptedModel,
    TextReActProtocol,
    Tool,
    tool,
)
from react_engine.protocols.base import Protocol
from react_engine.protocols.policy import decide
from react_engine.run.observations import render_observation, serialize_result
from react_engine.text import valid_unicode
from react_engine.tools import ToolArgumentsError
from react_engine.types import ToolCall, Usage
from react_engine.wording import Notice

pytestmark = pytest.mark.slow  # property-based fuzzing (hypothesis)

# --- strategies ---------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


# --- tools under test ------------------------------------------------------------------------------


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


@tool
def kitchen_sink(
    name: str,
    count: Annotated[int, Field(ge=0, le=100)],
    ratio: float = 0.5,
    tags: list[str] | None = None,
    flags: dict[str, bool] | None = None,
    mode: Literal["fast", "slow"] = "fast",
    unit: Unit = Unit.C,
    address: Address | None = None,
) -> str:
    """Every kind of argument.

    Args:
        name: a name.
        count: how many.
        ratio: a ratio.
        tags: labels.
        flags: switches.
        mode: how.
        unit: temperature unit.
        address: where.
    """
    return name


@tool
def one_arg(query: str) -> str:
    """Search.

    Args:
        query: what to look for.
    """
    return query


@tool
def no_args() -> str:
    """Nothing to pass."""
    return "ok"


VALIDATED_TOOLS = [kitchen_sink, one_arg, no_args]
FIELDS = sorted({name for t in VALIDATED_TOOLS for name in t.argument_names})

argument_dicts = st.dictionaries(
    st.sampled_from(FIELDS) | st.text(max_size=10), json_values, max_size=6
)
valid_kitchen_sink = st.fixed_dictionaries(
    {"name": st.text(), "count": st.integers(0, 100)},
    optional={
        "ratio": st.floats(allow_nan=False, allow_infinity=False),
        "tags": st.lists(st.text(), max_size=4) | st.none(),
        "flags": st.dictionaries(st.text(), st.booleans(), max_size=4) | st.none(),
        "mode": st.sampled_from(["fast", "slow"]),
        "unit": st.sampled_from(["celsius", "fahrenheit"]),
        "address": st.none()
        | st.fixed_dictionaries(
            {"street": st.text(), "zip": st.from_regex(r"\A\d{5}\Z", fullmatch=True)}
        ),
    },
)


def _check_validation(t: Tool, arguments: dict[str, Any] | str) -> None:
    try:
        validated = t.check(arguments)
    except ToolArgumentsError as exc:
        assert repr(t.name) in exc.notice.text()
        return
    assert isinstance(validated, t.args_model)
    # What the agent does with a validated call: dump it for the trace, then call the tool.
    json.dumps(validated.model_dump(mode="json"))
    assert set(validated.model_fields_set) <= set(t.argument_names)


@settings(PROFILE)
@given(t=st.sampled_from(VALIDATED_TOOLS), arguments=argument_dicts)
@example(t=kitchen_sink, arguments={"name": "x", "count": 10**400})
@example(t=kitchen_sink, arguments={"name": "x", "count": 1, "ratio": 1e400})
@example(t=kitchen_sink, arguments={"name": "\ud800", "count": "7"})
def test_validate_any_json_object(t: Tool, arguments: dict[str, Any]) -> None:
    _check_validation(t, arguments)


@settings(PROFILE)
@given(t=st.sampled_from(VALIDATED_TOOLS), arguments=st.text())
@example(t=one_arg, arguments="   ")
@example(t=no_args, arguments="")
def test_validate_any_string(t: Tool, arguments: str) -> None:
    _check_validation(t, arguments)


@settings(PROFILE)
@given(t=st.sampled_from(VALIDATED_TOOLS), arguments=json_values)
def test_validate_any_json_value_as_decoded_arguments(t: Tool, arguments: Any) -> None:
    """What the protocols hand over: a decoded object, or the model's text for anything else."""
    _check_validation(t, arguments if isinstance(arguments, dict) else json.dumps(arguments))


@settings(PROFILE)
@given(arguments=valid_kitchen_sink)
def test_valid_arguments_always_validate_and_round_trip(arguments: dict[str, Any]) -> None:
    validated = kitchen_sink.check(arguments)
    dumped = validated.model_dump(mode="json", exclude_unset=True)
    assert dumped == arguments
    assert kitchen_sink.check(dumped) == validated


# --- the observation renderer ----------------------------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class Opaque:
    """An object json cannot serialise; it renders through ``str``."""

    def __str__(self) -> str:
        return "<opaque>"


@dataclasses.dataclass
class Row:
    id: int
    label: str


class Rec(BaseModel):
    id: int
    tags: list[str]


odd_scalars = (
    json_scalars
    | st.floats()  # NaN and infinities too
    | st.binary(max_size=50)
    | st.complex_numbers(allow_nan=True)
    | st.decimals(allow_nan=True)
    | st.datetimes(timezones=st.just(UTC))
    | st.sampled_from(list(Unit))
    | st.builds(Unprintable)
    | st.builds(Opaque)
    | st.builds(Row, st.integers(), st.text())
    | st.builds(Rec, id=st.integers(), tags=st.lists(st.text(), max_size=3))
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
)
hashable = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
odd_values = st.recursive(
    odd_scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.frozensets(hashable, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=5)
        | st.dictionaries(st.tuples(st.integers(), st.integers()), inner, max_size=3)
        | st.dictionaries(st.integers() | st.none() | st.booleans(), inner, max_size=3)
    ),
    max_leaves=15,
)
limits = st.none() | st.integers(min_value=-5, max_value=5000)


def _marker_len(full: str) -> int:
    return len(f"\n…[truncated {len(full)} of {len(full)} characters]…\n")


def _check_rendered(value: Any, limit: int | None) -> str:
    out = render_observation(value, limit=limit)
    assert isinstance(out, str)
    out.encode("utf-8")  # sendable, and writable to a trace
    full = valid_unicode(serialize_result(value))
    if limit is None or limit <= 0 or len(full) <= limit:
        assert out == full
    else:
        assert "characters]…" in out and f"of {len(full)} characters" in out
        assert len(out) <= max(limit, _marker_len(full))
    assert render_observation(value, limit=limit) == out  # deterministic
    return out


@settings(PROFILE)
@given(value=odd_values, limit=limits)
def test_render_any_value(value: Any, limit: int | None) -> None:
    _check_rendered(value, limit)


@settings(PROFILE)
@given(value=json_values, limit=st.none())
def test_render_json_values_as_compact_json(value: Any, limit: None) -> None:
    out = _check_rendered(value, limit)
    if isinstance(value, str):
        assert out == valid_unicode(value)
    else:
        assert json.loads(out) == value


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _circular_list() -> list[Any]:
    a: list[Any] = [1]
    a.append(a)
    return a


def _circular_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"k": 1}
    d["self"] = d
    return d


HOSTILE_VALUES = {
    "deep_100k": _deep(100_000),
    "circular_list": _circular_list(),
    "circular_dict": _circular_dict(),
    "huge_int": 10**5000,
    "one_mb_string": "x" * 1_000_000,
    "one_mb_list": list(range(200_000)),
    "unprintable": Unprintable(),
    "unprintable_in_a_dict": {"a": Unprintable()},
    "surrogates": "caf\udce9 \ud83d",
    "nan_and_inf": [math.nan, math.inf, -math.inf],
    "decimal": decimal.Decimal("1e-999999"),
    "naive_datetime": datetime(2024, 1, 1),
    "type_object": object,
    "generator": (i for i in range(3)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
@pytest.mark.parametrize("limit", [None, 0, 1, 50, 4000])
def test_render_hostile_values(name: str, limit: int | None) -> None:
    out = _check_rendered(HOSTILE_VALUES[name], limit)
    if name.startswith("unprintable") and limit is None:
        assert out in ("<unprintable Unprintable object>", "<unprintable dict object>")


def test_render_summarize_returning_a_non_string() -> None:
    out = render_observation([1, 2], limit=None, summarize=lambda rows: {"n": len(rows)})
    assert out == '{"n":2}'


# --- decide of both protocols -------------------------------------------------------------------


@tool
def get_weather(location: str) -> str:
    """Weather.

    Args:
        location: a city.
    """
    return location


@tool
def calculator(expression: str) -> str:
    """Arithmetic.

    Args:
        expression: what to compute.
    """
    return expression


PARSE_TOOLS = [get_weather, calculator, no_args]
TOOL_NAMES = [t.name for t in PARSE_TOOLS]

FRAGMENTS = [
    "Thought: ",
    "Action: ",
    "Action Input: ",
    "Observation: ",
    "Final Answer: ",
    "Question: ",
    "思考：",
    "行动：",
    "行动输入：",
    "观察：",
    "最终答案：",
    "**Action:**",
    "```json\n",
    "```",
    "\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=get_weather>",
    "</function>",
    "<observation>",
    "</observation>",
    "Finish[",
    "get_weather",
    "calculator",
    "no_args",
    "unknown_tool",
    '{"location": "Paris"}',
    '{"action": "get_weather", "action_input": {"location": "Rome"}}',
    '{"name": "calculator", "arguments": {"expression": "1+1"}}',
    'get_weather(location="Oslo")',
    "calculator[2*3]",
]
react_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=30).map("".join)
contents = st.none() | st.text() | react_text

raw_calls = st.builds(
    ToolCall,
    id=st.none() | st.sampled_from(["", "call_1", "call_1", "dup"]) | st.text(max_size=8),
    name=st.sampled_from([*TOOL_NAMES, "", "unknown_tool"]) | st.text(max_size=10),
    arguments=st.text()
    | json_values.map(json.dumps)
    | json_values.map(lambda v: json.dumps(v)[: max(0, len(json.dumps(v)) - 3)])
    | st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(json.dumps),
)
replies = st.builds(
    ModelResponse,
    content=contents,
    tool_calls=st.lists(raw_calls, max_size=4),
    reasoning=st.none() | st.text(max_size=40),
    finish_reason=st.sampled_from([None, "stop", "length", "tool_calls", "content_filter"]),
    usage=st.just(Usage(requests=1)),
)
protocols: st.SearchStrategy[Protocol] = st.sampled_from(
    [
        FunctionCallingProtocol(),
        FunctionCallingProtocol(salvage=False),
        TextReActProtocol(template="classic"),
        TextReActProtocol(template="json"),
        TextReActProtocol(template="zh"),
    ]
)
contexts = st.builds(
    lambda tools, choice, force_final, multi_action: RequestContext(
        model="m",
        history=[],
        tools=tools,
        tool_choice=choice,
        capabilities=Capabilities(),
        force_final=force_final,
        multi_action=multi_action,
    ),
    tools=st.sampled_from([PARSE_TOOLS, [get_weather], []]),
    choice=st.sampled_from(["auto", "auto", "required", "none", "get_weather", "calculator"]),
    force_final=st.booleans(),
    multi_action=st.booleans(),
)


def _check_decision(decision: Decision, reply: ModelResponse, ctx: RequestContext) -> None:
    assert isinstance(decision, CallTools | FinalAnswer | FormatError), decision
    if isinstance(decision, FormatError):
        assert isinstance(decision.feedback, str) and decision.feedback.strip()
    if isinstance(decision, FinalAnswer):
        assert isinstance(decision.answer, str)
    calls = decision.calls if isinstance(decision, CallTools) else []
    assert calls or not isinstance(decision, CallTools)
    ids = [c.id for c in calls]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == len(ids)
    for call in calls:
        assert isinstance(call.tool, str)
        assert isinstance(call.arguments, dict | str)
        assert isinstance(call.raw_arguments, str)
        assert call.error is None or isinstance(call.error, Notice)
    # What must hold whatever the model wrote: no call when none may be made, and only the
    # named tool when one is named (a server may ignore tool_choice; the engine does not).
    if calls:
        assert not ctx.force_final
        assert ctx.tool_choice != "none"
        if ctx.tool_choice in ctx.tool_names():
            assert {c.tool for c in calls} == {ctx.tool_choice}
    if calls and reply.finish_reason == "length":
        last = calls[-1]
        if last.error is None:
            json.loads(last.raw_arguments)  # nothing cut was let through


@settings(PROFILE)
@given(protocol=protocols, reply=replies, ctx=contexts)
def test_decide_never_raises_and_decides_one_thing(
    protocol: Protocol, reply: ModelResponse, ctx: RequestContext
) -> None:
    decision = decide(protocol, reply, ctx)
    _check_decision(decision, reply, ctx)
    if (
        isinstance(protocol, FunctionCallingProtocol)
        and reply.tool_calls
        and not ctx.force_final
        and isinstance(decision, CallTools)
        and not any(c.salvaged for c in decision.calls)
    ):
        # Native calls are all kept, in order, with the provider's ids where usable.
        assert [c.tool for c in decision.calls] == [c.name for c in reply.tool_calls]
        first_ids = [c.id for c in reply.tool_calls if c.id]
        if len(set(first_ids)) == len(first_ids):
            assert [c.id for c in decision.calls if c.id in first_ids] == first_ids


# --- arguments nested deep, arguments cut off -------------------------------------------------------


def _store(data: Any) -> str:
    """Store anything.

    Args:
        data: the value.
    """
    return "stored"


store_tool = Tool.from_function(_store, name="store")
ARG_PROTOCOLS = ["function_calling", "text"]
ARG_FORMS = {
    # how the model wrote the call: (protocol, reply for the arguments text)
    "native": (
        "function_calling",
        lambda tool, args: ModelResponse(
            content=None, tool_calls=[ToolCall("call_1", tool, args)], finish_reason="tool_calls"
        ),
    ),
    "salvaged_action": (
        "function_calling",
        lambda tool, args: ModelResponse(
            content=f"Thought: go\nAction: {tool}\nAction Input: {args}"
        ),
    ),
    "salvaged_hermes": (
        "function_calling",
        lambda tool, args: ModelResponse(
            content=f'<tool_call>{{"name": "{tool}", "arguments": {args}</tool_call>'
        ),
    ),
    "text_action": (
        "text",
        lambda tool, args: ModelResponse(
            content=f"Thought: go\nAction: {tool}\nAction Input: {args}"
        ),
    ),
    "text_blob": (
        "text",
        lambda tool, args: ModelResponse(content=f'{{"action": "{tool}", "action_input": {args}}}'),
    ),
}


def _nested_arguments(kinds: list[bool]) -> str:
    """``{"data": ...}`` with one more level per kind (an object when True, else an array),
    built as text: no recursion, whatever the depth."""
    opens = "".join('{"a": ' if k else "[" for k in kinds)
    closes = "".join("}" if k else "]" for k in reversed(kinds))
    return '{"data": ' + opens + "1" + closes + "}"


@settings(PROFILE)
@given(
    kinds=st.integers(0, 1500).flatmap(lambda n: st.lists(st.booleans(), min_size=n, max_size=n))
    | st.sampled_from([97, 98, 99, 100, 101]).flatmap(
        lambda n: st.lists(st.booleans(), min_size=n, max_size=n)
    ),
    form=st.sampled_from(sorted(ARG_FORMS)),
)
def test_arguments_of_any_depth_run_within_the_limit_and_never_crash(
    kinds: list[bool], form: str
) -> None:
    from react_engine.nesting import MAX_ARGUMENT_DEPTH

    protocol, make = ARG_FORMS[form]
    depth = len(kinds) + 1  # the arguments object itself is level 1
    ran: list[Any] = []

    def store(data: Any) -> str:
        """Store anything.

        Args:
            data: the value.
        """
        ran.append(1)
        return "stored"

    final = "done" if protocol == "function_calling" else "Final Answer: done"
    model = ScriptedModel([make("store", _nested_arguments(kinds))], default=final)
    agent = Agent("m", [Tool.from_function(store)], protocol=protocol, client=model)
    result = agent.run("q")  # never a RecursionError
    actions = [a for step in result.steps for a in step.actions]
    assert len(actions) == 1
    if depth > MAX_ARGUMENT_DEPTH:
        assert actions[0].status == "invalid_arguments" and not ran
    else:
        assert actions[0].status == "ok" and ran == [1]
    for line in result.to_jsonl().splitlines():  # the trace always serialises
        json.loads(line)


argument_objects = st.dictionaries(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    json_values,
    min_size=1,
    max_size=4,
)


@settings(PROFILE)
@given(
    arguments=argument_objects,
    ascii_only=st.booleans(),
    cut=st.floats(0, 1, exclude_max=True),
    form=st.sampled_from(sorted(ARG_FORMS)),
    finish=st.sampled_from(["stop", "tool_calls", "length"]),
)
def test_a_cut_off_argument_object_never_becomes_a_runnable_call(
    arguments: dict[str, Any], ascii_only: bool, cut: float, form: str, finish: str
) -> None:
    """Any strict prefix of a valid arguments object (the model stopped, or was stopped,
    mid-call) is never a call that runs: no call, or one with an error. The one exception
    is the closing-bracket rule: a reply not cut by length whose only missing text is
    closing brackets after a complete value runs with exactly that value, closed."""
    text = json.dumps(arguments, ensure_ascii=ascii_only)
    prefix = text[: 1 + int(cut * (len(text) - 1))]
    protocol_name, make = ARG_FORMS[form]
    reply = make("get_weather", prefix)
    reply.finish_reason = finish
    protocol: Protocol = (
        FunctionCallingProtocol() if protocol_name == "function_calling" else TextReActProtocol()
    )
    ctx = RequestContext(
        model="m",
        history=[],
        tools=[get_weather, store_tool],
        tool_choice="auto",
        capabilities=Capabilities(),
    )
    decision = decide(protocol, reply, ctx)
    _check_decision(decision, reply, ctx)
    for call in decision.calls if isinstance(decision, CallTools) else []:
        if call.error is None:
            assert finish != "length", (prefix, call)
            assert call.arguments == json.loads(_closed(prefix)), (prefix, call)
            assert "json:missing_closing_bracket" in call.repairs, (prefix, call)


def _closed(prefix: str) -> str:
    """``prefix`` with the brackets still open at its end closed (none inside strings)."""
    openers: list[str] = []
    in_string = escaped = False
    for char in prefix:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            openers.append("}" if char == "{" else "]")
        elif char in "}]":
            openers.pop()
    return prefix + "".join(reversed(openers))


# --- usage fields of a reply ---------------------------------------------------------------------------

usage_values = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=12)
    | st.from_regex(r"\A\s*-?\d{1,25}(\.\d*)?(e-?\d{1,4})?\s*\Z")
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
)
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
usage_bodies = st.one_of(
    st.dictionaries(
        st.sampled_from(
            [*USAGE_FIELDS, "prompt_tokens_details", "prompt_cache_hit_tokens", "other"]
        ),
        usage_values | st.dictionaries(st.just("cached_tokens"), usage_values, max_size=1),
        max_size=6,
    ),
    usage_values,
)


@settings(PROFILE)
@given(usages=st.lists(usage_bodies, min_size=1, max_size=4))
@example(usages=[{"prompt_tokens": 10, "completion_tokens": "abc", "total_tokens": 15}])
@example(usages=[{"prompt_tokens": -1000, "completion_tokens": 400, "total_tokens": -600}])
@example(usages=[{"total_tokens": "1e999"}, {"completion_tokens": float("nan")}])
@example(usages=[{"prompt_tokens": "9" * 5000}])
def test_any_usage_fields_give_counts_that_only_grow(usages: list[Any]) -> None:
    """Whatever a server puts in ``usage`` (through the SDK, which keeps what it cannot
    validate): the reply is read, every count is a non-negative int, the total covers its
    parts, and a run's running total never goes down, so a token budget always holds."""
    from openai.types.chat import ChatCompletion

    from react_engine.transport.wire import response_from_sdk

    running = Usage()
    for usage in usages:
        body = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"},
                }
            ],
            "usage": usage,
        }
        reply = response_from_sdk(ChatCompletion.construct(**body))
        assert reply.content == "ok"
        u = reply.usage
        counts = (u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cached_tokens)
        assert all(type(c) is int and c >= 0 for c in counts), u
        assert u.total_tokens >= u.prompt_tokens + u.completion_tokens
        assert u.requests == 1
        assert all(valid_unicode(e.text()) == e.text() for e in reply.events)
        before = dataclasses.replace(running)
        running.add(u)
        assert running.total_tokens >= before.total_tokens
        assert running.prompt_tokens >= before.prompt_tokens
        assert running.completion_tokens >= before.completion_tokens


@settings(PROFILE)
@given(
    parts=st.lists(st.integers(min_value=-(10**6), max_value=10**6), min_size=5, max_size=5).map(
        lambda v: Usage(*v)
    ),
    steps=st.integers(min_value=1, max_value=5),
)
def test_adding_usage_never_lowers_a_count(parts: Usage, steps: int) -> None:
    """A scripted model's (or a custom ChatModel's) negative counts do not lower the sum."""
    total = Usage()
    for _ in range(steps):
        previous = dataclasses.replace(total)
        total.add(parts)
        for name in ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"):
            assert getattr(total, name) >= getattr(previous, name) >= 0


# --- a megabyte of adversarial text through the whole agent ----------------------------------------

MB = 1_000_000


def _fill(unit: str, size: int = MB) -> str:
    return (unit * (size // max(1, len(unit)) + 1))[:size]


ADVERSARIAL = {
    "labels_only": _fill("Action: "),
    "thought_lines": _fill("Thought: hmm\n"),
    "actions_without_input": _fill("Action: get_weather\n"),
    "many_actions": _fill('Action: get_weather\nAction Input: {"location": "Paris"}\n'),
    "open_braces": "Action: get_weather\nAction Input: " + _fill("{"),
    "open_brackets": "Action: get_weather\nAction Input: " + _fill("["),
    "quotes": 'Action: get_weather\nAction Input: {"location": "' + _fill('\\"'),
    "unclosed_fences": _fill("```json\n{"),
    "unclosed_think": "<think>" + _fill("thinking "),
    "think_tags": _fill("<think></think>"),
    "observations": _fill("Observation: \n"),
    "final_answer_of_a_megabyte": "Final Answer: " + _fill("answer "),
    "tool_call_tags": _fill("<tool_call>{"),
    "blob_keys": _fill('{"action": '),
    "nested_blob": "Action:\n" + _fill('{"action": "get_weather", "action_input": '),
    "chinese_labels": _fill("思考：行动：行动输入："),
    "colons_and_spaces": _fill(" : ： \t"),
    "newlines": _fill("\n"),
    "surrogate_and_nul": _fill("\x00\ud800 "),
    "function_tags": _fill("<function=get_weather>"),
    "python_calls": _fill("get_weather(location="),
}


def _through_the_agent(text: str, template: str = "classic") -> None:
    model = ScriptedModel([text], default="Final Answer: done")
    agent = Agent(
        "m",
        [get_weather, calculator],
        protocol=TextReActProtocol(template=template),
        client=model,
        max_consecutive_errors=1,
        max_steps=2,
    )
    try:
        result = agent.run("q")
    except RunAborted as exc:
        assert exc.result.steps
        result = exc.result
    except ReactEngineError:
        return
    assert result.steps
    assert result.steps[0].kind in ("action", "final", "format_error")
    assert result.steps[0].text or result.steps[0].final_answer or result.steps[0].feedback
    records = [json.loads(line) for line in result.to_jsonl().split("\n") if line]
    assert len(records) == len(result.steps) + 2


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_a_megabyte_of_adversarial_text_through_the_agent(name: str) -> None:
    text = ADVERSARIAL[name]
    assert len(text) >= MB
    _through_the_agent(text)


@settings(HEAVY)
@given(
    unit=st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), min_size=1, max_size=8).map(
        "".join
    ),
    template=st.sampled_from(["classic", "json", "zh"]),
)
def test_a_megabyte_of_any_repeated_fragment_through_the_agent(unit: str, template: str) -> None:
    if not unit:
        unit = " "
    _through_the_agent(_fill(unit), template)
