"""Replies that are not in the protocol's format but say what the model meant, through the
public ``Agent`` API:

* native ``tool_calls`` are honoured under every protocol (seed 003 checks them
  first, then the text), over HTTP with the shipped server;
* labels never reach an answer (``Thought: ... Final Answer: ...`` under function
  calling, inside a structured answer);
* a plain reply, after one reminder, is the answer (``unlabeled_answer``), never an
  exception; the zh template's feedback is Chinese; a reply with more calls than the
  tool-call budget runs those within it, then the run is asked for its final answer;
* a bare input is the value of a tool's one required parameter, ``key: value``
  pairs naming parameters are read (seed 000), anything ambiguous is refused.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelSettings,
    RetryPolicy,
    RunResult,
    Tool,
)
from react_engine.parsing import patterns as P
from react_engine.parsing.arguments import read_text_arguments
from react_engine.protocols import TextReActProtocol
from react_engine.run.events import RunDone
from react_engine.testing import (
    ScriptedModel,
    ScriptedServer,
    completion,
    reply,
    tool_call_reply,
    tool_calls_completion,
)

PROTOCOLS = ["function_calling", "text", "structured"]


class Recorder:
    """Two tools that record every call they really receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

        def get_weather(city: str, unit: str = "celsius") -> str:
            """The weather in a city.

            Args:
                city: the city's name.
                unit: celsius or fahrenheit.
            """
            self.calls.append(("get_weather", {"city": city, "unit": unit}))
            return f"{city}: 14 {unit}"

        def search_product(name: str, category: str) -> str:
            """Find a product.

            Args:
                name: the product's name.
                category: its category.
            """
            self.calls.append(("search_product", {"name": name, "category": category}))
            return f"{name} ({category}): 3 in stock"

        self.tools = [Tool.from_function(get_weather), Tool.from_function(search_product)]


def final_text(protocol: str, answer: str) -> str:
    """A final answer in the protocol's own format."""
    if protocol == "structured":
        return json.dumps({"thought": "done", "action": {"final_answer": answer}})
    if protocol == "text":
        return f"Thought: I now know the final answer\nFinal Answer: {answer}"
    return answer


def run_scripted(
    protocol: str | TextReActProtocol, script: list[Any], **options: Any
) -> tuple[RunResult, Recorder, ScriptedModel]:
    tools = Recorder()
    model = ScriptedModel(script)
    agent = Agent(
        "scripted",
        tools.tools,
        protocol=protocol,
        client=model,
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **options,
    )
    return agent.run("What is the weather in Paris?"), tools, model


