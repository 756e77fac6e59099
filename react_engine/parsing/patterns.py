"""Every regular expression the text parsers use, compiled once, one comment each.

Rules that keep the parsers linear: no nested quantifiers, no alternation whose branches
can match the same text twice; a *searched* pattern starts with an anchor or a literal
(unbounded runs only after it); only patterns used with ``match(text, pos)`` may start with
a run. :data:`LABEL` is built from :data:`LABEL_WORDS`, so the two never disagree.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# --- label words ---------------------------------------------------------------------------

THOUGHT: Final = "thought"
ACTION: Final = "action"
ACTION_INPUT: Final = "action_input"
OBSERVATION: Final = "observation"
FINAL: Final = "final"
QUESTION: Final = "question"

STRONG: Final = 0
"""A label that always starts a section (outside fences and final answers)."""
WEAK: Final = 1
"""A label honoured only where expected (an input word after an Action, an answer word
before any final answer)."""

# Spelling as written in the pattern (spaces stand for "space, underscore, hyphen or
# nothing"), per kind and strength. The first word of a kind is its canonical spelling.
_WORDS: Final[tuple[tuple[str, str, int], ...]] = tuple(
    (word, kind, strength)
    for kind, strength, words in (
        (
            THOUGHT,
            STRONG,
            "Thought|Thoughts|Thinking|Think|Reasoning|思考过程|思考|想法|思路|推理|思维",
        ),
        (ACTION, STRONG, "Action|Actions|行动|动作|操作|工具调用"),
        (
            ACTION_INPUT,
            STRONG,
            "Action Input|Action Inputs|Action Args|Action Arguments|Action Parameters"
            "|行动输入|动作输入|操作输入|行动参数|动作参数|工具输入",
        ),
        (ACTION_INPUT, WEAK, "Tool Input|Input|Inputs|Arguments|Args|Parameters|Params|输入|参数"),
        # observation (only ever a cut point)
        (OBSERVATION, STRONG, "Observation|Observations|Obs|Tool Output|Tool Result"),
        (OBSERVATION, STRONG, "观察结果|观察|观测结果|观测"),
        (FINAL, STRONG, "Final Answer|Final Response|Final Output"),
        (FINAL, STRONG, "最终答案|最终回答|最终回复|最终结果|最后答案"),
        (FINAL, STRONG, "最终的答案|最终的回答|最后的答案|最终答复"),
        (FINAL, WEAK, "Final|Answer|答案|回答"),
        # an echoed question (skipped at the start; ends a final answer later on)
        (QUESTION, STRONG, "Question|问题"),
    )
    for word in words.split("|")
)

CANONICAL: Final = {kind: word for word, kind, _ in reversed(_WORDS)}
"""The spelling that needs no repair code, per kind."""


def normalise_word(word: str) -> str:
    """The lookup key of a label word: lower case, no spaces, underscores or hyphens."""
    if len(word) <= _CACHED_WORD_LEN:  # names and JSON keys repeat from reply to reply
        return _normalise_cached(word)
    return _normalise(word)


def _normalise(word: str) -> str:
    return word.lower().replace(" ", "").replace("\t", "").replace("_", "").replace("-", "")


_CACHED_WORD_LEN: Final = 64
_normalise_cached: Final = functools.lru_cache(maxsize=1024)(_normalise)


LABEL_WORDS: Final[dict[str, tuple[str, int]]] = {
    normalise_word(w): (kind, strength) for w, kind, strength in _WORDS
}
"""Normalised label word -> (kind, strength)."""


INNER_NUMBER: Final = re.compile(r"(?:[ \t_-]?\#?\d{1,3})")
"""The number inside a two-word label ("Action 1 Input"), removed before the word is looked up."""


_LABEL_TEMPLATE: Final = (
    r"^(?P<indent>[ \t]{0,12})"  # indentation
    r"(?=FIRST)"  # a quick look at the first character
    r"(?P<pre>\#{1,6}[ \t]*|>[ \t]?|[-+*•][ \t]+|\d{1,2}[.)][ \t]+|)"  # heading/quote/bullet
    r"(?P<em>[*_]{0,3})"  # opening bold or italic
    r"(?P<word>WORDS)"  # the label word
    r"(?![^\W_])"  # ... not followed by more of a word ("Actions" is its own word)
    r"(?:[ \t]?(?P<num>\#?\d{1,3}|\(\d{1,3}\)))?"  # "Action 1", "Thought #2", "Action (3)"
    r"(?P<paren>[ \t]{0,3}[(（][^()（）\n]{0,80}[)）])?"  # "Observation 1 (search):"
    r"(?P<em2>[*_]{0,3})"  # closing bold/italic before the colon
    r"(?P<sp>[ \t]*)"  # space before the colon ("Thought :")
    r"(?P<colon>[:：])?"  # ASCII or full-width colon
    r"(?P<em3>[*_]{0,3})"  # closing bold/italic after the colon ("**Action:**")
)


def _label(words: list[str]) -> re.Pattern[str]:
    # Longest first ("Action Input" before "Action"); "Action 1 Input" carries a number.
    alternation = "|".join(
        re.escape(w).replace(
            r"\ ", INNER_NUMBER.pattern + r"?[ \t_-]?" if w.startswith("Action ") else r"[ \t_-]?"
        )
        for w in sorted(set(words), key=len, reverse=True)
    )
    # What a label line can start with: other lines fail at once, not after every word.
    first = "".join(sorted({c for w in words for c in (w[0].lower(), w[0].upper())}))
    first = "[" + re.escape("#>-+*•_0123456789" + first) + "]"
    pattern = _LABEL_TEMPLATE.replace("WORDS", alternation).replace("FIRST", first)
    return re.compile(pattern, re.I | re.M)


LABEL: Final = _label([w for w, kind, _ in _WORDS if kind != OBSERVATION])
"""A label candidate at the start of a line, in any spelling of :data:`LABEL_WORDS` but
observations' (cut before labels are looked for)."""

