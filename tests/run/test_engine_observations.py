"""The engine's own observations, in the template's language: all feedback the engine
writes itself reaches the model in the language of the prompt template.

A call the engine refuses, holds back or sees fail gets an observation the engine writes
itself. Each has a stable code (``ActionRecord.observation_code``) and its wording comes from one
table (``react_engine.wording``): Chinese under the ``zh`` template, English otherwise,
word for word as before. Each case runs through the public ``Agent`` API with a scripted
model and reads the observation the model is sent next.
"""

from __future__ import annotations

import asyncio
import json
import re
import string
from typing import Any

import pytest

from react_engine import Agent, CapabilityCache, CapabilityRegistry, RunResult, Tool
from react_engine.parsing.repairs import REPAIRS, WHAT_ZH
from react_engine.protocols import TextReActProtocol
from react_engine.protocols.prompts import load_template, parse_template
from react_engine.store.codec import dump_record, load_record
from react_engine.testing import ScriptedModel
from react_engine.types import ActionRecord, ModelResponse, Usage, UserMessage
from react_engine.wording import LANGUAGES, WORDING, Notice, NoticeCode, error_observation

# --- tools -----------------------------------------------------------------------------------


def _tools() -> list[Tool]:
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name.
        """
        return f"{city}: 14"

    def send_note(to: str, text: str) -> str:
        """Send a note.

        Args:
            to: who gets it.
            text: what it says.
        """
        return "sent"

    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: the file.
        """
        return "deleted"

    def explode(city: str) -> str:
        """Always fails.

        Args:
            city: any city.
        """
        raise ValueError("boom")

    async def slow(city: str) -> str:
        """Takes too long.

        Args:
            city: any city.
        """
        await asyncio.sleep(5)
        return "late"

    def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: how much.
        """
        return "moved"

    return [
        Tool.from_function(get_weather, annotations=_read_only()),
        Tool.from_function(send_note),
        Tool.from_function(delete_file),
        Tool.from_function(explode),
        Tool.from_function(slow, timeout=0.05),
        Tool.from_function(transfer, requires_approval=True),
    ]


def _read_only() -> Any:
    from react_engine.tools import ToolAnnotations

    return ToolAnnotations(read_only=True)


NAMES = {"get_weather", "send_note", "delete_file", "explode", "slow", "transfer"}

# --- replies, written in each template's labels -------------------------------------------------


def _action(lang: str, tool: str, args: str, thought: str = "查一下") -> str:
    if lang == "zh":
        return f"思考：{thought}\n行动：{tool}\n行动输入：{args}"
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {args}"


def _actions(lang: str, *calls: tuple[str, str]) -> str:
    first = "思考：一起做。" if lang == "zh" else "Thought: all at once."
    lines = [first]
    for tool, args in calls:
        if lang == "zh":
            lines += [f"行动：{tool}", f"行动输入：{args}"]
        else:
            lines += [f"Action: {tool}", f"Action Input: {args}"]
    return "\n".join(lines)


def _final(lang: str) -> str:
    return "最终答案：好了" if lang == "zh" else "Final Answer: done"


def _cut(content: str) -> ModelResponse:
    return ModelResponse(content=content, finish_reason="length", usage=Usage(requests=1))


# case: (replies before the final one, options, expected code, index of the action)
CASES: dict[str, tuple[Any, dict[str, Any], NoticeCode, int]] = {
    "unknown_tool": (
        lambda g: [_action(g, "fly_away", '{"to": "月球"}')],
        {},
        NoticeCode.UNKNOWN_TOOL,
        0,
    ),
    "invalid_arguments": (
        lambda g: [_action(g, "transfer", '{"amount": "很多"}')],
        {"approve": lambda record: True},
        NoticeCode.INVALID_ARGUMENTS,
        0,
    ),
    "not_json": (
        lambda g: [_action(g, "get_weather", '{"city": "巴黎",')],  # cut after a comma
        {},
        NoticeCode.NOT_JSON,
        0,
    ),
    "lossy": (
        lambda g: [_action(g, "get_weather", '{"city": 巴黎}')],
        {},
        NoticeCode.LOSSY,
        0,
    ),
    "cut_off": (
        lambda g: [_cut(_action(g, "get_weather", '{"city": "巴黎"'))],
        {},
        NoticeCode.CUT_OFF,
        0,
    ),
    "ambiguous_input": (
        lambda g: [
            _action(g, 'get_weather {"city": "巴黎"}', '{"city": "北京"}'),
        ],
        {},
        NoticeCode.AMBIGUOUS_INPUT,
        0,
    ),
    "blind": (
        lambda g: [
            _actions(
                g,
                ("get_weather", '{"city": "巴黎"}'),
                ("send_note", '{"to": "<get_weather 的结果>", "text": "好"}'),
            )
        ],
        {},
        NoticeCode.BLIND,
        1,
    ),
    "one_change": (
        lambda g: [
            _actions(
                g, ("send_note", '{"to": "a", "text": "好"}'), ("delete_file", '{"path": "/tmp/x"}')
            )
        ],
        {},
        NoticeCode.ONE_CHANGE,
        1,
    ),
    "after_change": (
        lambda g: [
            _actions(
                g, ("send_note", '{"to": "a", "text": "好"}'), ("get_weather", '{"city": "巴黎"}')
            )
        ],
        {},
        NoticeCode.AFTER_CHANGE,
        1,
    ),
    "one_per_reply": (
        lambda g: [
            _actions(g, ("get_weather", '{"city": "巴黎"}'), ("get_weather", '{"city": "北京"}'))
        ],
        {"multi_action": "first"},
        NoticeCode.ONE_PER_REPLY,
        1,
    ),
    "too_many": (
        lambda g: [
            _actions(g, ("get_weather", '{"city": "巴黎"}'), ("get_weather", '{"city": "北京"}'))
        ],
        {"max_calls_per_step": 1},
        NoticeCode.TOO_MANY,
        1,
    ),
    "budget_spent": (
        lambda g: [
            _actions(g, ("get_weather", '{"city": "巴黎"}'), ("get_weather", '{"city": "北京"}'))
        ],
        {"max_tool_calls": 1},
        NoticeCode.BUDGET_SPENT,
        1,
    ),
    "no_approver": (
        lambda g: [_action(g, "transfer", '{"amount": 5}')],
        {},
        NoticeCode.NO_APPROVER,
        0,
    ),
    "not_approved": (
        lambda g: [_action(g, "transfer", '{"amount": 5}')],
        {"approve": lambda record: False},
        NoticeCode.NOT_APPROVED,
        0,
    ),
    "tool_failed": (
        lambda g: [_action(g, "explode", '{"city": "巴黎"}')],
        {},
        NoticeCode.TOOL_FAILED,
        0,
    ),
    "timeout": (lambda g: [_action(g, "slow", '{"city": "巴黎"}')], {}, NoticeCode.TIMEOUT, 0),
    "repeat_warning": (
        lambda g: [_action(g, "get_weather", '{"city": "巴黎"}')] * 2,
        {"loop_limit": 2},
        NoticeCode.REPEAT_WARNING,
        0,
    ),
}

ALLOWED = NAMES | {"JSON", "ValueError", "boom"}
"""ASCII words a Chinese observation may hold: tool names, a tool's own error, JSON."""
ASCII_WORD = re.compile(r"[A-Za-z]{2,}")