# --- native tool_calls under every protocol, over HTTP ----------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def run_http(
    server: ScriptedServer, protocol: str, *, client: str = "sync", **options: Any
) -> tuple[RunResult, Recorder]:
    tools = Recorder()

    def build(sdk: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
        return Agent(
            "mock-model",
            tools.tools,
            protocol=protocol,
            client=sdk,
            settings=ModelSettings(timeout=10.0),
            retry=RetryPolicy(max_attempts=1),
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
            **options,
        )

    if client == "sync":
        with openai.OpenAI(base_url=server.base_url, api_key="sk-test-replies") as sdk:
            return build(sdk).run("What is the weather in Paris?"), tools

    async def arun() -> RunResult:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test-replies") as sdk:
            return await build(sdk).arun("What is the weather in Paris?")

    return asyncio.run(arun()), tools


@pytest.mark.parametrize("client", ["sync", "async"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_native_tool_calls_run_under_every_protocol(
    server: ScriptedServer, protocol: str, client: str
) -> None:
    server.push(
        tool_calls_completion(("get_weather", {"city": "Paris"}), content=None),
        completion(final_text(protocol, "Paris is 14°C.")),
    )
    result, tools = run_http(server, protocol, client=client)
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert result.answer == "Paris is 14°C."
    assert [(a.tool, a.arguments, a.status) for a in result.steps[0].actions] == [
        ("get_weather", {"city": "Paris"}, "ok")
    ]
    # The model is shown the result of its call on the next request.
    second = json.dumps(server.requests[1]["messages"], ensure_ascii=False)
    assert "Paris: 14 celsius" in second


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_native_tool_calls_run_under_every_protocol_when_streamed(
    server: ScriptedServer, protocol: str
) -> None:
    """The same over a streamed reply: the call arrives in pieces, and still runs once."""
    server.push(
        tool_calls_completion(("get_weather", {"city": "Paris"}), content=None),
        completion(final_text(protocol, "Paris is 14°C.")),
    )
    tools = Recorder()
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test-replies") as sdk:
        agent = Agent(
            "mock-model",
            tools.tools,
            protocol=protocol,
            client=sdk,
            settings=ModelSettings(timeout=10.0),
            retry=RetryPolicy(max_attempts=1),
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
        )
        events = list(agent.run_stream("What is the weather in Paris?"))
    done = events[-1]
    assert isinstance(done, RunDone)
    assert done.result.answer == "Paris is 14°C."
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert all(r.get("stream") for r in server.requests)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_native_calls_come_first_and_the_text_is_the_thought(
    server: ScriptedServer, protocol: str
) -> None:
    """Seed 003: ``tool_calls`` first, then the text. A reply that writes the same call as
    an Action beside the native one runs it once, and its thought is kept."""
    text = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
    server.push(
        tool_calls_completion(("get_weather", {"city": "Paris"}), content=text),
        completion(final_text(protocol, "14°C")),
    )
    result, tools = run_http(server, protocol)
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert result.answer == "14°C"
    assert "I need the weather." in (result.steps[0].thought or "")


@pytest.mark.parametrize("protocol", ["text", "structured"])
def test_a_native_call_is_no_forced_final_answer(protocol: str) -> None:
    """Where tools are off (the step budget is spent), a native call is refused like a call
    written as text, and never runs."""
    result, tools, _ = run_scripted(
        protocol,
        [
            tool_call_reply(("get_weather", {"city": "Paris"})),
            tool_call_reply(("get_weather", {"city": "Rome"})),
            final_text(protocol, "Paris is 14°C."),
        ],
        max_steps=1,
    )
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert result.answer == "Paris is 14°C."
    assert [s.kind for s in result.steps] == ["action", "format_error", "final"]


# --- labels never reach an answer ------------------------------------------------------------

LABELLED = [
    ("Thought: I know it.\nFinal Answer: Paris is 14°C.", "I know it.", "Paris is 14°C."),
    ("思考：我知道了。\n最终答案：巴黎 14°C。", "我知道了。", "巴黎 14°C。"),
    ("**Thought:** I know it.\n**Final Answer:** Paris is 14°C.", "I know it.", "Paris is 14°C."),
    ("Final Answer: Paris is 14°C.", None, "Paris is 14°C."),
]


@pytest.mark.parametrize(("text", "thought", "answer"), LABELLED)
def test_a_labelled_plain_reply_under_function_calling_is_the_answer_without_labels(
    text: str, thought: str | None, answer: str
) -> None:
    result, tools, _ = run_scripted("function_calling", [reply(text)])
    assert result.answer == answer
    assert result.steps[-1].thought == thought
    assert tools.calls == []


@pytest.mark.parametrize(("text", "thought", "answer"), LABELLED)
def test_a_labelled_structured_answer_loses_its_labels(
    text: str, thought: str | None, answer: str
) -> None:
    step = {"thought": "done", "action": {"final_answer": text}}
    result, _, _ = run_scripted("structured", [json.dumps(step, ensure_ascii=False)])
    assert result.answer == answer
    assert result.steps[-1].thought == "\n\n".join(t for t in ("done", thought) if t)


def test_a_labelled_thought_alone_under_function_calling_loses_its_label() -> None:
    result, _, _ = run_scripted("function_calling", [reply("Thought: I know it. Paris is 14°C.")])
    assert result.answer == "I know it. Paris is 14°C."
    assert "answer_labels" in result.steps[-1].repairs


def test_an_answer_that_only_mentions_a_label_is_kept_whole() -> None:
    text = 'The ReAct format ends with a line such as "Final Answer: 42".'
    result, _, _ = run_scripted("function_calling", [reply(text)])
    assert result.answer == text


# --- a plain reply after one reminder is the answer --------------------------------------------


def zh() -> TextReActProtocol:
    return TextReActProtocol(template="zh")


@pytest.mark.parametrize("protocol", ["text", "zh", "structured"])
def test_a_plain_reply_after_one_reminder_is_the_answer(protocol: str) -> None:
    """Seed 004: "a reply that uses no tool carries no labels". The first plain reply gets one
    reminder of the format; a plain reply again is the answer, marked in the trace."""
    chosen = zh() if protocol == "zh" else protocol
    result, tools, model = run_scripted(
        chosen, ["It is 14°C in Paris today.", "Paris: 14°C, clear skies."]
    )
    assert result.answer == "Paris: 14°C, clear skies."
    assert result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["format_error", "final"]
    assert "unlabeled_answer" in result.steps[-1].repairs
    assert len(model.requests) == 2
    assert tools.calls == []


def test_a_plain_reply_is_never_raised_as_an_exception() -> None:
    """Plain replies one after another: the second is the answer, within any error budget."""
    result, _, _ = run_scripted(
        "text", ["Hello! How can I help?", "Hello again."], max_consecutive_errors=1
    )
    assert result.answer == "Hello again."


def test_the_reminder_is_needed_again_after_a_step_in_the_format() -> None:
    result, tools, _ = run_scripted(
        "text",
        [
            "Paris is nice.",
            'Thought: check\nAction: get_weather\nAction Input: {"city": "Paris"}',
            "It is 14°C.",
            "It is 14°C in Paris.",
        ],
    )
    assert [s.kind for s in result.steps] == ["format_error", "action", "format_error", "final"]
    assert result.answer == "It is 14°C in Paris."
    assert len(tools.calls) == 1


@pytest.mark.parametrize(
    "call",
    [
        "search_product(name: iPhone, category: phone)",
        "# 查询商品 → search_product(name: iPhone, category: phone)",
    ],
)
def test_a_plain_reply_that_is_a_call_written_as_text_is_never_the_answer(call: str) -> None:
    result, tools, _ = run_scripted("text", [call, call, final_text("text", "14")])
    assert result.answer == "14"
    assert [s.kind for s in result.steps] == ["format_error", "format_error", "final"]
    assert tools.calls == []


ASCII_WORD = re.compile(r"[A-Za-z]{2,}")


def zh_feedback(script: list[Any], **options: Any) -> list[str]:
    result, _, _ = run_scripted(zh(), script, **options)
    return [s.feedback for s in result.steps if s.feedback]


ZH_CASES: dict[str, tuple[list[Any], dict[str, Any]]] = {
    "plain": (["巴黎今天 14 度。", "最终答案：14"], {}),
    "empty": (["", "最终答案：14"], {}),
    "only_reasoning": (["<think>想一想</think>", "最终答案：14"], {}),
    "thoughts_only": (["思考：我得查一下。", "最终答案：14"], {}),
    "no_tools_allowed": (
        ['思考：查\n行动：get_weather\n行动输入：{"city": "巴黎"}', "最终答案：14"],
        {"tool_choice": "none"},
    ),
    "tool_required": (
        ["最终答案：14", '思考：查\n行动：get_weather\n行动输入：{"city": "巴黎"}', "最终答案：14"],
        {"tool_choice": "required", "reset_tool_choice": True},
    ),
    "named_tool": (
        [
            '思考：查\n行动：get_weather\n行动输入：{"city": "巴黎"}',
            '思考：查\n行动：search_product\n行动输入：{"name": "a", "category": "b"}',
            "最终答案：14",
        ],
        {"tool_choice": "search_product", "reset_tool_choice": True},
    ),
    "forced_call": (
        [
            '思考：查\n行动：get_weather\n行动输入：{"city": "巴黎"}',
            '思考：再查\n行动：get_weather\n行动输入：{"city": "北京"}',
            "最终答案：14",
        ],
        {"max_steps": 1},
    ),
}


@pytest.mark.parametrize("case", sorted(ZH_CASES))
def test_every_format_feedback_under_the_zh_template_is_chinese(case: str) -> None:
    script, options = ZH_CASES[case]
    feedback = zh_feedback(script, **options)
    assert feedback, "the case must make the engine refuse a reply"
    for text in feedback:
        words = set(ASCII_WORD.findall(text)) - {"get_weather", "search_product", "JSON"}
        words -= {"get", "weather", "search", "product"}
        assert not words, f"English in the zh feedback: {sorted(words)} in {text!r}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reply_past_the_tool_budget_runs_the_calls_within_it_then_answers(
    protocol: str,
) -> None:
    # Every call of a reply may run (multi_action="all"), so the budget alone stops one.
    result, tools, model = run_scripted(
        protocol,
        [
            tool_call_reply(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})),
            final_text(protocol, "Paris is 14°C."),
        ],
        max_tool_calls=1,
        multi_action="all",
    )
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    first, second = result.steps[0].actions
    assert (first.arguments, first.status) == ({"city": "Paris"}, "ok")
    assert (second.arguments, second.status) == ({"city": "Rome"}, "skipped")
    assert "budget" in second.observation
    assert result.answer == "Paris is 14°C."
    assert result.stop_reason == "tool_budget"
    assert any("tool-call budget" in e for e in [n.message for n in result.notices])
    assert len(model.requests) == 2


