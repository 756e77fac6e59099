"""Which repairs recover what the model wrote, and which guess: the one table.

Each code a reader reports is **lossless** (the value written is recovered exactly) or
**lossy** (a value had to be guessed); a code missing from the table counts as lossy, and a
``json:`` code as its JSON code. A call read with a lossy repair never runs
(:func:`react_engine.protocols.policy.apply`). ``docs/reliability.md`` shows the table,
checked by ``tests/parsing/test_lossless.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from ..wording import Notice, NoticeCode

__all__ = ["REPAIRS", "Repair", "is_lossy", "lossy_repairs", "refusal"]


@dataclass(frozen=True, slots=True)
class Repair:
    """One repair code: where it comes from, whether it is lossless, what it means."""

    code: str
    source: Literal["json", "text", "salvage", "protocol"]
    lossless: bool
    what: str
    """What the reader saw, as a clause a model can act on (used in refusals)."""


_WHAT: Final[dict[str, dict[str, str]]] = {
    # JSON (parsing/json_repair.py; reported as ``json:<code>`` inside replies)
    "json": {
        "code_fence": "the JSON was wrapped in a Markdown code fence",
        "extracted_from_text": "the JSON sat inside prose",
        "extracted_fragment": "the JSON taken from inside other text that is not JSON (which part"
        " is meant is a guess)",
        "bom": "a byte-order mark before the JSON",
        "doubled_braces": "{{ }} written for { } (a template's escaping)",
        "comment": "a comment outside the strings",
        "single_quotes": "strings in single quotes",
        "smart_quotes": "strings in curly quotes",
        "mixed_quotes": "a string opened by a curly quote and closed by a straight one (where it"
        " ends is a guess)",
        "python_literal": "True, False or None for true, false, null",
        "unquoted_key": "a key without quotes",
        "trailing_comma": "a comma before a closing bracket",
        "fullwidth_delimiter": "a full-width ： or ， between tokens, outside the strings (one"
        " meaning there)",
        "control_char_in_string": "a raw newline or tab inside a string",
        "missing_closing_bracket": "only closing brackets missing, after a complete value (a reply"
        " cut by length: refused)",
        "extra_closing_bracket": "closing brackets with nothing to close",
        "extra_data": "prose after the complete JSON value",
        "number_format": "a number JSON does not allow (+1, .5, 5., 007: is 9，00 nine, or 9 and"
        " 0?)",
        "unquoted_value": "a text value without quotes (where it ends is a guess)",
        "extra_comma": "two commas in a row (a value may be missing)",
        "missing_comma": "two values with no comma between them",
        "missing_colon": "a key and its value with no colon between them",
        "invalid_escape": "a backslash JSON does not know (write a backslash as \\\\)",
        "unescaped_quote": 'a quote inside a string that may or may not end it (write it as \\")',
        "missing_quote": "a string that is never closed (cut off)",
        "mismatched_bracket": "a bracket closed by the wrong kind of bracket",
        "bracket_in_comment": "a comment runs to the end while brackets are open",
        "extra_value": "a second value after the first one",
        "duplicate_key": "a key written twice in one object with different values (which one was"
        " meant is a guess)",
        "truncated_after_comma": "the text ends after a comma (cut off)",
        "truncated_number": "the text ends inside a number (cut off)",
    },
    # text ReAct (parsing/react.py, cut.py, labels.py, blobs.py)
    "text": {
        "cut_observation": "an Observation the model invented was cut",
        "cut_stop_word": "text after a stop word was cut",
        "trim_partial_stop": "a partial stop word at the end was cut",
        "special_token": "a chat-template token at the end was dropped",
        "think_block": "a think block set aside as reasoning",
        "unclosed_think": "a think block never closed, read as reasoning",
        "label_case": "a label in another case",
        "label_synonym": "a label synonym",
        "chinese_label": "a Chinese label",
        "fullwidth_colon": "a label with a full-width colon",
        "space_before_colon": "a space before a label's colon",
        "markdown_label": "a label in Markdown",
        "numbered_label": "a numbered label",
        "indented_label": "an indented label",
        "inline_label": "a label inside a line",
        "question_echo": "the question echoed",
        "unlabeled_thought": "prose before the first label, kept as thought",
        "bracket_action": "tool[input]",
        "paren_action": "tool(key=value)",
        "inline_input": "tool {json} on one line",
        "flat_arguments": "a JSON action whose other keys are its arguments",
        "decorated_tool_name": "a tool name in Markdown or backticks",
        "json_blob": "the action written as a JSON object",
        "tool_call_tag": "the action in <tool_call> tags",
        "final_as_action": "the final answer written as an action",
        "noop_action_dropped": "an Action: None dropped",
        "empty_action_dropped": "an Action with no tool name dropped",
        "unlabeled_action_input": "JSON after the tool name with no label",
        "missing_action_input": "no Action Input: no arguments",
        "empty_action_input": "an empty Action Input: no arguments",
        "input_before_action": "the Action Input written just before its Action",
        "input_after_empty_call": "tool() then an Action Input: one call, that input",
        "duplicate_input_dropped": "the same arguments on the Action line and after",
        "orphan_input_dropped": "an Action Input with no Action dropped",
        "fenced_json": "the input in a code fence",
        "backtick_input": "the input in backticks",
        "quoted_input": "the input as one quoted string",
        "unwrapped_array": "[{...}] for the arguments object",
        "json_string_arguments": "the arguments object as a JSON string",
        "action_input_not_object": "JSON that is not an object, kept as text",
        "text_after_input": "prose after a delimited input",
        "implicit_final_answer": "a reply with no label taken as the answer",
        "first_action_only": "only the first action kept",
        "action_after_final_dropped": "an action after the final answer dropped",
        "final_after_action_dropped": "a final answer after an action dropped",
        "text_after_final_dropped": "text after the final answer dropped",
        "empty_final_dropped": "an empty final answer dropped",
        "chat_prefix": "a chat role (AI:) before the JSON action",
        "deepseek_tokens": "the action in DeepSeek's tool-call tokens",
        "xml_action_tags": "the action in XML tags (<action>, <tool_name>)",
        "blob_in_prose": "the JSON action inside a sentence",
        "tool_name_junk": "template tokens after the tool name (name<|channel|>...)",
        "tool_name_style": "the tool name in another case or style (GetWeather)",
        "wrapped_input": "the input in a class call (ToolInput(query=...))",
        "unclosed_bracket": "tool[input with no closing bracket (cut off)",
        "ignored_text": "text after the tool name that may be its input",
        "repeated_action_input": "a second Action Input for one Action (which one is meant is a"
        " guess)",
        "ambiguous_action_input": "different arguments on the Action line and in the Action Input",
        "action_input_not_json": "input that starts like JSON but is cut off or broken",
    },
    # calls written as text (parsing/salvage/)
    "salvage": {
        "salvaged:react_text": "a Thought/Action block under function calling",
        "loose_arguments": "arguments read out of a call object that is not JSON",
    },
    # the protocols
    "protocol": {
        "empty_arguments": "empty arguments: no arguments",
        "double_encoded_arguments": "the arguments object as a JSON string",
        "action_blob": '{"action": tool, "action_input": ...}',
        "flat_step": '{"tool": ..., "arguments": ...} with no "action"',
        "missing_arguments": "no arguments key: no arguments",
        "arguments_key": "the arguments under another key",
        "arguments_as_string": "the arguments object as a JSON string",
        "null_arguments": "null arguments: no arguments",
        "cut_by_length": "the reply was cut by the length limit",
    },
    # the policy (policy.py, parsing/arguments.py)
    "policy": {
        "bare_input_to_parameter": "a text input given to the tool's one required parameter, as"
        " written",
        "key_value_arguments": "key: value pairs naming the tool's parameters",
        "answer_labels": "ReAct labels taken off a final answer",
        "unlabeled_answer": "a plain reply, after a reminder, taken as the answer",
    },
}
"""What each repair code means, by source (the ``json`` codes as reported inside replies
as ``json:<code>``)."""

WHAT_ZH: Final[Mapping[str, str]] = {
    "extracted_fragment": "JSON 是从其他不是 JSON 的文字中间取出来的（取哪一部分是猜测）",
    "mixed_quotes": "一个字符串以弯引号开始、以直引号结束（它在哪里结束是猜测）",
    "number_format": "JSON 不允许的数字写法（+1、.5、5.、007：9，00 是九，还是 9 和 0？）",
    "unquoted_value": "一个没有引号的文本值（它在哪里结束是猜测）",
    "extra_comma": "连续两个逗号（可能少了一个值）",
    "missing_comma": "两个值之间没有逗号",
    "missing_colon": "键和值之间没有冒号",
    "invalid_escape": "JSON 不认识的反斜杠（反斜杠要写成 \\\\）",
    "unescaped_quote": '字符串里的一个引号，可能是字符串的结尾，也可能不是（请写成 \\"）',
    "missing_quote": "一个没有闭合的字符串（被截断）",
    "mismatched_bracket": "括号被另一种括号闭合",
    "bracket_in_comment": "括号还没闭合，注释就一直延续到了结尾",
    "extra_value": "第一个值之后还有第二个值",
    "truncated_after_comma": "文字在一个逗号之后结束（被截断）",
    "truncated_number": "文字在一个数字中间结束（被截断）",
    "unclosed_bracket": "tool[input 没有右括号（被截断）",
    "ignored_text": "工具名后面的文字，可能是它的输入",
    "repeated_action_input": "一个行动有两个行动输入（哪一个才是想要的是猜测）",
    "ambiguous_action_input": "行动那一行和行动输入里的参数不同",
    "action_input_not_json": "输入看起来像 JSON，但被截断或有误",
    "loose_arguments": "参数是从一个不是 JSON 的调用对象里读出来的",
    "duplicate_key": "同一个对象里一个键写了两次，值不同（哪一个才是想要的是猜测）",
    "cut_by_length": "回复被长度上限截断了",
}
"""The lossy repairs, with their :attr:`Repair.what` in Chinese: a code is lossy exactly
when it stands here."""

REPAIRS: Final[dict[str, Repair]] = {
    code: Repair(code, source, code not in WHAT_ZH, what)  # type: ignore[arg-type]
    for source, rows in _WHAT.items()
    for code, what in rows.items()
}
"""Every repair code any reader reports (``register_format`` adds ``salvaged:FORMAT``)."""
assert len(REPAIRS) == sum(map(len, _WHAT.values())), "a code written twice"


def _entry(code: str) -> Repair | None:
    return REPAIRS.get(code.removeprefix("json:"))


def is_lossy(code: str) -> bool:
    """Whether ``code`` means a value had to be guessed (unknown codes: yes)."""
    entry = _entry(code)
    return entry is None or not entry.lossless


def lossy_repairs(codes: Iterable[str]) -> list[str]:
    """The lossy codes among ``codes``, in order, once each."""
    return [c for c in dict.fromkeys(codes) if is_lossy(c)]


def refusal(lossy: Iterable[str]) -> Notice:
    """Why a call read with the ``lossy`` repairs was not run, a clause for the model in
    English and Chinese."""
    reasons: list[tuple[str, str]] = []
    for code in lossy:
        entry = _entry(code)
        if entry is not None:
            reason = (entry.what, WHAT_ZH.get(entry.code, entry.what))
        else:
            reason = (
                f"a repair the engine cannot vouch for ({code})",
                f"引擎无法担保的修复（{code}）",
            )
        if reason not in reasons:
            reasons.append(reason)
    return Notice(
        NoticeCode.LOSSY,
        reasons=("; ".join(en for en, _ in reasons), "；".join(zh for _, zh in reasons)),
    )
