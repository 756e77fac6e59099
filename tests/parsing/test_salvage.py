"""Salvaging tool calls that models wrote into their reply text.

Each case is data: the reply as the model family writes it, and the calls expected.
"""

from __future__ import annotations

import itertools
import json
import keyword
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from react_engine.parsing.salvage import read_salvaged, strip_salvaged
from react_engine.parsing.salvage.readers import found_call
from react_engine.types import PendingCall

TOOLS = frozenset({"get_weather", "get_time", "search"})

# DeepSeek's special tokens, spelled with the full-width bar and the "▁" block.
DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
DS_CALL_END = "<｜tool▁call▁end｜>"
DS_SEP = "<｜tool▁sep｜>"


def calls_of(text: str, tools: frozenset[str] = TOOLS) -> list[tuple[str, Any, str]]:
    return [(c.tool, c.arguments, c.format) for c in read_salvaged(text, tools).calls]


# (id, reply text, expected [(name, arguments, format)], expected thought after stripping)
CASES: list[tuple[str, str, list[tuple[str, Any, str]], str]] = [
    (  # a complete call inside a sentence (the placement finds no cue around it)
        "json-in-prose",
        'Result: {"name": "get_time", "parameters": {}} as requested',
        [("get_time", {}, "json")],
        "Result:  as requested",
    ),
    # --- Hermes / Qwen2.5 ---------------------------------------------------------------
    (
        "hermes-one",
        'Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Beijing"}}\n</tool_call>',
        [("get_weather", {"city": "Beijing"}, "hermes")],
        "Let me look that up.",
    ),
    (
        "hermes-two",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Asia/Shanghai"}}\n</tool_call>',
        [
            ("get_weather", {"city": "Beijing"}, "hermes"),
            ("get_time", {"tz": "Asia/Shanghai"}, "hermes"),
        ],
        "",
    ),
    (
        "hermes-unclosed-at-end",
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        [("get_weather", {"city": "Paris"}, "hermes")],
        "Checking.",
    ),
    (
        "hermes-broken-json-keeps-raw-arguments",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris",}}\n</tool_call>',
        [("get_weather", '{"city": "Paris",}', "hermes")],
        "",
    ),
    (
        "hermes-unclosed-arguments-keep-raw",
        '<tool_call>{"name": "search", "arguments": {"query": "react agents"',
        [("search", '{"query": "react agents"', "hermes")],
        "",
    ),
    (
        "hermes-double-encoded-arguments",
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}</tool_call>',
        [("get_weather", {"city": "Oslo"}, "hermes")],
        "",
    ),
    (
        "hermes-parameters-key",
        '<tool_call>{"name": "get_time", "parameters": {"tz": "UTC"}}</tool_call>',
        [("get_time", {"tz": "UTC"}, "hermes")],
        "",
    ),
    (
        "hermes-no-arguments",
        '<tool_call>{"name": "get_time"}</tool_call>',
        [("get_time", {}, "hermes")],
        "",
    ),
    (
        "hermes-fenced-json-inside",
        '<tool_call>\n```json\n{"name": "search", "arguments": {"query": "x"}}\n```\n</tool_call>',
        [("search", {"query": "x"}, "hermes")],
        "",
    ),
    (
        "hermes-list-inside-one-block",
        '<tool_call>[{"name": "get_time", "arguments": {}}, '
        '{"name": "search", "arguments": {"query": "q"}}]</tool_call>',
        [("get_time", {}, "hermes"), ("search", {"query": "q"}, "hermes")],
        "",
    ),
    (
        "hermes-unknown-tool-ignored",
        '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        [("get_time", {}, "hermes")],
        '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
    ),
    (
        "hermes-null-arguments",
        '<tool_call>{"name": "get_time", "arguments": null}</tool_call>',
        [("get_time", {}, "hermes")],
        "",
    ),
    (
        "hermes-non-object-arguments-become-json-text",
        '<tool_call>{"name": "search", "arguments": ["a", 1]}</tool_call>',
        [("search", '["a", 1]', "hermes")],
        "",
    ),
    (
        "hermes-broken-without-arguments",
        '<tool_call>{"name": "get_time", }</tool_call>',
        [("get_time", {}, "hermes")],
        "",
    ),
    (
        "hermes-broken-with-string-arguments",
        '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"a \\\\\\"b\\\\\\"\\"}",}'
        "</tool_call>",
        [("search", {"query": 'a "b"'}, "hermes")],
        "",
    ),
    (
        "hermes-broken-with-unterminated-string-arguments",
        '<tool_call>{"name": "search", "arguments": "{\\"query',
        [("search", '"{\\"query', "hermes")],
        "",
    ),
    (
        "hermes-broken-with-bare-arguments",
        '<tool_call>{"name": "search", "arguments": query=react}</tool_call>',
        [("search", "query=react", "hermes")],
        "",
    ),
    (
        "hermes-stray-tags-tolerated",
        "<tool_call></parameter><function=get_time></function></tool_call>",
        [("get_time", {}, "qwen_xml")],
        "",
    ),
    # --- Qwen3-Coder XML ------------------------------------------------------------------
    (
        "qwen-xml",
        "I'll check the weather.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
        "Beijing\n</parameter>\n</function>\n</tool_call>",
        [("get_weather", {"city": "Beijing"}, "qwen_xml")],
        "I'll check the weather.",
    ),
    (
        "qwen-xml-json-values",
        "<tool_call>\n<function=search>\n<parameter=query>\nreact\n</parameter>\n"
        "<parameter=limit>\n5\n</parameter>\n<parameter=exact>\ntrue\n</parameter>\n"
        '<parameter=sites>\n["a.org", "b.org"]\n</parameter>\n</function>\n</tool_call>',
        [
            (
                "search",
                {"query": "react", "limit": 5, "exact": True, "sites": ["a.org", "b.org"]},
                "qwen_xml",
            )
        ],
        "",
    ),
    (
        "qwen-xml-multiline-value-kept-verbatim",
        "<tool_call>\n<function=search>\n<parameter=query>\n  line one\n  line two\n"
        "</parameter>\n</function>\n</tool_call>",
        [("search", {"query": "  line one\n  line two"}, "qwen_xml")],
        "",
    ),
    (
        "qwen-xml-unclosed-at-end",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo",
        [("get_weather", {"city": "Oslo"}, "qwen_xml")],
        "",
    ),
    (
        "qwen-xml-two-calls",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
        "</function>\n</tool_call>",
        [("get_time", {}, "qwen_xml"), ("get_weather", {"city": "Rome"}, "qwen_xml")],
        "",
    ),
    (
        "qwen-xml-without-tool-call-wrapper",
        "<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n</function>",
        [("get_weather", {"city": "Lima"}, "qwen_xml")],
        "",
    ),
    (
        "qwen-xml-unknown-tool",
        "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n"
        "</tool_call>",
        [],
        "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n"
        "</tool_call>",
    ),
    # --- Llama 3.1 <function=...>{json}</function> ------------------------------------------
    (
        "llama-function-tag",
        'Looking it up. <function=get_weather>{"city": "Austin"}</function>',
        [("get_weather", {"city": "Austin"}, "llama_function")],
        "Looking it up.",
    ),
    # --- DeepSeek ------------------------------------------------------------------------------
    (
        "deepseek-v3",
        f"{DS_CALLS_BEGIN}{DS_CALL_BEGIN}function{DS_SEP}get_weather\n```json\n"
        f'{{"city": "Hangzhou"}}\n```{DS_CALL_END}{DS_CALLS_END}',
        [("get_weather", {"city": "Hangzhou"}, "deepseek")],
        "",
    ),
    (
        "deepseek-v3-two-calls-with-prose",
        f"我来查一下。{DS_CALLS_BEGIN}{DS_CALL_BEGIN}function{DS_SEP}get_weather\n```json\n"
        f'{{"city": "北京"}}\n```{DS_CALL_END}\n{DS_CALL_BEGIN}function{DS_SEP}get_time\n'
        f"```json\n{{}}\n```{DS_CALL_END}{DS_CALLS_END}",
        [("get_weather", {"city": "北京"}, "deepseek"), ("get_time", {}, "deepseek")],
        "我来查一下。",
    ),
    (
        "deepseek-v3.1",
        f'{DS_CALLS_BEGIN}{DS_CALL_BEGIN}get_weather{DS_SEP}{{"city": "Shenzhen"}}'
        f"{DS_CALL_END}{DS_CALLS_END}",
        [("get_weather", {"city": "Shenzhen"}, "deepseek")],
        "",
    ),
    (
        "deepseek-ascii-tokens",
        '<|tool_calls_begin|><|tool_call_begin|>get_time<|tool_sep|>{"tz": "UTC"}'
        "<|tool_call_end|><|tool_calls_end|>",
        [("get_time", {"tz": "UTC"}, "deepseek")],
        "",
    ),
    (
        "deepseek-without-block-tokens-and-unclosed",
        f'Sure. {DS_CALL_BEGIN}get_weather{DS_SEP}{{"city": "Xi\'an"}}',
        [("get_weather", {"city": "Xi'an"}, "deepseek")],
        "Sure.",
    ),
    (
        "deepseek-broken-arguments",
        f"{DS_CALLS_BEGIN}{DS_CALL_BEGIN}function{DS_SEP}search\n```json\n"
        f"{{'query': 'x'}}\n```{DS_CALL_END}{DS_CALLS_END}",
        [("search", "{'query': 'x'}", "deepseek")],
        "",
    ),
    (
        "deepseek-calls-outside-a-block-keep-the-prose-between",
        f"{DS_CALL_BEGIN}get_time{DS_SEP}{{}}{DS_CALL_END} and then "
        f'{DS_CALL_BEGIN}search{DS_SEP}{{"query": "q"}}{DS_CALL_END}',
        [("get_time", {}, "deepseek"), ("search", {"query": "q"}, "deepseek")],
        "and then",
    ),
    # --- Mistral ----------------------------------------------------------------------------------
    (
        "mistral-list",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]',
        [
            ("get_weather", {"city": "Paris"}, "mistral"),
            ("get_time", {"tz": "Europe/Paris"}, "mistral"),
        ],
        "",
    ),
    (
        "mistral-single-object-with-space",
        '[TOOL_CALLS] {"name": "search", "arguments": {"query": "mistral"}}',
        [("search", {"query": "mistral"}, "mistral")],
        "",
    ),
    (
        "mistral-v11-named",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Lyon"}',
        [("get_weather", {"city": "Lyon"}, "mistral")],
        "",
    ),
    (
        "mistral-v13-call-id",
        '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Nice"}'
        '[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}',
        [("get_weather", {"city": "Nice"}, "mistral"), ("get_time", {"tz": "CET"}, "mistral")],
        "",
    ),
    (
        "mistral-broken-object-keeps-others",
        '[TOOL_CALLS][{"name": "search", "arguments": {"query": "a",}}, '
        '{"name": "get_time", "arguments": {}}]',
        [("search", '{"query": "a",}', "mistral"), ("get_time", {}, "mistral")],
        "",
    ),
    (
        "mistral-unclosed-list",
        'Calling: [TOOL_CALLS][{"name": "get_time", "arguments": {}}',
        [("get_time", {}, "mistral")],
        "Calling:",
    ),
    (
        "mistral-named-without-arguments",
        "[TOOL_CALLS]get_time[ARGS]",
        [("get_time", {}, "mistral")],
        "",
    ),
    # --- Llama 3.x ------------------------------------------------------------------------------
    (
        "llama-python-tag-json",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Denver"}}<|eom_id|>',
        [("get_weather", {"city": "Denver"}, "llama")],
        "",
    ),
    (
        "llama-python-tag-chained",
        '<|python_tag|>{"name": "get_time", "parameters": {}}; '
        '{"name": "search", "parameters": {"query": "x"}}',
        [("get_time", {}, "llama"), ("search", {"query": "x"}, "llama")],
        "",
    ),
    (
        "llama-python-tag-python-call",
        '<|python_tag|>search(query="llama 3.1")<|eom_id|>',
        [("search", {"query": "llama 3.1"}, "llama")],
        "",
    ),
    (
        "llama-bare-json-is-the-whole-reply",
        '  {"name": "get_weather", "parameters": {"city": "Boston", "unit": "F"}}\n',
        [("get_weather", {"city": "Boston", "unit": "F"}, "json")],
        "",
    ),
    (
        "bare-json-fenced",
        '```json\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```',
        [("get_time", {"tz": "UTC"}, "json")],
        "",
    ),
    (
        "bare-json-list",
        '[{"name": "get_time", "parameters": {}}, '
        '{"name": "search", "parameters": {"query": "q"}}]',
        [("get_time", {}, "json"), ("search", {"query": "q"}, "json")],
        "",
    ),
    (
        "bare-json-openai-shape",
        '{"type": "function", "function": '
        '{"name": "search", "arguments": "{\\"query\\": \\"z\\"}"}}',
        [("search", {"query": "z"}, "json")],
        "",
    ),
    (
        "bare-json-broken-but-call-shaped",
        '{"name": "search", "parameters": {"query": "unterminated}',
        [("search", '{"query": "unterminated}', "json")],
        "",
    ),
    # --- Python call syntax -----------------------------------------------------------------------
    (
        "python-keywords",
        "I'll check the weather first.\nget_weather(location=\"Beijing\", unit='celsius')",
        [("get_weather", {"location": "Beijing", "unit": "celsius"}, "python")],
        "I'll check the weather first.",
    ),
    (
        "python-single-positional-string",
        'get_weather("Beijing")',
        [("get_weather", "Beijing", "python")],
        "",
    ),
    (
        "python-single-positional-number",
        "get_time(8)",
        [("get_time", "8", "python")],
        "",
    ),
    (
        "python-several-positional",
        'search("react", 5, exact=True)',
        [("search", {"__args__": ["react", 5], "exact": True}, "python")],
        "",
    ),
    (
        "python-no-arguments",
        "Let me see what time it is.\n\nget_time()\n",
        [("get_time", {}, "python")],
        "Let me see what time it is.",
    ),
    (
        "python-in-a-fence",
        'Here goes:\n```python\nget_weather(city="Tokyo")\n```',
        [("get_weather", {"city": "Tokyo"}, "python")],
        "Here goes:",
    ),
    (
        "python-in-a-fence-with-prose-after-is-an-example",
        'Here goes:\n```python\nget_weather(city="Tokyo")\n```\nDone.',
        [],
        'Here goes:\n```python\nget_weather(city="Tokyo")\n```\nDone.',
    ),
    (
        "python-gemma-tool-code-fence",
        '```tool_code\nsearch(query="gemma function calling")\n```',
        [("search", {"query": "gemma function calling"}, "python")],
        "",
    ),
    (
        "python-inline-backticks-on-own-line",
        'Calling:\n`get_weather(city="Seoul")`',
        [("get_weather", {"city": "Seoul"}, "python")],
        "Calling:",
    ),
    (
        "python-multiline-call",
        'search(\n    query="multi line",\n    limit=3,\n)',
        [("search", {"query": "multi line", "limit": 3}, "python")],
        "",
    ),
    (
        "python-literal-containers",
        "search(query='x', filters={'lang': ['en', 'zh']}, span=(1, 2))",
        [("search", {"query": "x", "filters": {"lang": ["en", "zh"]}, "span": [1, 2]}, "python")],
        "",
    ),
    (
        "python-pythonic-list",
        '[get_weather(city="San Francisco") , get_time(tz="PST")]',
        [
            ("get_weather", {"city": "San Francisco"}, "python"),
            ("get_time", {"tz": "PST"}, "python"),
        ],
        "",
    ),
    (
        "python-two-lines",
        'get_time()\nget_weather(city="Kyiv")',
        [("get_time", {}, "python"), ("get_weather", {"city": "Kyiv"}, "python")],
        "",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected", "thought"),
    [
        pytest.param(text, expected, thought, id=case_id)
        for case_id, text, expected, thought in CASES
    ],
)
def test_salvage(text: str, expected: list[tuple[str, Any, str]], thought: str) -> None:
    calls = read_salvaged(text, TOOLS).calls
    assert [(c.tool, c.arguments, c.format) for c in calls] == expected
    assert strip_salvaged(text, calls) == thought
    spans = [c.span for c in calls]
    assert spans == sorted(spans)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start
    for start, end in spans:
        assert 0 <= start < end <= len(text)


