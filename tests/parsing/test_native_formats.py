"""The model families' own tool-call formats, read the same way under every protocol.

Golden replies per family are in ``test_salvage_golden.py``; here: values typed by the
tool's schema, Qwen3-Coder's layout stripped, chained JSON calls, negatives through an
agent run, the registry's format preference, and a property test that renders random
calls in each family's format and reads back exactly the same calls.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.native_formats import SCHEMAS, decide
from support.repair_table import markdown_table
from support.timing import assert_linear

from react_engine import Agent, ScriptedModel, Tool, ToolAnnotations
from react_engine.parsing import repairs
from react_engine.parsing.salvage import (
    FORMATS,
    _detectors,
    formats,
    read_salvaged,
    register_format,
)
from react_engine.parsing.salvage.readers import CallSink, found_call
from react_engine.transport.capabilities import default_registry


def calls_of(text: str, **kwargs: Any) -> list[tuple[str, Any, str]]:
    found = read_salvaged(text, SCHEMAS, schemas=SCHEMAS, **kwargs).calls
    return [(c.tool, c.arguments, c.format) for c in found]


# --- values written as text are typed by the schema ------------------------------------------


QWEN_SEARCH_5 = (
    "<tool_call>\n<function=search>\n<parameter=query>\n5\n</parameter>\n</function>\n</tool_call>"
)


@pytest.mark.parametrize(
    "text",
    [
        QWEN_SEARCH_5,
        "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>5</arg_value>\n</tool_call>",
        '<minimax:tool_call>\n<invoke name="search">\n<parameter name="query">5</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        "<seed:tool_call>\n<function=search>\n<parameter=query>5</parameter>\n</function>\n"
        "</seed:tool_call>",
    ],
    ids=["qwen_xml", "glm45", "minimax", "seed_oss"],
)
def test_a_number_written_for_a_string_parameter_stays_a_string(text: str) -> None:
    [(name, arguments, _)] = calls_of(text)
    assert (name, arguments) == ("search", {"query": "5"})


@pytest.mark.parametrize(
    ("raw", "schema", "expected"),
    [
        ("5", {"type": "integer"}, 5),
        ("5", {"type": "string"}, "5"),
        ("5", {"type": "number"}, 5),
        ("2.5", {"type": "number"}, 2.5),
        ("2.5", {"type": "integer"}, "2.5"),
        ("five", {"type": "integer"}, "five"),
        ("true", {"type": "boolean"}, True),
        ("true", {"type": "string"}, "true"),
        ("null", {"type": ["integer", "null"]}, None),
        ("7", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 7),
        ('{"a": 1}', {"type": "object"}, {"a": 1}),
        ('{"a": 1}', {"type": "string"}, '{"a": 1}'),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ("[1, 2]", {"type": "object"}, "[1, 2]"),
        ("3", {"enum": [1, 2, 3]}, 3),
        ("3", {"enum": ["3"]}, "3"),
        ("3", {}, "3"),
        ("3", None, 3),
    ],
)
def test_typed_value_follows_the_schema(raw: str, schema: Any, expected: Any) -> None:
    value = formats.typed_value(raw, schema)
    assert value == expected and type(value) is type(expected)


def test_parameters_the_schema_does_not_list_keep_their_text() -> None:
    text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>extra</arg_key>\n<arg_value>7</arg_value>\n</tool_call>"
    assert calls_of(text) == [("get_weather", {"city": "Paris", "extra": "7"}, "glm45")]


def test_qwen3_coder_layout_is_stripped_and_code_indentation_kept() -> None:
    text = (
        "<tool_call>\n    <function=get_weather>\n        <parameter=city>\n        Dallas\n"
        "        </parameter>\n        <parameter=days>\n        3\n        </parameter>\n"
        "    </function>\n</tool_call>"
    )
    assert calls_of(text) == [("get_weather", {"city": "Dallas", "days": 3}, "qwen_xml")]
    code = "<tool_call>\n<function=search>\n<parameter=query>\n    return x\n</parameter>\n</function>\n</tool_call>"
    assert calls_of(code) == [("search", {"query": "    return x"}, "qwen_xml")]


# --- through an agent run -------------------------------------------------------------------


def make_tools(ran: list[tuple[str, dict[str, Any]]]) -> list[Tool]:
    """The tools, read-only (lookups): every call of a reply with several may run."""

    def runner(name: str) -> Any:
        return lambda args: ran.append((name, args)) or "ok"

    lookup = ToolAnnotations(read_only=True)
    return [
        Tool.from_schema(name, schema, runner(name), annotations=lookup)
        for name, schema in SCHEMAS.items()
    ]


GLM_REPLY = (
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
)


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_native_call_runs_under_every_protocol_and_the_trace_names_its_format(
    protocol: str,
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    final = "Final Answer: sunny" if protocol == "text" else "It is sunny."
    agent = Agent(
        "glm-4.6", make_tools(ran), client=ScriptedModel([GLM_REPLY, final]), protocol=protocol
    )
    result = agent.run("Weather in Beijing?")
    assert ran == [("get_weather", {"city": "Beijing", "days": 3})]
    assert "salvaged:glm45" in result.steps[0].repairs
    assert result.answer == "sunny" if protocol == "text" else result.answer == "It is sunny."


CHAINED = [
    '{"name": "get_weather", "arguments": {"city": "Paris"}}; '
    '{"name": "get_time", "arguments": {"tz": "CET"}}',
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    '{"name": "get_time", "arguments": {"tz": "CET"}}',
]


@pytest.mark.parametrize("reply", CHAINED, ids=["semicolon", "newline"])
def test_chained_json_calls_under_text_all_run(reply: str) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel([reply, "Final Answer: done"])
    agent = Agent("some-model", make_tools(ran), client=model, protocol="text")
    agent.run("Weather and time in Paris?")
    assert ran == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]


NEGATIVES = {
    "fenced_example": "The call looks like this:\n```\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n```\n'
    "Tell me the city and I will run it.",
    "fenced_example_glm": "For example:\n```xml\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n</tool_call>\n```\nJust tell me which city.",
    "prose_mentions_json": 'The API returns JSON like {"name": "get_weather", "city": "Paris"} '
    "when you call it.",
    "code_sample": "In Python:\n\n```python\nresp = client.get_weather(city)\nprint(resp)\n```\n",
    "unknown_tool": '<tool_call>\n{"name": "drop_tables", "arguments": {}}\n</tool_call>',
}


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
@pytest.mark.parametrize("reply", list(NEGATIVES.values()), ids=list(NEGATIVES))
def test_negatives_run_no_tool(protocol: str, reply: str) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    final = "Final Answer: ok" if protocol == "text" else "ok"
    model = ScriptedModel([reply, final, final, final, final])
    agent = Agent("some-model", make_tools(ran), client=model, protocol=protocol)
    agent.run("Hello")
    assert ran == []


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_a_call_after_an_invented_observation_does_not_run(protocol: str) -> None:
    reply = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        "Observation: 18°C\n"
        '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'
    )
    ran: list[tuple[str, dict[str, Any]]] = []
    final = "Final Answer: ok" if protocol == "text" else "ok"
    model = ScriptedModel([reply, final])
    Agent("some-model", make_tools(ran), client=model, protocol=protocol).run("Hi")
    assert ran == [("get_weather", {"city": "Paris"})]


# --- the registry knows each family's format ------------------------------------------------


@pytest.mark.parametrize(
    ("model", "call_format"),
    [
        ("glm-4.6", "glm45"),
        ("glm-4-plus", "glm45"),
        ("kimi-k2-instruct", "kimi"),
        ("qwen3-coder-30b", "qwen_xml"),
        ("qwen2.5-coder:7b", "qwen25"),
        ("qwen2.5:7b", "hermes"),
        ("meta-llama/Llama-4-Scout-17B", "llama4"),
        ("llama3.1:8b", "llama"),
        ("mistral-small", "mistral"),
        ("deepseek-v3.1", "deepseek"),
        ("gpt-oss-20b", "harmony"),
        ("internlm2_5-7b-chat", "internlm"),
        ("granite3.1-dense", "granite"),
        ("MiniMax-M2", "minimax"),
        ("Seed-OSS-36B-Instruct", "seed_oss"),
        ("functionary-small-v3.2", "functionary"),
        ("jamba-1.5-mini", "jamba"),
        ("some-unknown-model", ""),
    ],
)
def test_the_registry_names_each_familys_format(model: str, call_format: str) -> None:
    caps, _ = default_registry().lookup(model)
    assert caps.call_format == call_format


def test_the_preferred_recogniser_is_asked_first() -> None:
    text = GLM_REPLY + ' {"x": 1} [TOOL_CALLS]'
    assert _detectors(text, None)[0] is formats.glm45  # the fixed order: tags before bare JSON
    assert _detectors(text, "mistral")[0].__name__ == "_mistral"
    assert _detectors(text, "json")[0].__name__ == "_json"


@pytest.fixture
def restored_formats(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(repairs, "REPAIRS", dict(repairs.REPAIRS))
    saved = dict(FORMATS)
    yield
    FORMATS.clear()
    FORMATS.update(saved)


def read_act(text: str, names: frozenset[str], out: CallSink) -> None:
    """``<act NAME>key=value</act>``: one argument, written as text."""
    start = text.find("<act ")
    while start != -1:
        head_end = text.find(">", start)
        end = text.find("</act>", head_end)
        stop = end + len("</act>") if end != -1 else len(text)
        key, _, value = text[head_end + 1 : end if end != -1 else len(text)].partition("=")
        if text[start + 5 : head_end] in names:
            out.append(found_call(text[start + 5 : head_end], {key: value}, "act", (start, stop)))
        start = text.find("<act ", stop)


def test_one_registration_fills_every_table(restored_formats: Any) -> None:
    assert "salvaged:act" not in repairs.REPAIRS
    register_format(
        "act",
        read_act,
        what="an <act> tag",
        markers=("<act ",),
        prefer=("act-family",),
        closes=("<act ", "</act>"),
        values=("=", ("</act>",)),
    )
    reply = "Checking. <act get_weather>days=3</act> Would you like to know more?"
    assert calls_of(reply) == [("get_weather", {"days": 3}, "act")]  # typed: values=
    assert not repairs.is_lossy("salvaged:act") and "an <act> tag" in markdown_table()
    decision = decide("function_calling", reply)
    assert decision.repairs == ["salvaged:act"]  # type: ignore[union-attr]
    assert decide("text", reply).repairs == ["salvaged:act"]  # type: ignore[union-attr]
    assert _detectors(reply + " {}", "act-family")[0] is read_act  # the preferred first
    assert calls_of("For example: <act get_weather>days=3</act>") == []  # the placement's cues
    unclosed = read_salvaged("Checking. <act get_weather>days=3", SCHEMAS)
    assert unclosed.calls and unclosed.calls[0].cut is not None  # closes=: refused


def test_a_reply_without_markers_asks_no_recogniser() -> None:
    assert _detectors("It is sunny in Paris today.", None) == []


# --- property: render random calls in each family's format, read them back ------------------

SAFE_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="<>|`\r\x00"),
    max_size=12,
)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in {"all", "functions", "function"}
)
KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda k: not keyword.iskeyword(k)
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | SAFE_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=8,
)
JSON_ARGS = st.dictionaries(KEYS, JSON_VALUES, max_size=4)


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _obj(name: str, args: dict[str, Any], key: str = "arguments") -> str:
    return _j({"name": name, key: args})


K_SB, K_SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
K_B, K_A, K_E = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
DS_B, DS_E, DC_B, DC_E, SEP = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
)

JSON_FAMILIES: dict[str, Any] = {
    "hermes": lambda calls: "\n".join(f"<tool_call>\n{_obj(n, a)}\n</tool_call>" for n, a in calls),
    "kimi": lambda calls: (
        K_SB
        + "".join(f"{K_B}functions.{n}:{i}{K_A}{_j(a)}{K_E}" for i, (n, a) in enumerate(calls))
        + K_SE
    ),
    "mistral": lambda calls: "".join(f"[TOOL_CALLS]{n}[ARGS]{_j(a)}" for n, a in calls),
    "mistral_no_args": lambda calls: "".join(f"[TOOL_CALLS]{n}{_j(a)}" for n, a in calls),
    "mistral_list": lambda calls: (
        "[TOOL_CALLS]" + _j([{"name": n, "arguments": a} for n, a in calls])
    ),
    "internlm": lambda calls: "".join(
        f"<|action_start|><|plugin|>\n{_obj(n, a, 'parameters')}<|action_end|>" for n, a in calls
    ),
    "qwen25": lambda calls: "<tools>\n" + "\n".join(_obj(n, a) for n, a in calls) + "\n</tools>",
    "granite": lambda calls: "<|tool_call|>" + _j([{"name": n, "arguments": a} for n, a in calls]),
    "jamba": lambda calls: (
        "<tool_calls>" + _j([{"name": n, "arguments": a} for n, a in calls]) + "</tool_calls>"
    ),
    "harmony": lambda calls: "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json"
        f"<|message|>{_j(a)}<|call|>"
        for n, a in calls
    ),
    "functionary": lambda calls: "".join(f">>>{n}\n{_j(a)}" for n, a in calls),
    "deepseek": lambda calls: (
        DS_B
        + "".join(f"{DC_B}function{SEP}{n}\n```json\n{_j(a)}\n```{DC_E}" for n, a in calls)
        + DS_E
    ),
    "deepseek_v31": lambda calls: (
        DS_B + "".join(f"{DC_B}{n}{SEP}{_j(a)}{DC_E}" for n, a in calls) + DS_E
    ),
    "xlam": lambda calls: _j([{"name": n, "arguments": a} for n, a in calls]),
    "llama": lambda calls: "<|python_tag|>" + "; ".join(_obj(n, a, "parameters") for n, a in calls),
    "json_lines": lambda calls: "Let me check.\n" + "\n".join(_obj(n, a) for n, a in calls),
    "llama4": lambda calls: (
        "<|python_start|>["
        + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls)
        + "]<|python_end|>"
    ),
}


def _distinct(calls: list[tuple[str, dict[str, Any]]]) -> bool:
    return len(calls) > 0


CALLS = st.lists(st.tuples(NAMES, JSON_ARGS), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(JSON_FAMILIES)), calls=CALLS, data=st.data())
def test_random_json_calls_round_trip_in_every_family(
    family: str, calls: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    text = JSON_FAMILIES[family](calls)
    names = {n for n, _ in calls}
    prefer = data.draw(st.sampled_from([None, family]))
    found = read_salvaged(text, names, prefer=prefer).calls
    assert [(c.tool, c.arguments) for c in found] == calls, text


# Formats that write values as text: a value's type comes from the schema.
TEXT_PARAMS = st.dictionaries(
    KEYS,
    st.one_of(
        st.tuples(st.just("string"), SAFE_TEXT.filter(lambda s: s == s.strip("\n\t "))),
        st.tuples(st.just("integer"), st.integers(-(10**9), 10**9)),
        st.tuples(st.just("boolean"), st.booleans()),
        st.tuples(st.just("object"), st.dictionaries(KEYS, JSON_VALUES, max_size=3)),
        st.tuples(st.just("array"), st.lists(JSON_VALUES, max_size=3)),
    ),
    max_size=4,
)


def _text(kind: str, value: Any) -> str:
    return value if kind == "string" else _j(value)


TEXT_FAMILIES: dict[str, Any] = {
    "glm45": lambda calls: "".join(
        f"<tool_call>{n}\n"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{_text(*v)}</arg_value>\n" for k, v in p.items()
        )
        + "</tool_call>"
        for n, p in calls
    ),
    "qwen_xml": lambda calls: "\n".join(
        f"<tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>\n{_text(*v)}\n</parameter>\n" for k, v in p.items())
        + "</function>\n</tool_call>"
        for n, p in calls
    ),
    "minimax": lambda calls: (
        "<minimax:tool_call>\n"
        + "".join(
            f'<invoke name="{n}">\n'
            + "".join(f'<parameter name="{k}">{_text(*v)}</parameter>\n' for k, v in p.items())
            + "</invoke>\n"
            for n, p in calls
        )
        + "</minimax:tool_call>"
    ),
    "seed_oss": lambda calls: "".join(
        f"<seed:tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>{_text(*v)}</parameter>\n" for k, v in p.items())
        + "</function>\n</seed:tool_call>"
        for n, p in calls
    ),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(sorted(TEXT_FAMILIES)),
    calls=st.lists(st.tuples(NAMES, TEXT_PARAMS), min_size=1, max_size=3),
)
def test_random_text_valued_calls_round_trip_typed_by_the_schema(
    family: str, calls: list[tuple[str, dict[str, tuple[str, Any]]]]
) -> None:
    schemas: dict[str, dict[str, Any]] = {}
    for name, params in calls:
        properties = schemas.setdefault(name, {"type": "object", "properties": {}})["properties"]
        for key, (kind, _) in params.items():
            properties.setdefault(key, {"type": kind})
    # a name called twice with different types for one key keeps the first type: skip those
    for name, params in calls:
        for key, (kind, _) in params.items():
            if schemas[name]["properties"][key]["type"] != kind:
                return
    text = TEXT_FAMILIES[family](calls)
    found = read_salvaged(text, set(schemas), schemas=schemas).calls
    expected = [(n, {k: v for k, (_, v) in p.items()}) for n, p in calls]
    assert [(c.tool, c.arguments) for c in found] == expected, text


# --- cost -----------------------------------------------------------------------------------


def test_a_megabyte_reply_is_read_in_linear_time() -> None:
    reply = ("Some prose about the weather { and [ brackets ( that is not a call. " * 16_000)[
        :1_000_000
    ]

    def read(size: int) -> Callable[[], object]:
        return lambda: [decide(protocol, reply[:size]) for protocol in ("function_calling", "text")]

    assert_linear(read, len(reply))


def test_a_chain_followed_by_prose_is_read_whole_under_text() -> None:
    reply = (
        '{"name": "get_weather", "arguments": {"city": "Paris"}}; '
        '{"name": "get_time", "arguments": {"tz": "CET"}} and then I will answer.'
    )
    decision = decide("text", reply)
    assert [(c.tool, c.arguments) for c in getattr(decision, "calls", [])] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"tz": "CET"}),
    ]


MEGABYTE = 1_000_000
ADVERSARIAL = {
    "glm-open-tags": "<tool_call>" * (MEGABYTE // 11),
    "glm-open-values": "<tool_call>get_time\n"
    + "<arg_key>a</arg_key><arg_value>" * (MEGABYTE // 31),
    "kimi-tokens": "<|tool_call_begin|>" * (MEGABYTE // 19),
    "kimi-calls-unclosed": "<|tool_call_begin|>get_time:0<|tool_call_argument_begin|>{"
    * (MEGABYTE // 58),
    "internlm-open": "<|action_start|><|plugin|>{" * (MEGABYTE // 27),
    "tools-open": "<tools>{" * (MEGABYTE // 8),
    "tool-calls-open": "<tool_calls>[" * (MEGABYTE // 13),
    "granite-open": "<|tool_call|>[{" * (MEGABYTE // 15),
    "python-start-open": "<|python_start|>[get_time(" * (MEGABYTE // 26),
    "harmony-headers": "to=functions.get_time " * (MEGABYTE // 22),
    "harmony-messages": "to=functions.get_time<|message|>{" * (MEGABYTE // 33),
    "minimax-invokes": '<invoke name="get_time">' * (MEGABYTE // 24),
    "seed-open": "<seed:tool_call><function=get_time>" * (MEGABYTE // 35),
    "functionary-heads": ">>>get_time\n{" * (MEGABYTE // 13),
    "json-lines-open": '{"name": "get_time", "arguments": {\n' * (MEGABYTE // 37),
    "observation-lines": "Observation: x\n" * (MEGABYTE // 15),
    "fences": "```\n<tool_call>\n" * (MEGABYTE // 16),
}


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in ADVERSARIAL.items()])
def test_a_megabyte_of_a_formats_markers_is_linear(text: str) -> None:
    # linear readers take well under a second here; a quadratic one takes tens of seconds
    assert_linear(
        lambda size: lambda: read_salvaged(text[:size], SCHEMAS, schemas=SCHEMAS).calls, len(text)
    )