def test_a_text_reply_with_more_actions_than_the_budget_runs_the_first() -> None:
    both = (
        'Thought: both\nAction: get_weather\nAction Input: {"city": "Paris"}\n'
        'Action: get_weather\nAction Input: {"city": "Rome"}'
    )
    result, tools, _ = run_scripted(
        "text", [both, final_text("text", "Paris is 14°C.")], max_tool_calls=1
    )
    assert tools.calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert result.answer == "Paris is 14°C."
    assert result.stop_reason == "tool_budget"


# --- text inputs read onto the tool's parameters ------------------------------------------------

BLOB = '{"action": "get_weather", "action_input": "Beijing"}'


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_bare_input_is_the_value_of_the_one_required_parameter(protocol: str) -> None:
    result, tools, _ = run_scripted(protocol, [BLOB, final_text(protocol, "14")])
    assert tools.calls == [("get_weather", {"city": "Beijing", "unit": "celsius"})]
    action = result.steps[0].actions[0]
    assert (action.arguments, action.status) == ({"city": "Beijing"}, "ok")
    assert "bare_input_to_parameter" in result.steps[0].repairs


def test_a_bare_action_input_line_is_read_the_same_way() -> None:
    text = "Thought: look\nAction: get_weather\nAction Input: Beijing"
    _, tools, _ = run_scripted("text", [text, final_text("text", "14")])
    assert tools.calls == [("get_weather", {"city": "Beijing", "unit": "celsius"})]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_bare_input_for_several_required_parameters_is_refused(protocol: str) -> None:
    blob = '{"action": "search_product", "action_input": "iPhone"}'
    result, tools, _ = run_scripted(protocol, [blob, final_text(protocol, "none")])
    assert tools.calls == []
    assert result.steps[0].actions[0].status == "invalid_arguments"