# --- what must NOT be salvaged -----------------------------------------------------------------

NOT_CALLS: list[tuple[str, str]] = [
    ("prose-mentions-tool", "I could use get_weather to find the forecast for Paris."),
    ("prose-mentions-call-inline", 'I will call get_weather(city="Paris") next.'),
    ("call-followed-by-prose", 'get_weather(city="Paris") returns the forecast as JSON.'),
    ("python-unknown-function", 'print("hello")\nopen("/etc/passwd")'),
    ("python-variable-argument", "get_weather(city=my_city)"),
    ("python-nested-call", 'get_weather(city=input("city?"))'),
    ("python-star-kwargs", "get_weather(**params)"),
    ("python-attribute-call", 'weather.get_weather(city="Paris")'),
    ("python-list-with-unknown", '[get_weather(city="a"), rm(path="/")]'),
    ("python-list-with-noncall", '[get_weather(city="a"), 42]'),
    ("bare-json-unknown-name", '{"name": "rm_rf", "parameters": {"path": "/"}}'),
    ("bare-json-not-a-call", '{"city": "Paris", "temperature": 21}'),
    ("bare-json-list-with-unknown", '[{"name": "get_time"}, {"name": "format_disk"}]'),
    ("bare-json-list-with-number", '[{"name": "get_time"}, 5]'),
    ("bare-broken-json-unknown-name", '{"name": "format_disk", "parameters": {"x": 1,}}'),
    ("bare-function-tag-unknown", '<function=format_disk>{"x": 1}</function>'),
    ("python-list-unclosed-string", "[get_time('x]"),
    ("python-bytes-positional", 'get_time(b"x")'),
    ("python-set-keyword", "search(query={'a', 'b'})"),
    ("python-complex-in-args", "search('q', 1j)"),
    ("python-too-long", "<|python_tag|>search(query='" + "a" * 30_000 + "')"),
    ("json-prose-example", 'e.g. {"name": "get_time", "parameters": {}} as requested'),
    ("json-value-in-json", '{"answer": {"name": "get_time", "parameters": {}}}'),
    (
        "json-offer-to-run",
        'Ready: {"name": "get_time", "parameters": {}} Would you like me to run it?',
    ),
    ("python-list-unknown", "Done. [get_time(), shutdown()] as planned"),
    ("python-list-example", "The syntax: [get_time(tz='UTC')] in a list."),
    ("mistral-junk-broken", '[TOOL_CALLS] now [{"name": "get_time", "arguments": {]'),
    ("broken-json-not-call-shaped", '{"city": "Paris", "name": "get_time",'),
    ("mistral-unknown", '[TOOL_CALLS][{"name": "shutdown", "arguments": {}}]'),
    ("mistral-marker-alone", "[TOOL_CALLS]"),
    ("deepseek-no-separator", f"{DS_CALL_BEGIN}get_time{DS_CALL_END}"),
    ("hermes-no-json", "<tool_call>I want to get the weather</tool_call>"),
    ("hermes-tag-mentioned", "Models may emit <tool_call> tags; we handle them."),
    ("function-tag-plain-text-body", "<function=get_weather>Paris</function>"),
    (
        "thought-action-is-not-ours",
        'Thought: check\nAction: get_weather\nAction Input: {"city": "X"}',
    ),
    ("empty", ""),
    ("whitespace", "  \n\t "),
]


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in NOT_CALLS])
def test_not_a_call(text: str) -> None:
    assert read_salvaged(text, TOOLS).calls == []


