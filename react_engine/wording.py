"""The engine's own words to the model: one :class:`Notice` each, worded per language.

A notice is a stable code (:class:`NoticeCode`) and its values, kept as such in records,
traces and stores; :data:`WORDING` words it in the prompt template's language (English,
or Chinese under ``zh``). What a tool or a library wrote is a value, kept as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeAlias

__all__ = [
    "LANGUAGES",
    "WORDING",
    "Notice",
    "NoticeCode",
    "error_observation",
    "skipped_observation",
    "word",
]


class NoticeCode(StrEnum):
    """The code of a notice: what the engine itself tells the model."""

    # --- a reply refused whole (a format error)
    UNLABELED = "unlabeled"
    EMPTY = "empty"
    ONLY_REASONING = "only_reasoning"
    NO_STEP = "no_step"
    UNREADABLE = "unreadable"
    WRITTEN_CALL = "written_call"
    TOOL_NONE = "tool_none"
    TOOL_NAMED = "tool_named"
    TOOL_REQUIRED = "tool_required"
    OUTPUT = "output"
    NOT_ACTION = "not_action"

    # --- refused before running: the model wrote something that cannot run as written
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    PLAIN_TEXT_ARGUMENTS = "plain_text_arguments"
    NOT_AN_OBJECT = "not_an_object"
    INVALID_JSON = "invalid_json"
    NOT_JSON = "not_json"
    CUT_OFF = "cut_off"
    CUT_PARAMETER = "cut_parameter"
    UNCLOSED = "unclosed"
    LOSSY = "lossy"
    TOO_DEEP = "too_deep"
    AMBIGUOUS_PAIRS = "ambiguous_pairs"
    AMBIGUOUS_INPUT = "ambiguous_input"
    FINAL_ALONE = "final_alone"
    REPLY_TOO_LONG = "reply_too_long"
    REPLY_TOO_MANY_CALLS = "reply_too_many_calls"
    # --- held back: the call may be made again in a later step
    BLIND = "blind"
    ONE_PER_REPLY = "one_per_reply"
    AFTER_CHANGE = "after_change"
    ONE_CHANGE = "one_change"
    TOO_MANY = "too_many"
    BUDGET_SPENT = "budget_spent"
    AWAITING_APPROVAL = "awaiting_approval"
    NOT_RUN_AGAIN = "not_run_again"
    GIVEN_AGAIN = "given_again"
    REPEAT_WARNING = "repeat_warning"
    # --- approval
    NOT_APPROVED = "not_approved"
    NO_APPROVER = "no_approver"
    DEFER_NEEDS_STORE = "defer_needs_store"
    APPROVAL_TOO_LATE = "approval_too_late"
    APPROVAL_TIMED_OUT = "approval_timed_out"
    APPROVAL_UNASKED = "approval_unasked"
    APPROVAL_FAILED = "approval_failed"
    # --- running
    DEADLINE_BEFORE_CALL = "deadline_before_call"
    TIMEOUT = "timeout"
    TIMEOUT_STILL_RUNNING = "timeout_still_running"
    NEVER_STARTED = "never_started"
    NO_THREAD = "no_thread"
    TOOL_FAILED = "tool_failed"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"
    MAYBE_RAN = "maybe_ran"
    # --- about a reply, for the programmer (a step's notices, not shown to the model)
    NATIVE_TOOL_CALLS = "native_tool_calls"
    GENERATED_CALL_ID = "generated_call_id"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    TOOL_CHOICE_ENFORCED = "tool_choice_enforced"
    CALLS_HELD = "calls_held"
    USAGE_NOT_OBJECT = "usage_not_object"
    USAGE_INVALID = "usage_invalid"
    USAGE_ESTIMATED = "usage_estimated"
    STOPPED_LIVE = "stopped_live"


LANGUAGES: Final = ("en", "zh")
"""The languages :data:`WORDING` has, English first (the fallback)."""

_AGAIN_EN = "call it again in your next step if you still need it"
_AGAIN_ZH = "如果仍然需要，请在下一步再次调用它"

WORDING: Final[dict[NoticeCode, tuple[str, ...]]] = {
    # code: (English, Chinese); ``{name}`` fields are the notice's values
    NoticeCode.UNLABELED: (
        "the reply has no label: if it is your final answer, write '{label}:' before it; to "
        "use a tool, write an action",
        "回复没有任何标签：如果这是最终答案，请在答案前写“最终答案：”；如果要使用工具，请写出行动和行动输入",
    ),
    NoticeCode.EMPTY: ("the reply is empty", "回复是空的"),
    NoticeCode.ONLY_REASONING: (
        "the reply is only reasoning, with no action or final answer after it",
        "回复只有推理过程，后面没有行动或最终答案",
    ),
    NoticeCode.NO_STEP: (
        "the reply has neither an Action nor a Final Answer",
        "回复里既没有行动，也没有最终答案",
    ),
    NoticeCode.UNREADABLE: (
        "{reason} (line {line}, column {column}; expected {expected})",
        "第 {line} 行第 {column} 列的内容不符合格式",
    ),
    NoticeCode.WRITTEN_CALL: (
        "it is a tool call written as text, and no tool can run now: using only the results "
        "you already have, write your final answer in words",
        "这是一个写成文字的工具调用，而现在不能再使用工具：请只根据已有的观察结果，用文字写出最终答案",
    ),
    NoticeCode.TOOL_NONE: (
        "no tool may be used for this question: write the final answer",
        "这个问题不能使用工具：请直接写出最终答案",
    ),
    NoticeCode.TOOL_NAMED: (
        "only {tool} may be called now, not {wrong}: call {tool}",
        "现在只能调用 {tool}，不能调用 {wrong}：请调用 {tool}",
    ),
    NoticeCode.TOOL_REQUIRED: (
        "a tool must be used before the final answer: call {tools}",
        "给出最终答案之前必须先使用工具（{tools}）",
    ),
    NoticeCode.OUTPUT: (
        "{detail}; {retry}",
        "最终答案不符合要求的 JSON Schema（{detail}）；{retry}",
    ),
    NoticeCode.NOT_ACTION: (
        "the tool call in it was not run, because it is {reason}; to use a tool now, write "
        "the call alone, and to answer, write the answer without a tool call",
        "回复里的工具调用没有执行，因为它不是现在要做的行动（写在你自己写的观察或最终答案之后，或写成"
        "示例、说明、拒绝、条件或引用）：要使用工具，请只写这个调用；要回答，请写出不含工具调用的答案",
    ),
    NoticeCode.UNKNOWN_TOOL: (
        "unknown tool {tool}. Valid tools: {valid}.",
        "没有名为 {tool} 的工具。可用的工具：{valid}。",
    ),
    NoticeCode.INVALID_ARGUMENTS: (
        "invalid arguments for {tool}: {detail}",
        "{tool} 的参数无效：{detail}",
    ),
    NoticeCode.PLAIN_TEXT_ARGUMENTS: (
        "arguments for {tool} must be a JSON object with the fields {fields}; got the plain "
        "text {text}",
        "{tool} 的参数必须是一个含有字段 {fields} 的 JSON 对象；收到的却是纯文本 {text}",
    ),
    NoticeCode.NOT_AN_OBJECT: (
        "the arguments must be a JSON object, not {kind}",
        "参数必须是一个 JSON 对象，而不是 {kind}",
    ),
    NoticeCode.INVALID_JSON: (
        "the arguments are not valid JSON ({detail})",
        "参数不是有效的 JSON（{detail}）",
    ),
    NoticeCode.NOT_JSON: (
        "the Action Input is not valid JSON and could not be repaired (it is cut off, broken "
        "or nested too deeply), so the action was not run; write it again as one complete "
        "JSON object",
        "行动输入不是有效的 JSON，也无法修复（被截断、格式有误或嵌套过深），因此没有执行这个"
        "行动；请把它重新写成一个完整的 JSON 对象",
    ),
    NoticeCode.CUT_OFF: (
        "the reply was cut off by the length limit (max_tokens) inside this call's arguments, "
        "so the call was not run; call the tool again with complete arguments",
        "回复在这个调用的参数中间被长度上限截断了，因此没有执行这个调用；请用完整的参数再次调用该工具",
    ),
    NoticeCode.CUT_PARAMETER: (
        "the reply ends inside this call's last <parameter> (it is never closed), so the value "
        "may be cut off and the call was not run; call the tool again with complete arguments",
        "回复在这个调用的最后一个 <parameter> 中结束（它没有闭合），值可能被截断了，因此没有"
        "执行这个调用；请用完整的参数再次调用该工具",
    ),
    NoticeCode.UNCLOSED: (
        "this call's opening tag is never closed (its closing tag is missing), so the call "
        "was not run; write the call again, closed, if you mean to make it",
        "这个调用的开始标签没有闭合（缺少结束标签），因此没有执行这个调用；如果要调用，请把它完整地再写一次",
    ),
    NoticeCode.LOSSY: (
        "the arguments could not be read exactly as written, so the call was not run: "
        "{reasons}. Call the tool again with the arguments as one complete, valid JSON object",
        "参数无法按原样准确读取，因此没有执行这个调用：{reasons}。请把参数写成一个完整、有效的 "
        "JSON 对象，再次调用该工具",
    ),
    NoticeCode.TOO_DEEP: (
        "the arguments are nested deeper than {depth} levels, so the call was not run; send "
        "flatter arguments",
        "参数的嵌套超过了 {depth} 层，因此没有执行这个调用；请发送层次更少的参数",
    ),
    NoticeCode.AMBIGUOUS_PAIRS: (
        "the input names some of the tool's parameters as 'key: value' but cannot be read as "
        "such pairs without guessing, so the action was not run; write the arguments as a "
        "JSON object",
        "输入里用“键: 值”的形式写了工具的部分参数，但不猜测就无法把它读成这样的键值对，因此"
        "没有执行这个行动；请把参数写成一个 JSON 对象",
    ),
    NoticeCode.AMBIGUOUS_INPUT: (
        "the Action gives {tool} two different sets of arguments (one on the Action line, one "
        "as the Action Input), so the action was not run; write the Action with one Action "
        "Input",
        "这个行动给了 {tool} 两组不同的参数（一组在行动那一行，一组在行动输入里），因此没有"
        "执行这个行动；请只写一个行动输入",
    ),
    NoticeCode.FINAL_ALONE: (
        "{tool} gives the final answer and must be called alone, after the results of the "
        "other calls are in; it was not run: call it again, alone, once you have them",
        "{tool} 用来给出最终答案，必须在其他调用的结果都回来之后单独调用；这次没有执行它：拿到"
        "结果后请单独再调用一次",
    ),
    NoticeCode.BLIND: (
        "{tool} was not run: its arguments hold the placeholder {placeholder}, not a value, "
        "and the calls before it in your reply had not run yet; call {tool} again in your "
        "next step with the real value",
        "{tool} 没有执行：它的参数里是占位符 {placeholder}，不是真实的值，而你回复中在它之前"
        "的调用当时还没有执行；请在下一步用真实的值再次调用 {tool}",
    ),
    NoticeCode.ONE_PER_REPLY: (
        "{tool} was not run: one call runs per reply (multi_action='first'); " + _AGAIN_EN,
        "{tool} 没有执行：每次回复只执行一个调用；" + _AGAIN_ZH,
    ),
    NoticeCode.AFTER_CHANGE: (
        "{tool} was not run: it came after {changing}, which may change what it reads, and "
        "would have run at the same time; " + _AGAIN_EN,
        "{tool} 没有执行：它写在 {changing} 之后，而 {changing} 可能改变它要读取的内容，两者"
        "又会同时执行；" + _AGAIN_ZH,
    ),
    NoticeCode.ONE_CHANGE: (
        "{tool} was not run: it is not read-only, and only one such call runs per reply "
        "({changing} came first); " + _AGAIN_EN,
        "{tool} 没有执行：它不是只读的工具，而每次回复只执行一个这样的调用（{changing} 在前）；"
        + _AGAIN_ZH,
    ),
    NoticeCode.TOO_MANY: (
        "the reply made {count} tool calls and at most {limit} run per reply; call it again "
        "in a later step if you still need it",
        "这次回复有 {count} 个工具调用，而每次回复最多执行 {limit} 个；如果仍然需要，请在后面的"
        "步骤中再次调用它",
    ),
    NoticeCode.REPLY_TOO_LONG: (
        "the reply is {count} characters; at most {limit} are read: write a shorter reply",
        "这次回复有 {count} 个字符；最多只读取 {limit} 个：请写一个更短的回复",
    ),
    NoticeCode.REPLY_TOO_MANY_CALLS: (
        "the reply makes more than {limit} tool calls; at most {limit} are read: make fewer "
        "calls per reply",
        "这次回复的工具调用超过 {limit} 个；最多只读取 {limit} 个：请每次回复少调用一些工具",
    ),
    NoticeCode.BUDGET_SPENT: (
        "the run's tool-call budget is spent: give your final answer now",
        "本次运行的工具调用次数已经用完：请现在给出最终答案",
    ),
    NoticeCode.AWAITING_APPROVAL: ("awaiting approval", "正在等待批准"),
    NoticeCode.NOT_RUN_AGAIN: (
        "Not run again: {tool} was already called {times} times with these arguments. Give "
        "your final answer now.",
        "没有再次执行：已经用这些参数调用过 {tool} {times} 次了。请现在给出最终答案。",
    ),
    NoticeCode.GIVEN_AGAIN: (
        "repeated call: given the earlier identical call's result",
        "重复的调用：给出的是之前相同调用的结果",
    ),
    NoticeCode.REPEAT_WARNING: (
        "[Warning: you have called {tool} with these same arguments {times} times. Do not "
        "repeat it: use what you have or give your final answer.]",
        "[警告：你已经用同样的参数调用了 {tool} {times} 次。不要再重复：请使用已有的结果，"
        "或者给出最终答案。]",
    ),
    NoticeCode.NOT_APPROVED: ("the user did not approve this call", "用户没有批准这个调用"),
    NoticeCode.NO_APPROVER: (
        "this tool needs approval and no approver is configured",
        "这个工具需要批准，但没有设置批准者",
    ),
    NoticeCode.DEFER_NEEDS_STORE: (
        "the approval was deferred, and a deferred approval needs a store (Agent(store=...)) "
        "to be given later, so this call was not run",
        "批准被推迟了，而推迟的批准需要一个存储才能在之后给出，因此没有执行这个调用",
    ),
    NoticeCode.APPROVAL_TOO_LATE: (
        "the run's deadline passed before the approval was asked",
        "还没来得及请求批准，本次运行的截止时间就已经过了",
    ),
    NoticeCode.APPROVAL_TIMED_OUT: (
        "the approval did not come before the run's deadline, so this call was not run",
        "在本次运行的截止时间之前没有得到批准，因此没有执行这个调用",
    ),
    NoticeCode.APPROVAL_UNASKED: (
        "the approval could not be asked: {detail}",
        "无法请求批准：{detail}",
    ),
    NoticeCode.APPROVAL_FAILED: (
        "the approval check failed ({kind}), so this call was not run",
        "批准检查出错了（{kind}），因此没有执行这个调用",
    ),
    NoticeCode.DEADLINE_BEFORE_CALL: (
        "the run's deadline passed before this call could start",
        "这个调用还没开始，本次运行的截止时间就已经过了",
    ),
    NoticeCode.TIMEOUT: (
        "{tool} did not finish within {seconds}s",
        "{tool} 没有在 {seconds} 秒内完成",
    ),
    NoticeCode.TIMEOUT_STILL_RUNNING: (
        "{tool} did not finish within {seconds}s (it is still running on its thread: a sync "
        "function cannot be stopped)",
        "{tool} 没有在 {seconds} 秒内完成（它仍在自己的线程上运行：同步函数无法被停止）",
    ),
    NoticeCode.NEVER_STARTED: (
        "{tool} did not start within {seconds}s: every worker thread for sync tools was busy "
        "({stuck} stuck past their timeout), so it never ran",
        "{tool} 没有在 {seconds} 秒内开始：运行同步工具的工作线程都在忙（{stuck} 个超时后仍未"
        "结束），因此它根本没有运行",
    ),
    NoticeCode.NO_THREAD: (
        "{tool} was not run: {detail}; sync tools will run again once some of them end",
        "{tool} 没有执行：{detail}；等其中一些结束后，同步工具就能再次运行",
    ),
    NoticeCode.TOOL_FAILED: ("{tool} failed: {error}", "{tool} 执行失败：{error}"),
    NoticeCode.INTERRUPTED: (
        "{tool} was interrupted: the run was cancelled",
        "{tool} 被中断了：本次运行已被取消",
    ),
    NoticeCode.ABORTED: (
        "{tool} raised {kind}: the run was aborted",
        "{tool} 抛出了 {kind}：本次运行已中止",
    ),
    NoticeCode.MAYBE_RAN: (
        "the process running this call stopped while it ran: it may or may not have happened "
        "(check before calling it again)",
        "运行这个调用的进程在调用过程中停止了：它可能执行了，也可能没有（再次调用之前请先确认）",
    ),
    # said to the programmer (a step's notices), never to the model: in English only
    NoticeCode.NATIVE_TOOL_CALLS: ("native_tool_calls",),
    NoticeCode.GENERATED_CALL_ID: ("generated_call_id",),
    NoticeCode.DUPLICATE_CALL_ID: ("duplicate_call_id",),
    NoticeCode.TOOL_CHOICE_ENFORCED: ("tool_choice_enforced",),
    NoticeCode.CALLS_HELD: (
        "{count} tool calls in one reply (multi_action={mode}): {ran} may run; not run: {held}",
    ),
    NoticeCode.USAGE_NOT_OBJECT: ("the reply's usage was not an object, ignored: {value}",),
    NoticeCode.USAGE_INVALID: ("the reply's usage had invalid counts, read as 0: {counts}",),
    NoticeCode.USAGE_ESTIMATED: (
        "usage estimated: the stream ended without the server's usage; {chunks} completion "
        "tokens counted as chunks received, {prompt} prompt tokens estimated from its length",
    ),
    NoticeCode.STOPPED_LIVE: (
        "stopped_live: the server kept writing past the stop sequence {stop}; the reply was "
        "cut there and the stream closed",
    ),
}
"""Every notice in the languages of :data:`LANGUAGES` (English alone for the programmer's)."""

Value: TypeAlias = str | tuple[str, str]
"""A notice's value: a text as written, or its wording in each of :data:`LANGUAGES`."""


@dataclass(frozen=True, slots=True, init=False)
class Notice:
    """What the engine tells the model: a code and its values, worded by :meth:`text`. A
    value is a text kept as written, or a tuple of its wordings in :data:`LANGUAGES`. In
    JSON it is ``{"code": ..., "values": {...}}`` (:meth:`load` reads it back)."""

    code: NoticeCode
    values: dict[str, Value]

    def __init__(self, code: NoticeCode, /, **values: Value) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "values", values)

    def text(self, language: str = "en") -> str:
        """This notice in ``language`` (English when the table has no such language)."""
        texts = WORDING[self.code]
        index = _index(language, texts)
        flat = {k: v[index] if isinstance(v, tuple) else v for k, v in self.values.items()}
        return texts[index].format(**flat)

    __str__ = text

    @classmethod
    def load(cls, data: object) -> Notice | None:
        """A notice from its JSON form; ``None`` for anything else (a newer writer's code)."""
        if not isinstance(data, dict) or data.get("code") not in _CODES:
            return None
        values = (data.get("values") or {}).items()
        kept = {str(k): tuple(v) if isinstance(v, list) else str(v) for k, v in values}
        return cls(NoticeCode(data["code"]), **kept)


_CODES: Final = frozenset(NoticeCode)


def word(message: Notice | str, language: str) -> str:
    """``message`` in ``language`` when it is a :class:`Notice`; any other text as it is."""
    return message.text(language) if isinstance(message, Notice) else message


def _index(language: str, texts: tuple[str, ...]) -> int:
    return LANGUAGES.index(language) if language in LANGUAGES[: len(texts)] else 0


def error_observation(message: Notice, language: str = "en") -> str:
    """What the model reads for a call that failed or was refused: ``Error: ...``."""
    frames = ("Error: {}", "错误：{}")
    return frames[_index(language, frames)].format(message.text(language))


def skipped_observation(why: Notice, language: str = "en") -> str:
    """What the model reads for a call held back: ``Skipped: ....``."""
    frames = ("Skipped: {}.", "未执行：{}。")
    return frames[_index(language, frames)].format(why.text(language))