OBSERVATION_LABEL: Final = _label([w for w, kind, _ in _WORDS if kind == OBSERVATION])
"""Like :data:`LABEL`, for observation words only: where :func:`cut_reply` cuts."""

INLINE_LABEL: Final = re.compile(
    r"(?<=[.!?。！？])[ \t]*(?:\*\*)?"  # after the end of a sentence
    r"(?P<word>Action[ \t]Input|Action|Final[ \t]Answer"
    r"|行动输入|动作输入|行动|动作|最终答案|最终回答)"
    r"(?:\*\*)?[ \t]*[:：](?:\*\*)?"
)
"""A label mid-line after a sentence ("... so I search. Action: search[x]"); canonical
words only, case-sensitive."""

INLINE_INPUT: Final = re.compile(
    r"(?:\*\*)?(?:Action[ \t_-]?Input|行动输入|动作输入)(?:\*\*)?[ \t]*[:：]", re.IGNORECASE
)
"""An "Action Input:" label inside the Action line, glued to the tool name or not."""

# --- fences, tags and think blocks -----------------------------------------------------------

FENCE_LINE: Final = re.compile(r"^[ \t]{0,3}(?:`{3,}|~{3,})", re.MULTILINE)
"""A code fence marker at the start of a line (opening or closing)."""