def test_no_tools_means_nothing_is_salvaged() -> None:
    for _, text, _, _ in CASES:
        assert read_salvaged(text, ()).calls == []
        assert read_salvaged(text, [""]).calls == []


def test_only_listed_names_are_salvaged() -> None:
    text = 'get_time()\nget_weather(city="Oslo")'
    assert calls_of(text, frozenset({"get_weather"})) == [
        ("get_weather", {"city": "Oslo"}, "python")
    ]


def test_tool_names_may_be_any_collection() -> None:
    text = '<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>'
    for names in (["search"], ("search",), {"search"}, {"search": object()}.keys()):
        assert [c.tool for c in read_salvaged(text, names).calls] == ["search"]


def test_python_syntax_needs_identifier_names() -> None:
    # Function-calling names may contain "-", which Python syntax cannot express.
    assert read_salvaged('get-weather(city="x")', {"get-weather"}).calls == []
    text = '<tool_call>{"name": "get-weather", "arguments": {}}</tool_call>'
    assert [c.tool for c in read_salvaged(text, {"get-weather"}).calls] == ["get-weather"]


def test_longest_tool_name_wins() -> None:
    names = frozenset({"get", "get_time"})
    assert calls_of("get_time()", names) == [("get_time", {}, "python")]
    assert calls_of("get(1)", names) == [("get", "1", "python")]