def run_case(case: str, template: str) -> tuple[RunResult, ScriptedModel, ActionRecord]:
    lang = "zh" if template == "zh" else "en"
    replies, options, code, index = CASES[case]
    model = ScriptedModel([*replies(lang), _final(lang)], default=_final(lang))
    agent = Agent(
        "scripted",
        _tools(),
        protocol=TextReActProtocol(template=template),
        client=model,
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **options,
    )
    result = agent.run("巴黎天气怎么样？")
    actions = [s for s in result.steps if s.actions]
    step = actions[-1] if code == NoticeCode.REPEAT_WARNING else actions[0]
    return result, model, step.actions[index]


def _engines(record: ActionRecord) -> str:
    """The part of the observation the engine wrote (a warning follows a tool's result)."""
    if record.observation_code == NoticeCode.REPEAT_WARNING:
        return record.observation.split("\n", 1)[1]
    return record.observation


def _words(text: str) -> set[str]:
    """English words in ``text``, names (snake_case) and quoted values aside."""
    text = re.sub(r"'[^']*'|\w+_\w+", "", text)
    return set(ASCII_WORD.findall(text)) - ALLOWED


def _sent_next(model: ScriptedModel, observation: str) -> bool:
    """Whether a request after the one that got the reply carries ``observation``."""
    return any(
        isinstance(m, UserMessage) and observation in m.content
        for request in model.requests[1:]
        for m in request.messages
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_under_zh_the_engines_observation_is_chinese(case: str) -> None:
    _, model, record = run_case(case, "zh")
    code = CASES[case][2]
    assert record.observation_code == code, (record.observation_code, record.observation)
    assert record.status != "ok" or code == NoticeCode.REPEAT_WARNING
    engines = _engines(record)
    assert engines.startswith(("错误：", "未执行：", "[警告："))
    words = _words(engines)
    if code == NoticeCode.INVALID_ARGUMENTS:  # the validator's detail is kept as written
        words = _words(engines.split("：", 2)[1])
    assert not words, f"English in the zh observation: {sorted(words)} in {record.observation!r}"
    assert _sent_next(model, record.observation), "the model is sent the observation"


@pytest.mark.parametrize("case", sorted(CASES))
def test_under_english_templates_the_observation_is_worded_as_before(case: str) -> None:
    _, model, record = run_case(case, "classic")
    code = CASES[case][2]
    assert record.observation_code == code
    assert _engines(record).startswith(("Error: ", "Skipped: ", "[Warning: "))
    outside_values = re.sub(r"'[^']*'|\{[^}]*\}", "", _engines(record))
    assert not re.search("[\u4e00-\u9fff]", outside_values), record.observation
    assert _sent_next(model, record.observation)


def test_english_wording_is_unchanged_word_for_word() -> None:
    # the texts the observations had before they had codes (goldens and users' checks)
    assert error_observation(Notice(NoticeCode.UNKNOWN_TOOL, tool="'x'", valid="a, b")) == (
        "Error: unknown tool 'x'. Valid tools: a, b."
    )
    _, _, record = run_case("budget_spent", "classic")
    assert record.observation == (
        "Skipped: the run's tool-call budget is spent: give your final answer now."
    )
    _, _, record = run_case("one_change", "classic")
    assert record.observation == (
        "Skipped: delete_file was not run: it is not read-only, and only one such call runs "
        "per reply (send_note came first); call it again in your next step if you still "
        "need it."
    )
    _, _, record = run_case("not_json", "classic")
    assert record.observation == (
        "Error: the Action Input is not valid JSON and could not be repaired (it is cut off, "
        "broken or nested too deeply), so the action was not run; write it again as one "
        "complete JSON object"
    )


def test_a_lossy_refusal_names_each_guess_in_chinese() -> None:
    _, _, record = run_case("lossy", "zh")
    assert WHAT_ZH["unquoted_value"] in record.observation
    assert record.error is not None and "a text value without quotes" in record.error.text()


def test_the_error_field_is_the_notice_worded_in_english_by_default() -> None:
    _, _, record = run_case("unknown_tool", "zh")
    assert record.error == Notice(
        NoticeCode.UNKNOWN_TOOL, tool="'fly_away'", valid=", ".join(sorted(NAMES))
    )
    english = "unknown tool 'fly_away'. Valid tools: " + ", ".join(sorted(NAMES)) + "."
    assert record.error.text() == str(record.error) == english


# --- the table -----------------------------------------------------------------------------------


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


PROGRAMMER_ONLY = {
    NoticeCode.NATIVE_TOOL_CALLS,
    NoticeCode.GENERATED_CALL_ID,
    NoticeCode.DUPLICATE_CALL_ID,
    NoticeCode.TOOL_CHOICE_ENFORCED,
    NoticeCode.CALLS_HELD,
    NoticeCode.USAGE_NOT_OBJECT,
    NoticeCode.USAGE_INVALID,
    NoticeCode.USAGE_ESTIMATED,
    NoticeCode.STOPPED_LIVE,
}


def test_every_notice_is_worded_in_every_language_with_the_english_values() -> None:
    # English words every value; another language may leave out an English detail (the
    # parser's reason for an unreadable reply)
    assert set(WORDING) == set(NoticeCode)
    for code, texts in WORDING.items():
        if code in PROGRAMMER_ONLY:  # a step's notices, never shown to the model
            assert len(texts) == 1, code
            continue
        assert len(texts) == len(LANGUAGES), code
        assert all(texts), code
        assert all(_fields(t) <= _fields(texts[0]) for t in texts), code
        assert not ASCII_WORD.findall(
            re.sub(r"\{\w+\}", "", texts[1]).replace("JSON", "")
        ) or code in (NoticeCode.CUT_PARAMETER, NoticeCode.OUTPUT), (code, texts[1])


def test_every_lossy_repair_has_a_chinese_reason() -> None:
    lossy = {r.code for r in REPAIRS.values() if not r.lossless}
    assert lossy <= set(WHAT_ZH), sorted(lossy - set(WHAT_ZH))
    assert set(WHAT_ZH) <= lossy


def test_a_note_keeps_its_code_through_copies_and_unknown_languages_read_english() -> None:
    import copy
    import pickle

    note = Notice(NoticeCode.TIMEOUT, tool="slow", seconds="0.05")
    for kept in (copy.deepcopy(note), pickle.loads(pickle.dumps(note))):
        assert isinstance(kept, Notice) and kept.code == NoticeCode.TIMEOUT
        assert kept.text("zh") == "slow 没有在 0.05 秒内完成"
    assert note.text("fr") == str(note) == "slow did not finish within 0.05s"


def test_a_stored_record_keeps_its_notice() -> None:
    _, _, record = run_case("no_approver", "zh")
    loaded = load_record(json.loads(json.dumps(dump_record(record))))
    assert (
        loaded.observation_code == NoticeCode.NO_APPROVER
        and loaded.observation == record.observation
    )
    assert loaded.error == record.error == Notice(NoticeCode.NO_APPROVER)


def test_a_traced_error_keeps_its_code_and_values() -> None:
    result, _, record = run_case("lossy", "zh")
    assert record.error is not None and record.error.code == NoticeCode.LOSSY
    trace = json.loads(json.dumps(result.trace()))
    (data,) = [a for s in trace if s["type"] == "step" for a in s["actions"] if a["error"]]
    assert data["error"]["code"] == "lossy"
    kept = Notice.load(data["error"])
    assert kept == record.error and kept.text("zh") == record.error.text("zh")
    unknown = dump_record(record) | {"error": {"code": "a_newer_code", "values": {}}}
    assert load_record(unknown).observation_code is None


def test_the_template_says_its_language() -> None:
    assert load_template("zh").language == "zh"
    assert load_template("classic").language == "en"
    assert TextReActProtocol(template="zh").language == "zh"
    chinese_labels = {
        "kind": "text",
        "system": "{tools} {tool_names}",
        "question": "{question}",
        "observation": "{observation}",
        "format_error": "{error}",
        "labels": {"thought": "想法", "action": "动作"},
    }
    assert parse_template(chinese_labels, name="mine").language == "zh"
    assert parse_template({**chinese_labels, "language": "en"}, name="mine").language == "en"