SEED_000 = {
    "text": "Thought: 查询商品\nAction: search_product(name: iPhone, category: phone)",
    "structured": json.dumps(
        {
            "thought": "查询商品",
            "action": {"tool": "search_product", "arguments": "name: iPhone, category: phone"},
        },
        ensure_ascii=False,
    ),
    "function_calling": "Thought: 查询商品\nAction: search_product(name: iPhone, category: phone)",
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_seed_000_key_value_arguments_are_read(protocol: str) -> None:
    result, tools, _ = run_scripted(protocol, [SEED_000[protocol], final_text(protocol, "3")])
    assert tools.calls == [("search_product", {"name": "iPhone", "category": "phone"})]
    assert "key_value_arguments" in result.steps[0].repairs


AMBIGUOUS = [
    "iPhone, category: phone",  # the first value has no key
    "name: iPhone category: phone",  # no separator: one name or a name and a category?
    "name: iPhone, colour: red",  # colour is no parameter
    "name: iPhone, name: iPad",  # the same key twice
    "name: 'iPhone, category: phone",  # a quote never closed
    'name: iPhone 15 "Pro", category: phone',  # quotes inside a bare value
]


@pytest.mark.parametrize("arguments", AMBIGUOUS)
@pytest.mark.parametrize("protocol", ["text", "structured"])
def test_ambiguous_key_value_arguments_are_refused(protocol: str, arguments: str) -> None:
    if protocol == "text":
        text = f"Thought: look\nAction: search_product\nAction Input: {arguments}"
    else:
        step = {"thought": "look", "action": {"tool": "search_product", "arguments": arguments}}
        text = json.dumps(step)
    result, tools, _ = run_scripted(protocol, [text, final_text(protocol, "none")])
    assert tools.calls == []
    assert result.steps[0].actions[0].status == "invalid_arguments"


def test_a_bare_input_that_names_a_parameter_is_refused_not_guessed() -> None:
    """``Beijing, unit: fahrenheit`` may be one city or a city and a unit."""
    text = "Thought: look\nAction: get_weather\nAction Input: Beijing, unit: fahrenheit"
    result, tools, _ = run_scripted("text", [text, final_text("text", "none")])
    assert tools.calls == []
    assert "key: value" in result.steps[0].actions[0].observation


def test_quoted_key_values_keep_their_commas() -> None:
    text = "Thought: look\nAction: search_product(name: \"iPhone, 15\", category: 'phone')"
    _, tools, _ = run_scripted("text", [text, final_text("text", "3")])
    assert tools.calls == [("search_product", {"name": "iPhone, 15", "category": "phone"})]


# --- the reader of text inputs: exactly the arguments written, or none -------------------------

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
VALUES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=24,
)