# --- reasoning blocks ------------------------------------------------------------------------


def test_calls_inside_think_are_drafts() -> None:
    text = (
        '<think>Maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call>? '
        "No.</think>\n"
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    )
    assert calls_of(text) == [("get_weather", {"city": "Paris"}, "hermes")]


def test_closing_think_only_covers_the_start() -> None:
    # Qwen3's template opens <think> in the prompt, so the reply has only </think>.
    text = "I should call get_time()\nget_time()\n</think>\nget_time()"
    calls = read_salvaged(text, TOOLS).calls
    assert len(calls) == 1
    assert calls[0].span[0] == text.rindex("get_time()")


def test_unclosed_think_hides_everything_after_it() -> None:
    assert read_salvaged("<think>\nget_time()\n", TOOLS).calls == []


# --- precedence between formats --------------------------------------------------------------


def test_python_lookalike_inside_json_arguments_is_not_a_second_call() -> None:
    # A raw newline inside a JSON string is not strict JSON, but models write code so.
    text = '<tool_call>{"name": "search", "arguments": {"query": "x\nget_time()\ny"}}</tool_call>'
    assert calls_of(text) == [("search", {"query": "x\nget_time()\ny"}, "hermes")]


def test_explicit_format_wins_over_a_python_call_around_it() -> None:
    text = 'search(query=\'<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\')'
    found = read_salvaged(text, TOOLS, examples=True).calls  # every call written, wherever it is
    assert [(c.tool, c.arguments, c.format) for c in found] == [("get_time", {}, "hermes")]
    assert calls_of(text) == []  # ... but a call inside a quoted string is not the action


