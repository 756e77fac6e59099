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


def _table(*rows: tuple[str, str, bool, str]) -> dict[str, Repair]:
    out = {c: Repair(c, src, ok, what) for src, c, ok, what in rows}  # type: ignore[arg-type]
    assert len(out) == len(rows), "a code written twice"
    return out


OK: Final = True
GUESS: Final = False

REPAIRS: Final[dict[str, Repair]] = _table(
    # --- JSON (parsing/json_repair.py; reported as ``json:<code>`` inside replies) ----------
    ("json", "code_fence", OK, "the JSON was wrapped in a Markdown code fence"),
    ("json", "extracted_from_text", OK, "the JSON sat inside prose"),
    (
        "json",
        "extracted_fragment",
        GUESS,
        "the JSON taken from inside other text that is not JSON (which part is meant is a guess)",
    ),
    ("json", "bom", OK, "a byte-order mark before the JSON"),
    ("json", "doubled_braces", OK, "{{ }} written for { } (a template's escaping)"),
    ("json", "comment", OK, "a comment outside the strings"),
    ("json", "single_quotes", OK, "strings in single quotes"),
    ("json", "smart_quotes", OK, "strings in curly quotes"),
    (
        "json",
        "mixed_quotes",
        GUESS,
        "a string opened by a curly quote and closed by a straight one (where it ends is a guess)",
    ),
    ("json", "python_literal", OK, "True, False or None for true, false, null"),
    ("json", "unquoted_key", OK, "a key without quotes"),
    ("json", "trailing_comma", OK, "a comma before a closing bracket"),
    (
        "json",
        "fullwidth_delimiter",
        OK,
        "a full-width ： or ， between tokens, outside the strings (one meaning there)",
    ),
    ("json", "control_char_in_string", OK, "a raw newline or tab inside a string"),
    (
        "json",
        "missing_closing_bracket",
        OK,
        "only closing brackets missing, after a complete value (a reply cut by length: refused)",
    ),
    ("json", "extra_closing_bracket", OK, "closing brackets with nothing to close"),
    ("json", "extra_data", OK, "prose after the complete JSON value"),
    (
        "json",
        "number_format",
        GUESS,
        "a number JSON does not allow (+1, .5, 5., 007: is 9，00 nine, or 9 and 0?)",
    ),
    ("json", "unquoted_value", GUESS, "a text value without quotes (where it ends is a guess)"),
    ("json", "extra_comma", GUESS, "two commas in a row (a value may be missing)"),
    ("json", "missing_comma", GUESS, "two values with no comma between them"),
    ("json", "missing_colon", GUESS, "a key and its value with no colon between them"),
    ("json", "invalid_escape", GUESS, "a backslash JSON does not know (write a backslash as \\\\)"),
    (
        "json",
        "unescaped_quote",
        GUESS,
        'a quote inside a string that may or may not end it (write it as \\")',
    ),
    ("json", "missing_quote", GUESS, "a string that is never closed (cut off)"),
    ("json", "mismatched_bracket", GUESS, "a bracket closed by the wrong kind of bracket"),
    ("json", "bracket_in_comment", GUESS, "a comment runs to the end while brackets are open"),
    ("json", "extra_value", GUESS, "a second value after the first one"),
    (
        "json",
        "duplicate_key",
        GUESS,
        "a key written twice in one object with different values (which one was meant is a guess)",
    ),
    ("json", "truncated_after_comma", GUESS, "the text ends after a comma (cut off)"),
    ("json", "truncated_number", GUESS, "the text ends inside a number (cut off)"),
    # --- text ReAct (parsing/react.py, cut.py, labels.py, blobs.py) ---------------------------
    ("text", "cut_observation", OK, "an Observation the model invented was cut"),
    ("text", "cut_stop_word", OK, "text after a stop word was cut"),
    ("text", "trim_partial_stop", OK, "a partial stop word at the end was cut"),
    ("text", "special_token", OK, "a chat-template token at the end was dropped"),
    ("text", "think_block", OK, "a think block set aside as reasoning"),
    ("text", "unclosed_think", OK, "a think block never closed, read as reasoning"),
    ("text", "label_case", OK, "a label in another case"),
    ("text", "label_synonym", OK, "a label synonym"),
    ("text", "chinese_label", OK, "a Chinese label"),
    ("text", "fullwidth_colon", OK, "a label with a full-width colon"),
    ("text", "space_before_colon", OK, "a space before a label's colon"),
    ("text", "markdown_label", OK, "a label in Markdown"),
    ("text", "numbered_label", OK, "a numbered label"),
    ("text", "indented_label", OK, "an indented label"),
    ("text", "inline_label", OK, "a label inside a line"),
    ("text", "question_echo", OK, "the question echoed"),
    ("text", "unlabeled_thought", OK, "prose before the first label, kept as thought"),
    ("text", "bracket_action", OK, "tool[input]"),
    ("text", "paren_action", OK, "tool(key=value)"),
    ("text", "inline_input", OK, "tool {json} on one line"),
    ("text", "flat_arguments", OK, "a JSON action whose other keys are its arguments"),
    ("text", "decorated_tool_name", OK, "a tool name in Markdown or backticks"),
    ("text", "json_blob", OK, "the action written as a JSON object"),
    ("text", "tool_call_tag", OK, "the action in <tool_call> tags"),
    ("text", "final_as_action", OK, "the final answer written as an action"),
    ("text", "noop_action_dropped", OK, "an Action: None dropped"),
    ("text", "empty_action_dropped", OK, "an Action with no tool name dropped"),
    ("text", "unlabeled_action_input", OK, "JSON after the tool name with no label"),
    ("text", "missing_action_input", OK, "no Action Input: no arguments"),
    ("text", "empty_action_input", OK, "an empty Action Input: no arguments"),
    ("text", "input_before_action", OK, "the Action Input written just before its Action"),
    ("text", "input_after_empty_call", OK, "tool() then an Action Input: one call, that input"),
    ("text", "duplicate_input_dropped", OK, "the same arguments on the Action line and after"),
    ("text", "orphan_input_dropped", OK, "an Action Input with no Action dropped"),
    ("text", "fenced_json", OK, "the input in a code fence"),
    ("text", "backtick_input", OK, "the input in backticks"),
    ("text", "quoted_input", OK, "the input as one quoted string"),
    ("text", "unwrapped_array", OK, "[{...}] for the arguments object"),
    ("text", "json_string_arguments", OK, "the arguments object as a JSON string"),
    ("text", "action_input_not_object", OK, "JSON that is not an object, kept as text"),
    ("text", "text_after_input", OK, "prose after a delimited input"),
    ("text", "implicit_final_answer", OK, "a reply with no label taken as the answer"),
    ("text", "first_action_only", OK, "only the first action kept"),
    ("text", "action_after_final_dropped", OK, "an action after the final answer dropped"),
    ("text", "final_after_action_dropped", OK, "a final answer after an action dropped"),
    ("text", "text_after_final_dropped", OK, "text after the final answer dropped"),
    ("text", "empty_final_dropped", OK, "an empty final answer dropped"),
    ("text", "chat_prefix", OK, "a chat role (AI:) before the JSON action"),
    ("text", "deepseek_tokens", OK, "the action in DeepSeek's tool-call tokens"),
    ("text", "xml_action_tags", OK, "the action in XML tags (<action>, <tool_name>)"),
    ("text", "blob_in_prose", OK, "the JSON action inside a sentence"),
    ("text", "tool_name_junk", OK, "template tokens after the tool name (name<|channel|>...)"),
    ("text", "tool_name_style", OK, "the tool name in another case or style (GetWeather)"),
    ("text", "wrapped_input", OK, "the input in a class call (ToolInput(query=...))"),
    ("text", "unclosed_bracket", GUESS, "tool[input with no closing bracket (cut off)"),
    ("text", "ignored_text", GUESS, "text after the tool name that may be its input"),
    (
        "text",
        "repeated_action_input",
        GUESS,
        "a second Action Input for one Action (which one is meant is a guess)",
    ),
    (
        "text",
        "ambiguous_action_input",
        GUESS,
        "different arguments on the Action line and in the Action Input",
    ),
    (
        "text",
        "action_input_not_json",
        GUESS,
        "input that starts like JSON but is cut off or broken",
    ),
    # --- calls written as text (parsing/salvage/) ------------------------------------------
    ("salvage", "salvaged:react_text", OK, "a Thought/Action block under function calling"),
    (
        "salvage",
        "loose_arguments",
        GUESS,
        "arguments read out of a call object that is not JSON",
    ),
    # --- the protocols ------------------------------------------------------------------------
    ("protocol", "empty_arguments", OK, "empty arguments: no arguments"),
    ("protocol", "double_encoded_arguments", OK, "the arguments object as a JSON string"),
    ("protocol", "action_blob", OK, '{"action": tool, "action_input": ...}'),
    ("protocol", "flat_step", OK, '{"tool": ..., "arguments": ...} with no "action"'),
    ("protocol", "missing_arguments", OK, "no arguments key: no arguments"),
    ("protocol", "arguments_key", OK, "the arguments under another key"),
    ("protocol", "arguments_as_string", OK, "the arguments object as a JSON string"),
    ("protocol", "null_arguments", OK, "null arguments: no arguments"),
    ("protocol", "cut_by_length", GUESS, "the reply was cut by the length limit"),
    # --- the policy (policy.py, parsing/arguments.py) ---------------------------------------
    (
        "policy",
        "bare_input_to_parameter",
        OK,
        "a text input given to the tool's one required parameter, as written",
    ),
    ("policy", "key_value_arguments", OK, "key: value pairs naming the tool's parameters"),
    ("policy", "answer_labels", OK, "ReAct labels taken off a final answer"),
    ("policy", "unlabeled_answer", OK, "a plain reply, after a reminder, taken as the answer"),
)
"""Every repair code any reader reports (``register_format`` adds ``salvaged:FORMAT``)."""


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
"""The lossy repairs' :attr:`Repair.what` in Chinese (every lossy code has one: tested)."""


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