FENCE_OPEN: Final = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})(?P<lang>[\w+.#-]*)")
"""An opening fence and its language tag, matched where the text starts."""

THINK_TAG: Final = re.compile(r"<(?P<close>/?)(?:think|thinking|reasoning)>", re.IGNORECASE)
"""A think tag, opening or closing (``close`` is ``"/"``), searched for anywhere."""

# Native tool-call markup, as the model families write it
CALL_OPEN: Final = "<tool_call>"  # Hermes / Qwen 2.5 block
CALL_CLOSE: Final = "</tool_call>"
MISTRAL_CALLS: Final = "[TOOL_CALLS]"  # Mistral
PYTHON_TAG: Final = "<|python_tag|>"  # Llama 3.x
FUNCTION_OPEN: Final = "<function="  # Llama 3.1, Qwen3-Coder: <function=NAME>
FUNCTION_CLOSE: Final = "</function>"

TOOL_CALL_TAG: Final = re.compile(
    rf"{re.escape(CALL_OPEN)}|{re.escape(MISTRAL_CALLS)}|{re.escape(PYTHON_TAG)}"
    rf"|{re.escape(FUNCTION_OPEN)}(?P<fname>[\w.\-]{{1,100}})>"
)
"""Native tool-call markup leaking into text."""

TOOL_CALL_CLOSE: Final = re.compile(rf"{re.escape(CALL_CLOSE)}|{re.escape(FUNCTION_CLOSE)}")
"""The closing tag of :data:`TOOL_CALL_TAG` markup."""

SPECIAL_TOKEN: Final = re.compile(r"<\|[\w]{1,40}\|>|</s>|<eos>|<end_of_turn>|<\|endoftext\|>")
"""A chat-template special token that a server forgot to strip (fullmatched at the end)."""

BLOB_START: Final = re.compile(r"^[ \t]*(?=[{\[])", re.MULTILINE)
"""A line that starts with a bracket: where a bare JSON blob may begin in prose."""

# --- action values -----------------------------------------------------------------------

BRACKET_ACTION: Final = re.compile(r"(?P<tool>[\w.\-]+)[ \t]*\[")
"""``tool_name[`` at the start of an Action value (``Finish[answer]``, ``Search[x]``)."""

PAREN_ACTION: Final = re.compile(r"(?P<tool>[\w.\-]+)[ \t]*\(")
"""``tool_name(`` at the start of an Action value (``search(query="x")``)."""

NAME_THEN_JSON: Final = re.compile(r"(?P<tool>[\w.\-]+)[ \t]+(?=[{\[])")
"""``tool_name {json}`` on one Action line."""

TOOL_NAME: Final = re.compile(r"[\w.\-/]+")
"""A plausible tool name (fullmatched): letters of any script, digits, ``_ . - /``."""

TOOL_NAME_DECORATION: Final = "`*\"'“”‘’[]<> \t"
"""Characters stripped around a tool name (``**search**``, `` `search` ``, ``"search"``)."""

WRAPPED_INPUT: Final = re.compile(r"[A-Z][A-Za-z0-9]{0,63}\((?P<inner>.*)\)", re.DOTALL)
"""A class call around an Action Input (``ToolInput(query="x")``), fullmatched."""

KWARG: Final = re.compile(
    r"[ \t]*(?P<key>[A-Za-z_]\w*)[ \t]*=[ \t]*"
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|[^,\"'\n]*)[ \t]*"
)
"""One ``key=value`` of a Python-style call (matched at a position, one after another)."""

KWARG_SEP: Final = re.compile(r"[,，][ \t]*")
"""The separator between two :data:`KWARG` items (a full-width ``，`` too)."""

# --- JSON -----------------------------------------------------------------------------------

JSON_WS: Final = re.compile(r"[ \t\n\r]*")
"""JSON whitespace run (matched at a position)."""

JSON_OPEN: Final = re.compile(r"[{\[]")
"""Where a JSON object or array may start inside prose."""

JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
"""A JSON number exactly as the grammar allows it (matched at a position)."""

LOOSE_NUMBER: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
"""What models write for numbers: ``+1``, ``.5``, ``5.``, ``007`` (matched at a position)."""

JSON_LITERAL: Final = re.compile(
    r"(?P<lit>true|false|null|True|False|None|NaN|Infinity|-Infinity)(?![\w$])"
)
"""JSON, Python and JavaScript literal words (matched at a position)."""

BARE_KEY: Final = re.compile(r"[\w$][\w$.\-]*")
"""An unquoted object key (matched at a position)."""

BARE_VALUE: Final = re.compile(r"\w[^,\[\]{}\"'\n\r]*")
"""An unquoted string value up to the next delimiter (matched at a position)."""

STRING_CHUNK: Final[dict[str, re.Pattern[str]]] = {
    '"': re.compile(r'[^"\\\x00-\x1f]*'),  # inside "...": up to a quote, backslash or control
    "'": re.compile(r"[^'\\\x00-\x1f]*"),  # inside '...'
    "“": re.compile(r'[^”"\\\x00-\x1f]*'),  # inside “...” (also closed by a plain ")
    "‘": re.compile(r"[^’'\\\x00-\x1f]*"),  # inside ‘...’ (also closed by a plain ')
}
"""Runs of ordinary characters inside a string, per opening quote (matched at a position)."""

AFTER_QUOTE: Final = re.compile(r"[ \t]*")
"""Spaces after a quote, skipped to see whether the quote closes the string."""

UNICODE_ESCAPE: Final = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}"
)
"""A ``\\uXXXX`` escape, a surrogate pair as one (matched at a position)."""


# --- tool calls written as text (salvage) -----------------------------------------------------

CALL_MARKUP: Final = re.compile(
    rf"{re.escape(CALL_OPEN)}"  # Hermes block open
    rf"|{re.escape(CALL_CLOSE)}"  # Hermes block close
    rf"|{re.escape(FUNCTION_OPEN)}([^<>\n]{{1,200}})>"  # function open, name in group 1
    rf"|{re.escape(FUNCTION_CLOSE)}"  # function close
    r"|<parameter=([^<>\n]{1,200})>"  # parameter open, name in group 2
    r"|</parameter>"  # parameter close
)
"""``<tool_call>``, ``<function=...>`` and ``<parameter=...>`` tags, read in one pass."""

DEEPSEEK_TOKEN: Final = re.compile(
    r"<[|｜]tool[_▁]calls[_▁](begin|end)[|｜]>"  # block open/close, group 1
    r"|<[|｜]tool[_▁]call[_▁](begin|end)[|｜]>"  # call open/close, group 2
    r"|<[|｜]tool[_▁]sep[|｜]>"  # between type or name and the arguments
)
"""DeepSeek's tool-call special tokens (``｜`` and ``▁`` or their ASCII look-alikes)."""

MISTRAL_MARK: Final = re.compile(re.escape(MISTRAL_CALLS))
"""Mistral's ``[TOOL_CALLS]``, searched for anywhere."""

MISTRAL_NAMED: Final = re.compile(
    r"\s*([A-Za-z0-9_.\-]{1,128})(?:\[CALL_ID\][A-Za-z0-9_\-]{0,64})?(?:\[ARGS\]|(?=[ \t]*\{))"
)
"""Mistral v11+ after ``[TOOL_CALLS]``: ``NAME[ARGS]``, ``NAME[CALL_ID]id[ARGS]``, ``NAME{``."""

INVENTED_OBSERVATION: Final = re.compile(
    r"^[ \t>*#_]*(?:observations?|obs|tool output|tool result|观察结果|观察|观测结果|观测)"
    r"(?:[ \t]*\d{1,3})?(?:[ \t]*[(（][^()（）\n]{0,60}[)）])?[ \t*_]*[:：]",
    re.IGNORECASE | re.MULTILINE,
)
"""An ``Observation:`` line: a call written after one the model invented is not meant."""

FINAL_ANSWER_LINE: Final = re.compile(
    r"^[ \t>*#_-]*(?:final[ \t_]*answer|final[ \t]+response|final[ \t]+output|最终答案|"
    r"最终回答|最终回复|最终结果|最后答案|最终的答案|最终的回答|最后的答案|最终答复)[ \t*_]*[:：]",
    re.IGNORECASE | re.MULTILINE,
)
"""A line that starts a final answer: a call written after it was not meant to run."""

LLAMA_TAG: Final = re.compile(rf"{re.escape(PYTHON_TAG)}|<\|eom_id\|>|<\|eot_id\|>")
"""Llama 3.x ``<|python_tag|>`` and the end-of-message tokens that close its call."""

LOOSE_NAME: Final = re.compile(r'"name"\s*:\s*"([^"\\\n]{1,200})"')
"""The ``"name": "f"`` of a call object whose JSON is broken."""

LOOSE_ARGS: Final = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
"""The arguments key of a call object whose JSON is broken; the value follows."""

LOOSE_CALL_START: Final = re.compile(r'\{\s*"name"\s*:')
"""A call object's start, ``{"name":`` (matched at a position)."""

JSON_STRUCTURE: Final = re.compile(r'[{}\[\]"\\]')
"""The characters a bracket scanner stops at in JSON: brackets, quotes, backslashes."""

PYTHON_STRUCTURE: Final = re.compile(r"[(){}\[\]\"'\\\n]")
"""The same for a Python call, plus single quotes and the newline a string may not cross."""

LINE_TAIL: Final = re.compile(r"([ \t`;]*)(?:\r?\n|$)")
"""What may follow a Python call on its line: spaces, backticks, ``;``."""

IDENT_CALL: Final = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]{0,127})\s*\(")
"""``name(`` with an identifier name (matched at a position)."""

AFTER_FUNCTIONS_NAME: Final = re.compile(r"[ \t]*(?:[:({\n]|$)")
"""What ends the name in ``functions.NAME:`` (``functions.f returned ...`` is no call)."""

EMPTY_FENCE: Final = re.compile(r"```[\w-]*\s*```")
"""A code fence with nothing left inside (once the calls in it are removed)."""

BLANK_LINES: Final = re.compile(r"\n\s*\n")
"""A run of blank lines, collapsed to one."""


def call_line(names: list[str]) -> re.Pattern[str]:
    """``NAME(`` at the start of a line, for any of ``names`` (longest first)."""
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"^[ \t`]*({alternatives})[ \t]*\(", re.MULTILINE)