def test_calls_from_different_formats_come_in_text_order() -> None:
    text = (
        'get_time()\n<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>\n'
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Bern"}}]'
    )
    assert [(c.tool, c.format) for c in read_salvaged(text, TOOLS).calls] == [
        ("get_time", "python"),
        ("search", "hermes"),
        ("get_weather", "mistral"),
    ]


def test_spans_of_a_wrapper_tile_it() -> None:
    text = (
        'Prefix. [TOOL_CALLS][{"name": "get_time", "arguments": {}}, '
        '{"name": "search", "arguments": {"query": "q"}}] Suffix.'
    )
    calls = read_salvaged(text, TOOLS).calls
    assert calls[0].span[0] == text.index("[TOOL_CALLS]")
    assert calls[0].span[1] == calls[1].span[0]
    assert text[calls[1].span[1] :] == " Suffix."
    assert strip_salvaged(text, calls) == "Prefix.  Suffix."


def test_arguments_are_always_json_compatible() -> None:
    text = "\n".join(c[1] for c in CASES)
    for call in read_salvaged(text, TOOLS).calls:
        if isinstance(call.arguments, dict):
            assert json.loads(json.dumps(call.arguments)) == call.arguments


def test_salvaged_calls_are_pending_calls() -> None:
    (call,) = read_salvaged('get_time(zone="UTC")', TOOLS).calls
    assert isinstance(call, PendingCall)
    assert (call.tool, call.format, call.span, call.id) == ("get_time", "python", (0, 20), None)