def written(arguments: dict[str, str], names: list[str], colon: str, sep: str) -> str:
    """``arguments`` as a model writes ``key: value`` pairs: plain where a plain value reads
    back as itself, quoted (JSON) otherwise."""
    parts = []
    for key, value in arguments.items():
        plain = (
            value
            and value == value.strip()
            and not any(c in value for c in ",，\n\"'“”‘’")
            and value not in ("null", "None")
            and not any(m["key"] in names for m in P.ARGUMENT_KEY_ANYWHERE.finditer(value))
        )
        shown = value if plain else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}{colon}{shown}")
    return sep.join(parts)


def damaged(arguments: dict[str, str], names: list[str], colon: str, sep: str, how: int) -> str:
    """One way a model garbles the pairs: no separator, a quote cut off or left over, a key
    written twice, prose before them, a key glued to the last value, a key no parameter."""
    text = written(arguments, names, colon, sep)
    if how == 0:
        return written(arguments, names, colon, " ")
    if how == 1:
        return text[:-1] if text.endswith('"') else text + '"'
    if how == 2:
        return f"{text}{sep}{names[0]}{colon}again"
    if how == 3:
        return f"see {text}"
    if how == 4:
        return f"{text} {names[-1]}{colon}more"
    return "unknown_key" + text[len(names[0]) :]


DAMAGES = 6


@settings(max_examples=300, deadline=None)
@given(
    st.lists(NAMES, min_size=1, max_size=4, unique=True).filter(lambda n: "unknown_key" not in n),
    st.lists(VALUES, min_size=4, max_size=4),
    st.sampled_from([": ", "=", "：", " : "]),
    st.sampled_from([", ", ",", "\n", "，"]),
    st.integers(0, DAMAGES - 1),
)
def test_text_inputs_read_back_exactly_or_not_at_all(
    names: list[str], values: list[str], colon: str, sep: str, how: int
) -> None:
    """For random tools and arguments (300 examples), the pairs as written read back as
    exactly the arguments; a damaged form (one of 6, drawn for each example) reads as
    exactly the arguments, or as the whole text for a tool's one parameter (a bare input,
    passed as written), or not at all."""
    schema = {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "required": list(names),
    }
    arguments = dict(zip(names, values, strict=False))
    read = read_text_arguments(written(arguments, names, colon, sep), schema)
    assert (read.arguments, read.repair) == (arguments, "key_value_arguments")
    text = damaged(arguments, names, colon, sep, how)
    broken = read_text_arguments(text, schema)
    if broken.repair == "key_value_arguments":
        assert broken.arguments == arguments
    elif broken.repair == "bare_input_to_parameter":
        assert broken.arguments == {names[0]: text.strip()} and len(names) == 1
    else:
        assert broken.arguments is None