JSON_LIST_START: Final = re.compile(r"\[\s*\{")
"""A JSON list of objects begins."""


def call_list(names: list[str]) -> re.Pattern[str]:
    """``[NAME(`` anywhere: a pythonic list of calls, for any of ``names`` (longest first)."""
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"\[[ \t]*(?:{alternatives})[ \t]*\(")


# --- text arguments ("name: iPhone, category: phone") ----------------------------------------

ARGUMENT_KEY: Final = re.compile(r"[ \t\n]*(?P<key>[A-Za-z_][\w.\-]{0,63})[ \t]*[:：=][ \t]*")
"""A key and its colon (or ``=``) where a ``key: value`` pair starts (matched at a position)."""

ARGUMENT_KEY_ANYWHERE: Final = re.compile(
    r"(?<![\w.\-])(?P<key>[A-Za-z_][\w.\-]{0,63})[\"'”’]?[ \t]*[:：=]"
)
"""The same key searched for anywhere as a whole word, quoted too (``"city": "Paris"}``)."""


def tool_call_anywhere(names: list[str]) -> re.Pattern[str]:
    """``NAME(`` anywhere (not inside a longer name): a call written in prose."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w.\-])(?:{alternatives})[ \t]*\(")


def run_end(pattern: re.Pattern[str], s: str, pos: int, hi: int) -> int:
    """Where a run of ``pattern`` (which matches the empty string) from ``pos`` ends."""
    m = pattern.match(s, pos, hi)
    assert m is not None, "run patterns match the empty string"
    return m.end()