# --- strip_salvaged ---------------------------------------------------------------------------


def test_strip_without_calls_just_trims() -> None:
    assert strip_salvaged("  just prose \n", []) == "just prose"


def test_strip_tolerates_overlapping_and_out_of_range_spans() -> None:
    calls = [
        found_call("a", {}, "python", (2, 6)),
        found_call("b", {}, "python", (4, 8)),
        found_call("c", {}, "python", (9, 99)),
        found_call("d", {}, "python", (3, 5)),
    ]
    assert strip_salvaged("0123456789", calls) == "018"


def test_strip_collapses_blank_lines_and_empty_fences() -> None:
    text = "First.\n\n\n```python\nget_time()\n```\n\n\nLast."
    assert (
        strip_salvaged(text, read_salvaged(text, TOOLS, examples=True).calls) == "First.\n\nLast."
    )


# --- robustness ---------------------------------------------------------------------------------

MEGABYTE = 1_000_000

ADVERSARIAL = {
    "open-braces": "{" * MEGABYTE,
    "open-brackets": "[" * MEGABYTE,
    "open-parens-call": "get_weather(" * (MEGABYTE // 12),
    "call-lines-unclosed": "get_weather(\n" * (MEGABYTE // 13),
    "call-lines-open-string": 'get_weather("\n' * (MEGABYTE // 14),
    "nested-parens": "get_weather(" + "(" * MEGABYTE,
    "quotes": '"' * MEGABYTE,
    "backslashes": '{"name": "search", "arguments": "' + "\\" * MEGABYTE,
    "tool-call-tags": "<tool_call>{" * (MEGABYTE // 12),
    "tool-call-single-open": "<tool_call>" + '{"name": "search", "arguments": {' * (MEGABYTE // 34),
    "function-tags": "<function=get_weather><parameter=city>" * (MEGABYTE // 38),
    "deepseek-tokens": (DS_CALL_BEGIN + "get_time" + DS_SEP + "{") * (MEGABYTE // 30),
    "mistral-markers": "[TOOL_CALLS][{" * (MEGABYTE // 14),
    "python-tags": "<|python_tag|>{" * (MEGABYTE // 15),
    "think-tags": "<think>" * (MEGABYTE // 7),
    "name-keys": '"name" :' + " " * MEGABYTE,
    "whole-list-of-calls": "[" + "get_time()," * (MEGABYTE // 11) + "]",
    "whole-json-list": "[" + '{"name": "get_time"},' * (MEGABYTE // 21) + "]",
    "long-prose-with-names": "please get_weather and get_time and search " * (MEGABYTE // 43),
    "fence-runs": "```" * (MEGABYTE // 3),
    "blank-runs": "\n" + " \n" * (MEGABYTE // 2),
}


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in ADVERSARIAL.items()])
def test_a_megabyte_of_adversarial_text_returns(text: str) -> None:
    calls = read_salvaged(text, TOOLS).calls
    assert isinstance(calls, list)
    assert isinstance(strip_salvaged(text, calls), str)


def test_many_real_calls_in_one_reply() -> None:
    block = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\n'
    text = block * 20_000
    calls = read_salvaged(text, TOOLS).calls
    assert len(calls) == 20_000
    assert strip_salvaged(text, calls) == ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(
            [
                *"{}[]()\"'\\:,;\n `=<>|_",
                "get_time",
                "search",
                "name",
                "<tool_call>",
                "</tool_call>",
                "<function=search>",
                "</function>",
                "<parameter=q>",
                "</parameter>",
                "[TOOL_CALLS]",
                "[ARGS]",
                "<|python_tag|>",
                "<think>",
                "</think>",
                DS_CALL_BEGIN,
                DS_CALL_END,
                DS_SEP,
                DS_CALLS_BEGIN,
                "```",
                "arguments",
                "x",
                "1",
            ]
        ),
        max_size=60,
    ).map("".join)
)
def test_never_raises_and_spans_are_sane(text: str) -> None:
    calls = read_salvaged(text, TOOLS).calls
    previous_end = 0
    for call in calls:
        assert call.tool in TOOLS
        start, end = call.span
        assert previous_end <= start < end <= len(text)
        previous_end = end
        assert isinstance(call.arguments, dict | str)
    strip_salvaged(text, calls)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(TOOLS)),
    arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    fmt=st.sampled_from(["hermes", "mistral", "llama", "deepseek", "json"]),
)
def test_any_json_arguments_round_trip(name: str, arguments: dict[str, Any], fmt: str) -> None:
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    text = {
        "hermes": f"<tool_call>\n{payload}\n</tool_call>",
        "mistral": f"[TOOL_CALLS][{payload}]",
        "llama": f"<|python_tag|>{payload}<|eom_id|>",
        "json": payload,
        "deepseek": f"{DS_CALL_BEGIN}{name}{DS_SEP}{json.dumps(arguments, ensure_ascii=False)}"
        f"{DS_CALL_END}",
    }[fmt]
    assert calls_of(text) == [(name, arguments, fmt)]


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(TOOLS)),
    arguments=st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
            lambda k: not keyword.iskeyword(k)
        ),
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        max_size=4,
    ),
)
def test_python_keyword_calls_round_trip(name: str, arguments: dict[str, Any]) -> None:
    src = f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    assert calls_of(src) == [(name, arguments, "python")]


def test_a_megabyte_of_call_lines_reads_only_what_a_reply_could_run() -> None:
    # A megabyte of ``f(a=1)`` lines cost 13 s of CPU, one compile per line.
    from react_engine.parsing.salvage import MAX_PYTHON_CALLS, read_salvaged

    text = "get_weather(location='Paris')\n" * 40_000
    calls = read_salvaged(text, ["get_weather"]).calls
    assert len(calls) == MAX_PYTHON_CALLS
    assert all(c.arguments == {"location": "Paris"} for c in calls)


LONG_REPLY = "\n".join(
    [
        '<think>draft: <tool_call>{"name": "search", "arguments": {}}</tool_call></think>',
        *(case[1] for case in CASES),
        "Observation: the weather is fine.",
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    ]
)
"""Every case's reply in one, between a think block and an invented observation (both
hide calls), so that calls of every format, overlapping claims and cut-offs meet."""


@pytest.mark.parametrize("limit", [0, 1, 2, 7, 50, None])
@pytest.mark.parametrize(
    "text", [pytest.param(LONG_REPLY, id="all-cases"), *(c[1] for c in CASES[:12])]
)
def test_read_salvaged_keeps_the_first_calls(text: str, limit: int | None) -> None:
    every = read_salvaged(text, TOOLS).calls
    found = read_salvaged(text, TOOLS, limit=limit)
    assert found.calls == every[:limit]
    if limit is None:
        assert strip_salvaged(text, found.calls) == strip_salvaged(text, every)


@pytest.mark.parametrize("fence", ["", "```json\n"])
@pytest.mark.parametrize(
    "text",
    [
        '{"tool_calls": [{"name": "get_time", "arguments": {"tz": "%d"}}]}',
        '<tool_call>{"tool_calls": [{"name": "get_time", "arguments": {"tz": "%d"}}]}</tool_call>',
    ],
    ids=["whole", "hermes"],
)
def test_the_calls_of_one_json_object_keep_their_written_order(text: str, fence: str) -> None:
    """They share the object's extent: each after the first spans no text. Such calls were
    put before the others already at their position (the third and later came out in
    reverse), and a fenced reply's last one, which spans the closing fence, was dropped."""
    one = '{"name": "get_time", "arguments": {"tz": "%d"}}'
    listed = ", ".join(one % i for i in range(5))
    reply = text.replace(one, "%s") % listed
    reply = fence + reply + ("\n```" if fence else "")
    found = read_salvaged(reply, ["get_time", "get_weather"])
    assert [c.arguments for c in found.calls] == [{"tz": str(i)} for i in range(5)]
    assert not strip_salvaged(reply, found.calls).strip("`")
