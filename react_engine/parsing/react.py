"""Tolerant parser for text ReAct replies.

:func:`parse_react` reads one model reply written in the Thought / Action / Action Input
/ Observation / Final Answer protocol (or one of its many dialects) and returns a
:class:`~react_engine.types.ParsedStep`: the thought, the actions in order, or the final
answer, the reply as it is kept in the transcript, and a list of *repair codes*, one per
tolerance applied. A clean canonical reply::

    Thought: I need the weather.
    Action: get_weather
    Action Input: {"location": "Paris"}

yields ``repairs == []``. :func:`cut_reply` is the first stage on its own, for callers
that need to cut a streamed reply client-side.

How a reply is read
-------------------

1. **Cut** (:func:`cut_reply`). A think block is set aside first. Then the reply is cut
   at the first Observation label at the start of a line (any spelling below, e.g.
   ``Observation:``, ``**Observation 1 (search):**``, ``观察：``) or at the first full
   occurrence of a caller's stop word, whichever comes first: what follows was invented
   by the model. Chat-template special tokens left at the end (``<|eot_id|>``) are
   dropped, and so is a last line that is the beginning of an Observation label or of a
   stop word (``\\nObserv``, ``\\nObservation`` without its colon, ``\\n观``), as servers
   that stop mid-word leave them; such a line must be spelled in one case and be at
   least three characters long unless it is Chinese, so a final answer ending in a line
   ``O`` or ``OB`` keeps it. Trailing whitespace goes too: the result is
   ``ParsedStep.text``, always a prefix of the reply.
2. **Think blocks.** ``<think>...</think>`` (also ``<thinking>``/``<reasoning>``) at the
   start, or everything before a stray ``</think>`` whose opening tag the server ate (as
   DeepSeek-R1's template does), is skipped for parsing and put in front of the thought.
   Every later block is blanked out before labels are looked for (offsets kept), its
   content joining the thought. A block that is never closed runs to the end of the
   reply: a ``<think>`` left open is reasoning however well-formed what follows looks,
   so an ``Action:`` or ``Final Answer:`` inside any block is never read. The blocks
   are read by :mod:`.think`, the one think reader every protocol uses.
3. **Labels** are found at the start of lines, in any case, with ``:`` or ``：``, spaces
   before the colon, Markdown around them (``**Action:**``, ``**Action**:``,
   ``*Thought:*``, ``### Action``, ``- Thought:``, ``> Thought:``), a number
   (``Action 1:``, ``Action Input 2:``, ``Action 1 Input:``) and many synonyms:
   Thought(s)/Thinking/Reasoning/思考/想法/思路/推理; Action/行动/动作/操作;
   Action Input/Action Args/行动输入/动作输入/工具输入; Final Answer/Final Response/
   最终答案/最终回答/最终回复. Weak words are honoured only where they make sense:
   ``Input:``/``Args:``/``Arguments:``/``Parameters:``/
   ``输入``/``参数`` right after an Action, ``Answer:``/``Final:``/``答案``/``回答`` when no
   final answer has started. A leading ``Question:`` (the model echoing the prompt) is
   skipped; a later one ends a final answer. Labels inside closed code fences are
   text. In thoughts, ``Action:`` and ``Final Answer:`` are also found after the end of
   a sentence on the same line.
4. **Actions.** ``Action: tool`` followed by ``Action Input: ...``; ``tool[input]``;
   ``tool(key="v", n=1)``; ``tool {json}``; ``tool Action Input: ...`` on one line; a
   JSON blob after ``Action:`` or anywhere in a reply that has no Action label, fenced or
   not, with keys ``action``/``action_input``, ``name``/``arguments``,
   ``tool_name``/``parameters``, ``tool``/``args``, ``function``/``arguments``,
   ``tool_name``/``tool_arguments`` (and the other ``tool_``/``function_``/``action_``
   spellings) or OpenAI's ``{"function": {"name", "arguments"}}`` (a list of them is
   several actions); with no arguments key, the call's other keys are its arguments
   (``{"action": "search", "query": "x"}``, ``flat_arguments``), never dropped;
   Hermes/Qwen ``<tool_call>``, Mistral ``[TOOL_CALLS]``, Llama ``<|python_tag|>`` and
   ``<function=name>`` markup. An Action named ``Finish``,
   ``Final Answer``, ``final_answer``... is the final answer. ``Action: None`` / ``N/A``
   is dropped.
5. **Action Input** is JSON (repaired by :func:`~react_engine.parsing.repair_json` when
   broken, codes prefixed ``json:``), fenced JSON, a quoted string (unquoted) or plain
   text (kept as a string). Input that starts like JSON (or like a quoted string) but cannot
   be repaired, or is cut off (a string, object or array still open at its end: never
   closed by the repair, which would invent a value), is kept as the plain string
   (``action_input_not_json``):
   the protocols never run such a call, and tell the model. A JSON blob cut off the same
   way keeps its JSON text as the input of each call it names, with the same code. A
   fence inside a JSON string does not close a fenced input. **An empty or missing Action
   Input gives ``args == {}``**, so tools without parameters work; the codes say which it
   was.
6. **Choosing.** Several actions in one reply form one multi-action step, in order
   (``multi_action=False`` keeps the first). An action and a final answer with no
   Observation between them: whichever comes first wins, and the thoughts written after
   the winner are dropped with the loser (they reason about a result that does not
   exist yet). Text with no label at all (and no tool-call blob) is an error by default:
   a model that ignores the format is likely answering from its own weights, without the
   facts a tool would give. With ``implicit_final_answer=True`` such text is taken as
   the final answer instead (``implicit_final_answer``). The thought is the think block,
   the unlabeled text before the first label and every kept Thought, joined by blank
   lines.

Each action (a :class:`~react_engine.types.PendingCall`) carries the repairs of its own
reading (``repairs``), which decide whether it may run (:mod:`.repairs`: a call read with
a lossy one never does). Its ``raw_arguments`` is the input as the model wrote it
(stripped; a fenced input keeps its fence), or for a JSON blob the ``action_input``
serialised (``exact`` where it is the JSON text of the arguments). Hostile input is
bounded: at most :data:`MAX_LABELS` labels (and as many calls in JSON blobs),
:data:`MAX_FENCES` fence lines and :data:`MAX_KWARGS` ``key=value`` pairs are read; the
rest is text. With a ``limit``, at most that many actions are returned (the reply's
length is bounded before it is read: :mod:`react_engine.protocols.limits`).
Blobs chained with ``;`` (``{call}; {call}``, as Llama 3.1 writes them) are read
together, every one, in order; a chained element that starts like JSON but cannot be read
at all raises, so that a reading never stops at the first call as if it were the whole
reply.

``chinese_label`` and ``fullwidth_colon`` are reported for every Chinese label, even
when the prompt asked for Chinese labels: a comparison that counts "clean" replies for
a Chinese template should treat those two codes as style, not repair.

Errors
------

:class:`~react_engine.errors.ReActParseError` (with ``pos`` and ``expected``) is raised
only when nothing can be recovered:

* the reply is empty or blank, or nothing is left after cutting an invented Observation
  (``pos`` 0 or the cut);
* it is only think blocks, or starts with a ``<think>`` that is never closed;
* an ``Action:`` has no tool name and there is no other action or final answer;
* an ``Action Input:`` comes before any ``Action:`` and there is nothing else;
* a ``Final Answer:`` (or ``Action: Finish``) is empty and there is nothing else;
* the only action is a no-op (``Action: None``) and there is no final answer;
* there are labels but only thoughts: no action, no JSON blob, no final answer;
* there is no label at all and no JSON blob, unless ``implicit_final_answer=True``.

Repair codes
------------

Cutting: ``cut_observation``, ``cut_stop_word``, ``trim_partial_stop``,
``special_token``, ``think_block``, ``unclosed_think``.

Labels: ``label_case`` (``THOUGHT:``, ``action input:``), ``label_synonym``
(``Thoughts:``, ``Action_Input:``, ``Input:``, ``Answer:``), ``chinese_label``,
``fullwidth_colon``, ``space_before_colon``, ``markdown_label``, ``numbered_label``,
``indented_label``, ``inline_label``, ``question_echo``, ``unlabeled_thought`` (prose
before the first label, or before a JSON blob, kept as thought).

Actions: ``bracket_action``, ``unclosed_bracket``, ``paren_action``, ``inline_input``
(``tool {json}``), ``flat_arguments`` (a JSON action's arguments as its other keys),
``decorated_tool_name`` (``**search**``, `` `search` ``), ``json_blob``, ``tool_call_tag``,
``final_as_action``, ``noop_action_dropped``, ``empty_action_dropped``, ``ignored_text``
(prose after the tool name), ``unlabeled_action_input`` (JSON after the tool name with no label),
``missing_action_input``, ``empty_action_input``, ``repeated_action_input`` (a second
Action Input for the same Action: a second call of that tool), ``input_after_empty_call``
(``Action: tool()``, ``tool[]``, ``tool {}`` or an empty Action Input, then an Action
Input: one call, with that input), ``duplicate_input_dropped`` (arguments on the Action
line, then the same ones as the Action Input: one call), ``ambiguous_action_input``
(arguments on the Action line, then different ones as the Action Input: the action gets
:attr:`~react_engine.types.PendingCall.error` and never runs), ``input_before_action``
(an Action Input written just before its Action), ``orphan_input_dropped``.

Inputs: ``fenced_json``, ``backtick_input``, ``quoted_input``, ``unwrapped_array``
(``[{...}]`` as arguments), ``json_string_arguments`` (arguments given as a JSON string),
``action_input_not_object`` (JSON that is not an object: kept as text),
``action_input_not_json``, ``text_after_input``, and ``json:<code>`` for every
:data:`~react_engine.parsing.json_repair.JSON_REPAIR_CODES` code.

Choosing: ``implicit_final_answer``, ``first_action_only``,
``action_after_final_dropped``, ``final_after_action_dropped``,
``text_after_final_dropped``, ``empty_final_dropped``.

Shapes (:mod:`.shapes`, tried only where the reading above fails): ``chat_prefix``,
``deepseek_tokens``, ``xml_action_tags``, ``blob_in_prose``, ``tool_name_junk``,
``tool_name_style`` (these two with ``tools``), ``wrapped_input``.

The parser is a handful of small functions over ``(text, pos)``; every pattern lives in
:mod:`react_engine.parsing.patterns`, and all of them run in linear time, so a hostile
megabyte parses (or fails) in well under a second.

A plain reply (canonical labels only, nothing to cut or repair) takes a shortcut: one pass
over its lines finds the cut and the labels, and the usual shapes are read straight from
them. The shortcut gives up at the first doubt, and its result is the tolerant passes'
(``tests/parsing/test_parse_plain.py``).
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import JSONRepairError, ReActParseError
from ..types import ParsedStep, PendingCall, to_jsonable
from ..wording import WORDING, Note, ObservationCode
from . import patterns as P
from .common import NOT_OBJECT, call_objects, unfence, written_value
from .duplicates import DECODER, has_conflict
from .json_repair import JSON_REPAIR_CODES, decode_prefix, repair_json
from .patterns import run_end
from .shapes import SHAPE_CODES, WRAPPED_INPUT, marked, resolve_tools, rewrite
from .think import mask_think, think_span

__all__ = ["EXPECTED_STEP", "PARSE_REPAIR_CODES", "cut_reply", "parse_react"]

PARSE_REPAIR_CODES: Final = frozenset(
    {
        # cutting
        "cut_observation",
        "cut_stop_word",
        "trim_partial_stop",
        "special_token",
        "think_block",
        "unclosed_think",
        # labels
        "label_case",
        "label_synonym",
        "chinese_label",
        "fullwidth_colon",
        "space_before_colon",
        "markdown_label",
        "numbered_label",
        "indented_label",
        "inline_label",
        "question_echo",
        "unlabeled_thought",
        # actions
        "bracket_action",
        "unclosed_bracket",
        "paren_action",
        "inline_input",
        "flat_arguments",
        "decorated_tool_name",
        "json_blob",
        "tool_call_tag",
        "final_as_action",
        "noop_action_dropped",
        "empty_action_dropped",
        "ignored_text",
        "unlabeled_action_input",
        "missing_action_input",
        "empty_action_input",
        "repeated_action_input",
        "input_after_empty_call",
        "duplicate_input_dropped",
        "ambiguous_action_input",
        "input_before_action",
        "orphan_input_dropped",
        # inputs
        "fenced_json",
        "backtick_input",
        "quoted_input",
        "unwrapped_array",
        "json_string_arguments",
        "action_input_not_object",
        "action_input_not_json",
        "text_after_input",
        # choosing
        "implicit_final_answer",
        "first_action_only",
        "action_after_final_dropped",
        "final_after_action_dropped",
        "text_after_final_dropped",
        "empty_final_dropped",
    }
    | {"json:" + code for code in JSON_REPAIR_CODES}
    | SHAPE_CODES
)
"""Every code :func:`parse_react` may report (see the module docstring)."""

EXPECTED_STEP: Final = "'Thought:' then 'Action:' and 'Action Input:', or 'Final Answer:'"

_FINISH_NAMES: Final = frozenset(
    {"finish", "final", "finalanswer", "finalresponse", "answer", "最终答案", "最终回答"}
)
_NOOP_NAMES: Final = frozenset(
    {"none", "null", "n/a", "na", "noaction", "nothing", "无", "没有", "-", "—"}
)
_PARTIAL_FORMS: Final = tuple(
    spelling + colon
    for word in ("Observation", "Observations", "Obs", "观察", "观察结果", "观测", "观测结果")
    for spelling in dict.fromkeys((word, word.lower(), word.upper()))
    for colon in (":", "：")
)
_BLOB_OPENERS: Final = ("{", "[", "```", "~~~", P.CALL_OPEN, P.PYTHON_TAG, P.FUNCTION_OPEN)
_LONGEST_FORM: Final = max(len(form) for form in _PARTIAL_FORMS)
_PARTIAL_PREFIXES: Final = frozenset(
    form[:n] for form in _PARTIAL_FORMS for n in range(len(form) + 1)
)
"""Every beginning of a :data:`_PARTIAL_FORMS` spelling (a set lookup, not a scan)."""
_BLOB_CHARS: Final = "{[<`~"
"""A tool-call blob candidate in prose needs one of these: a bracket (``{``/``[``, also
``[TOOL_CALLS]``), a tag (``<tool_call>``, ``<|python_tag|>``, ``<function=``) or a fence."""
_MAX_BLOB_CANDIDATES: Final = 16
MAX_LABELS: Final = 1000
"""Labels read per reply; any after that are text (a bound for hostile input)."""
MAX_FENCES: Final = 2000
"""Code fence lines considered when deciding which labels sit inside a fence."""
MAX_KWARGS: Final = 256
"""``key=value`` pairs read in ``tool(...)``; with more, the input stays text."""
_PREAMBLE: Final = "preamble"


# --- cutting ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Cut:
    text: str  # the reply as kept
    codes: list[str]
    think: str | None  # content of the think block, if there is one
    body_start: int  # where the reply proper starts (after the think block)
    unclosed_think: bool
    masked: str = ""  # the kept body with every later think block blanked out
    later_think: list[str] = field(default_factory=list)  # those blocks' contents
    blanked: bool = False  # whether any later block was blanked out


def cut_reply(text: str, stop_words: Sequence[str] | None = None) -> tuple[str, list[str]]:
    """Cut a reply where the model started inventing, as a server's ``stop`` would.

    Returns the kept text (trailing whitespace stripped) and the repair codes applied:
    ``cut_observation`` / ``cut_stop_word`` for a cut at the first Observation label at
    the start of a line / the first full stop word, ``special_token`` and
    ``trim_partial_stop`` for what was trimmed at the end, ``think_block`` /
    ``unclosed_think`` when a think block was set aside (never cut inside).
    """
    cut = _cut(text, stop_words)
    return cut.text, cut.codes


def _cut(text: str, stop_words: Sequence[str] | None) -> _Cut:
    codes: list[str] = []
    think, body_start, think_code = think_span(text)
    if think_code:
        codes.append(think_code)
    body = text[body_start:]
    masked, later_think, later_code = mask_think(body)
    if later_code:
        codes.append(later_code)
    end = len(body)
    obs_at = _first_observation(masked)
    stop_at = -1
    for word in stop_words or ():
        if word:
            at = masked.find(word, 0, end if stop_at < 0 else stop_at)
            if at >= 0:
                stop_at = at
    if obs_at >= 0 or stop_at >= 0:
        candidates = [at for at in (obs_at, stop_at) if at >= 0]
        end = min(candidates)
        if obs_at >= 0 and not body[end:obs_at].strip():
            codes.append("cut_observation")
        else:
            codes.append("cut_stop_word")
    kept = body[:end].rstrip()
    while True:
        lt = kept.rfind("<")
        if lt < 0 or P.SPECIAL_TOKEN.fullmatch(kept, lt) is None:
            break
        kept = kept[:lt].rstrip()
        codes.append("special_token")
    partial = _partial_stop(kept, stop_words)
    if partial < len(kept):
        kept = kept[:partial].rstrip()
        codes.append("trim_partial_stop")
    return _Cut(
        text=(text[:body_start] + kept).rstrip(),
        codes=_dedupe(codes),
        think=think,
        body_start=body_start,
        unclosed_think=think_code == "unclosed_think",
        masked=masked[: len(kept)],
        later_think=later_think,
        blanked=later_code is not None,
    )


_BLANKED: Final = re.compile(r"(?<=\S)[ \t]{15,}")
"""A run of blanks at least as long as an empty think block (``<think></think>``) after
some text on the same line: where a block was blanked out inside a line."""


def _tidy(text: str | None) -> str | None:
    """Text read from a masked body, without the blanks its think blocks left."""
    if text is None:
        return None
    lines = (_BLANKED.sub(" ", line).rstrip() for line in text.split("\n"))
    tidied = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return tidied


def _first_observation(body: str) -> int:
    """Where the first Observation label starts."""
    for m in P.OBSERVATION_LABEL.finditer(body):
        if _label_content_start(m, body) is not None:
            return m.start()
    return -1


def _partial_stop(kept: str, stop_words: Sequence[str] | None) -> int:
    """Where a last line that only begins an Observation label or a stop word starts.

    The line must be a proper, case-consistent beginning of ``Observation:`` (or of a
    stop word), at least three characters long unless it is Chinese (``观``): a final
    answer ending in a line ``O`` or ``OB`` keeps it.
    """
    nl = kept.rfind("\n")
    if nl < 0:
        return len(kept)
    last = kept[nl + 1 :]
    core = last.strip(" \t>#*_-")
    if len(core) < 3 and core.isascii():
        return len(kept)
    if len(core) < _LONGEST_FORM and core in _PARTIAL_PREFIXES:
        return nl
    for word in stop_words or ():
        word = word.lstrip("\n")
        if (
            len(last) < len(word)
            and word.startswith(last)
            and (len(last) >= 3 or not last.isascii())
        ):
            return nl
    return len(kept)


# --- labels and sections -------------------------------------------------------------------


@dataclass(slots=True)
class _Label:
    kind: str
    strength: int
    start: int  # start of the label's line
    content: int  # where its content starts
    codes: tuple[str, ...]


@dataclass(slots=True)
class _Section:
    kind: str  # a label kind, or _PREAMBLE for the text before the first label
    start: int
    content: str
    content_start: int
    codes: tuple[str, ...] = ()


def _label_content_start(m: re.Match[str], text: str) -> int | None:
    """Where a label candidate's content starts, or None when it is not a label.

    Without a colon, a label must be a Markdown heading or bold alone on its line
    (``### Action``, ``**Final Answer**``).
    """
    colon, pre, em = m.group("colon", "pre", "em")
    return _content_start(m, text, colon, pre, em)


def _content_start(m: re.Match[str], text: str, colon: str, pre: str, em: str) -> int | None:
    if colon:
        return m.end()
    if "#" not in pre and not em:
        return None
    eol = text.find("\n", m.end())
    if text[m.end() : eol if eol >= 0 else len(text)].strip():
        return None
    return m.end()


@functools.lru_cache(maxsize=512)
def _word_info(word: str) -> tuple[str, int, tuple[str, ...]]:
    """Kind, strength and spelling repair code of a label word as it was written."""
    kind, strength = P.LABEL_WORDS[P.normalise_word(word)]
    canonical = P.CANONICAL[kind]
    if word == canonical:
        return kind, strength, ()
    if not word.isascii():
        return kind, strength, ("chinese_label",)
    if word.lower() == canonical.lower():
        return kind, strength, ("label_case",)
    return kind, strength, ("label_synonym",)


_GROUPS: Final = ("indent", "pre", "em", "num", "paren", "em2", "sp", "colon", "em3", "word")


def _label_codes(groups: tuple[str, ...], word_codes: tuple[str, ...]) -> tuple[str, ...]:
    indent, pre, em, num, paren, em2, sp, colon, em3, _word = groups
    if not (indent or pre or em or num or paren or em2 or sp or em3) and colon != "：":
        return word_codes
    codes = list(word_codes)
    if indent:
        codes.append("indented_label")
    if pre or em or em2 or em3:
        codes.append("markdown_label")
    if num or paren:
        codes.append("numbered_label")
    if colon and sp:
        codes.append("space_before_colon")
    if colon == "：":
        codes.append("fullwidth_colon")
    return tuple(codes)


def _closed_fences(body: str) -> list[tuple[int, int]]:
    """(opening line start, closing line start) of each closed fence pair (the first
    ``MAX_FENCES`` fence lines only: past that, fences hide nothing)."""
    spans: list[tuple[int, int]] = []
    opened = -1
    for count, m in enumerate(P.FENCE_LINE.finditer(body)):
        if count >= MAX_FENCES:
            break
        eol = body.find("\n", m.end())
        line_rest = body[m.end() : eol if eol >= 0 else len(body)]
        if opened < 0:
            if "```" in line_rest or "~~~" in line_rest:
                continue  # a fence opened and closed on one line
            opened = m.start()
        else:
            spans.append((opened, m.start()))
            opened = -1
    return spans


def _labels(body: str) -> list[_Label]:
    labels: list[_Label] = []
    fences: list[tuple[int, int]] | None = None  # found once a label needs them
    f = 0
    for m in P.LABEL.finditer(body):
        start = m.start()
        if fences is None:
            fences = _closed_fences(body)
        while f < len(fences) and fences[f][1] < start:
            f += 1
        if f < len(fences) and fences[f][0] < start <= fences[f][1]:
            continue
        groups = m.group(*_GROUPS)
        content = _content_start(m, body, groups[7], groups[1], groups[2])
        if content is None:
            continue
        word = groups[9]
        numbered: tuple[str, ...] = ()
        if any(ch.isdigit() for ch in word):  # "Action 1 Input": the number inside the word
            word = P.INNER_NUMBER.sub("", word, count=1)
            numbered = ("numbered_label",)
        kind, strength, word_codes = _word_info(word)
        codes = _label_codes(groups, word_codes)
        if numbered and "numbered_label" not in codes:
            codes = (*codes, *numbered)
        labels.append(_Label(kind, strength, start, content, codes))
        if len(labels) >= MAX_LABELS:
            break  # the rest is text: no real reply has this many labels
    return labels


_PLAIN_LABELS: Final = (
    ("Action Input:", P.ACTION_INPUT),
    ("Action:", P.ACTION),
    ("Thought:", P.THOUGHT),
    ("Final Answer:", P.FINAL),
)
_PLAIN_STARTS: Final = ("Action", "Thought:", "Final Answer:")
_PLAIN_MAX_LINES: Final = 200
"""Replies with this many lines or more skip the plain pass: it reads each line in Python,
and a hostile reply has a great many (the tolerant passes scan them in C)."""


def _plain(text: str, stop_words: Sequence[str] | None) -> tuple[_Cut, list[_Label]] | None:
    """:func:`_cut` and :func:`_labels` of a plain reply, in one cheap pass; None when the
    reply is not plain (the tolerant passes then read it).

    A reply is plain when nothing in it needs cutting or a repair code: no ``<`` (so no
    think block, special token or tool-call markup), no stop word, no partial stop at its
    end, and each line either starts with a label spelled exactly ``Thought:``,
    ``Action:``, ``Action Input:`` or ``Final Answer:`` (then a space or the end of the
    line) or cannot start any label or Observation; no fence line comes before a label.
    The result is then exactly what the two passes give (``tests/parsing/test_parse_plain.py``
    checks it on every golden reply and on generated ones); only the labels that were
    there are read, and :func:`_sections` onwards is shared.
    """
    if "<" in text or text.count("\n") >= _PLAIN_MAX_LINES:
        return None  # a long reply pays one pass, not two
    for word in stop_words or ():
        if word and word in text:
            return None
    kept = text.rstrip()
    if _partial_stop(kept, stop_words) < len(kept):
        return None
    labels: list[_Label] = []
    fenced = False  # a fence line was seen: a later label might be inside it
    start = 0
    while True:
        eol = kept.find("\n", start)
        end = len(kept) if eol < 0 else eol
        label = None
        if kept.startswith(_PLAIN_STARTS, start):
            for prefix, kind in _PLAIN_LABELS:
                if kept.startswith(prefix, start):
                    after = start + len(prefix)
                    if after == end or kept[after] == " ":
                        label = _Label(kind, P.STRONG, start, after, ())
                    break
        if label is not None:
            if fenced or len(labels) >= MAX_LABELS - 1:
                return None
            labels.append(label)
        elif start < end:
            if P.LABEL.match(kept, start) or P.OBSERVATION_LABEL.match(kept, start):
                return None
            fenced = fenced or P.FENCE_LINE.match(kept, start) is not None
        if eol < 0:
            break
        start = eol + 1
    cut = _Cut(text=kept, codes=[], think=None, body_start=0, unclosed_think=False, masked=kept)
    return cut, labels


def _plain_step(kept: str, labels: list[_Label]) -> ParsedStep | None:
    """The step of a plain reply of the usual shape, read directly; None for any other.

    The shapes: ``Thought:`` at the start, then ``Final Answer:``, or ``Action:`` (a tool
    name, or a JSON blob naming one call) with an optional ``Action Input:``. Anything that
    would make :func:`_read` or :func:`_choose` do more than keep those parts (an inline
    label or blob in the thought, a finish or no-op tool, a second call, an empty answer)
    leaves the reply to them; the result is the same either way.
    """
    kinds = tuple(label.kind for label in labels)
    if not 2 <= len(kinds) <= 3 or kinds[0] != P.THOUGHT or labels[0].start != 0:
        return None
    second = labels[1]
    thought = kept[labels[0].content : second.start]
    if P.INLINE_LABEL.search(thought) is not None:
        return None
    thought = thought.strip()
    if kinds == (P.THOUGHT, P.FINAL):
        answer = kept[second.content :].strip()
        if not answer or any(c in thought for c in _BLOB_CHARS):
            return None
        return ParsedStep(thought=thought or None, final_answer=answer, repairs=[], text=kept)
    if kinds not in ((P.THOUGHT, P.ACTION), (P.THOUGHT, P.ACTION, P.ACTION_INPUT)):
        return None
    end = labels[2].start if len(labels) == 3 else len(kept)
    items, problem = _action(kept[second.content : end], second.content)
    if problem is not None or len(items) != 1:
        return None
    item = items[0]
    tool = item.tool
    if (
        tool is None
        or item.final is not None
        or _is_finish(tool)
        or P.normalise_word(tool) in _NOOP_NAMES
    ):
        return None
    if len(labels) == 3:
        if item.has_input:
            return None  # a second input: a second call
        _fill(item, kept[labels[2].content :], [])
    return ParsedStep(
        thought=thought or None,
        actions=[
            PendingCall(
                id=None,
                tool=tool,
                arguments=item.args,
                raw_arguments=item.raw_input,
                repairs=_call_repairs(item),
                exact=_exact(item.args, item.raw_input, item.dumped),
            )
        ],
        repairs=_dedupe(item.codes),
        text=kept,
    )


def _sections(body: str, labels: list[_Label]) -> list[_Section]:
    """The reply split at the labels that count where they stand."""
    sections: list[_Section] = []
    first = labels[0].start if labels else len(body)
    if body[:first].strip():
        sections.append(_Section(_PREAMBLE, 0, body[:first], 0))
    honoured: list[_Label] = []
    for label in labels:
        prev = honoured[-1].kind if honoured else None
        if label.strength == P.WEAK:
            if label.kind == P.ACTION_INPUT and prev != P.ACTION:
                continue
            if label.kind == P.FINAL and any(h.kind == P.FINAL for h in honoured):
                continue
        if label.kind == P.QUESTION and honoured and prev != P.FINAL:
            continue
        honoured.append(label)
    for i, label in enumerate(honoured):
        end = honoured[i + 1].start if i + 1 < len(honoured) else len(body)
        sections.append(
            _Section(label.kind, label.start, body[label.content : end], label.content, label.codes)
        )
    return _split_inline(sections)


def _split_inline(sections: list[_Section]) -> list[_Section]:
    """Split "Thought: ... . Action: x" on one line into a thought and an action."""
    out: list[_Section] = []
    for sec in sections:
        m = P.INLINE_LABEL.search(sec.content) if sec.kind in (P.THOUGHT, _PREAMBLE) else None
        if m is None:
            out.append(sec)
            continue
        kind, _strength, word_codes = _word_info(m.group("word"))
        out.append(
            _Section(sec.kind, sec.start, sec.content[: m.start()], sec.content_start, sec.codes)
        )
        codes = ("inline_label", *word_codes)
        out.append(
            _Section(
                kind,
                sec.content_start + m.start(),
                sec.content[m.end() :],
                sec.content_start + m.end(),
                codes,
            )
        )
    return out


# --- what the sections say -----------------------------------------------------------------------


@dataclass(slots=True)
class _Item:
    """An action or a final answer found in the reply, at ``pos``."""

    pos: int
    tool: str | None = None
    args: dict[str, Any] | str = field(default_factory=dict)
    raw_input: str = ""
    has_input: bool = False
    final: str | None = None
    thought: str | None = None
    codes: list[str] = field(default_factory=list)
    inline: bool = False  # its input was written with the Action (``tool(...)``, ``tool[...]``)
    error: str | None = None  # why it must not run (two different inputs)
    dumped: tuple[Any, str] | None = None  # (args, raw_input) when raw_input is json.dumps(args)


@dataclass(slots=True)
class _Problem:
    pos: int
    message: str
    expected: str


@dataclass(slots=True)
class _Reading:
    """Everything found in the sections, by position in the reply."""

    items: list[_Item] = field(default_factory=list)
    thoughts: list[tuple[int, str]] = field(default_factory=list)
    codes: list[tuple[int, str]] = field(default_factory=list)
    problems: list[_Problem] = field(default_factory=list)
    others: list[int] = field(default_factory=list)  # sections that are neither: a late Question


def parse_react(
    text: str,
    *,
    multi_action: bool = True,
    stop_words: Sequence[str] | None = None,
    implicit_final_answer: bool = False,
    limit: int | None = None,
    tools: Sequence[str] = (),
) -> ParsedStep:
    """Parse one text ReAct reply; see the module docstring for what is tolerated.

    ``stop_words`` are the request's stop sequences: the reply is also cut at the first
    one the server failed to honour, and a partial one at the very end is trimmed.
    ``implicit_final_answer`` takes a reply with no label at all (and no tool-call blob)
    as the final answer; by default such a reply is an error.
    ``limit``: at most this many actions are returned (the reader stops there).
    ``tools``: the offered tools' names, for the shapes that need them (:mod:`.shapes`).
    Raises :class:`~react_engine.errors.ReActParseError` when nothing can be recovered.
    """
    try:
        try:
            step = _parse(text, multi_action, stop_words, implicit_final_answer, tools)
        except ReActParseError:
            shaped = _shape(text, multi_action, stop_words, tools)
            if shaped is None:
                raise
            step = shaped
        if "implicit_final_answer" in step.repairs:
            shaped = _shape(text, multi_action, stop_words, tools)
            if shaped is None and marked(text):
                raise ReActParseError(_SHAPE_UNREAD, text=text, pos=0, expected=EXPECTED_STEP)
            step = shaped or step
    except _BrokenChain as exc:
        raise ReActParseError(
            "a call chained with ';' after another cannot be read",
            text=text,
            pos=exc.pos,
            expected="every chained call as complete JSON",
        ) from None
    if limit is not None:
        del step.actions[limit:]
    return step


_SHAPE_UNREAD: Final = "the reply has no label, and its action cannot be read"


def _shape(
    text: str, multi_action: bool, stop_words: Sequence[str] | None, tools: Sequence[str]
) -> ParsedStep | None:
    """The reply read as the labelled one its shape stands for (:mod:`.shapes`), or None."""
    shaped = rewrite(text)
    if shaped is None:
        return None
    try:
        step = _parse(shaped[0], multi_action, stop_words, False, tools)
    except ReActParseError:
        return None
    cut = ["cut_observation"] if shaped[2] < len(text) else []
    step.text = _cut(text[: shaped[2]], stop_words).text
    step.repairs = _dedupe([*cut, *step.repairs, shaped[1]])
    return step


class _BrokenChain(Exception):
    """A call chained with ``;`` that cannot be read (``pos``: where, in the reply)."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def _parse(
    text: str,
    multi_action: bool,
    stop_words: Sequence[str] | None,
    implicit_final_answer: bool,
    tools: Sequence[str],
) -> ParsedStep:
    if not text.strip():
        raise ReActParseError("the reply is empty", text=text, pos=0, expected=EXPECTED_STEP)
    plain = _plain(text, stop_words)
    if plain is not None:
        step = _plain_step(plain[0].text, plain[1])
        if step is not None and (not tools or not step.actions or step.actions[0].tool in tools):
            return step
    cut = _cut(text, stop_words) if plain is None else plain[0]
    offset = cut.body_start
    body = cut.masked  # the kept body, every later think block blanked out
    think = "\n\n".join(t for t in (cut.think.strip() if cut.think else "", *cut.later_think) if t)
    if not body.strip():
        if cut.unclosed_think:
            raise ReActParseError(
                "the reasoning block is never closed and no action or answer follows it",
                text=text,
                pos=len(cut.text),
                expected="'</think>' then " + EXPECTED_STEP,
            )
        if cut.think is not None or cut.blanked:
            raise ReActParseError(
                "the reply is only reasoning, with no action or final answer after it",
                text=text,
                pos=len(cut.text),
                expected=EXPECTED_STEP + " after the reasoning",
            )
        raise ReActParseError(
            "nothing is left of the reply once the invented Observation is cut",
            text=text,
            pos=0,
            expected=EXPECTED_STEP + " before any 'Observation:'",
        )
    sections = _sections(body, _labels(body) if plain is None else plain[1])
    try:
        reading = _read(sections)
        if not any(sec.kind == P.ACTION for sec in sections):
            _find_blobs(sections, reading)
    except _BrokenChain as exc:
        raise _BrokenChain(offset + exc.pos) from None
    labelled = any(sec.kind != _PREAMBLE for sec in sections)
    if not labelled and not reading.items:
        if not implicit_final_answer:
            raise ReActParseError(
                "the reply has no label: neither an Action nor a Final Answer",
                text=text,
                pos=offset + len(body) - len(body.lstrip()),
                expected=EXPECTED_STEP,
            )
        return ParsedStep(
            thought=think or None,
            final_answer=_tidy(body) if cut.blanked else body.strip(),
            repairs=[*cut.codes, "implicit_final_answer"],
            text=cut.text,
        )
    step = _choose(reading, cut, think, text, multi_action)
    if tools:
        resolve_tools(step, tools)
    if cut.blanked:
        step.final_answer = _tidy(step.final_answer)
        step.thought = _tidy(step.thought) or None
    return step


def _read(sections: list[_Section]) -> _Reading:
    r = _Reading()
    labelled = any(sec.kind != _PREAMBLE for sec in sections)
    last_action: _Item | None = None
    orphan: _Section | None = None  # an Action Input still waiting for its Action
    for index, sec in enumerate(sections):
        r.codes.extend((sec.start, code) for code in sec.codes)
        if sec.kind == _PREAMBLE:
            if labelled:
                r.thoughts.append((sec.start, sec.content.strip()))
                r.codes.append((sec.start, "unlabeled_thought"))
        elif sec.kind == P.THOUGHT:
            r.thoughts.append((sec.start, sec.content.strip()))
        elif sec.kind == P.QUESTION:
            if index == 0 or (index == 1 and sections[0].kind == _PREAMBLE):
                r.codes.append((sec.start, "question_echo"))
            else:
                r.others.append(sec.start)
        elif sec.kind == P.ACTION:
            items, problem = _action(sec.content, sec.content_start)
            if problem is not None:
                r.problems.append(problem)
            r.items.extend(items)
            last = items[-1] if items else None
            usable = last is not None and last.tool is not None and last.final is None
            last_action = last if usable else None
            if orphan is not None and last_action is not None and not last_action.has_input:
                _fill(last_action, orphan.content, ["input_before_action"])
                orphan = None
        elif sec.kind == P.ACTION_INPUT:
            if last_action is None:
                if orphan is not None:
                    _orphan(r, orphan)
                orphan = sec
            else:
                _attach_input(r, last_action, sec)
        else:  # P.FINAL
            r.items.append(_Item(sec.start, final=sec.content.strip()))
    if orphan is not None:
        _orphan(r, orphan)
    return r


def _orphan(r: _Reading, sec: _Section) -> None:
    """An Action Input with no Action to belong to: dropped, and a problem if alone."""
    r.problems.append(
        _Problem(sec.start, "an Action Input with no Action before it", "'Action: <tool name>'")
    )
    r.codes.append((sec.start, "orphan_input_dropped"))


AMBIGUOUS_INPUT: Final = WORDING[ObservationCode.AMBIGUOUS_INPUT][0]
"""Why an action with arguments both on its Action line and, different, in an Action Input
never runs: either could be the one the model meant."""


def _attach_input(r: _Reading, action: _Item, sec: _Section) -> None:
    """Give an Action its input; a second input for the same Action is a second call.

    Input written with the Action (``tool(...)``, ``tool[...]``, ``tool {...}``) and then
    an Action Input are one call, never two: after an empty ``tool()`` (or an empty first
    Action Input) the Action Input is the input, so no call runs on the tool's defaults
    beside the real one; the same arguments twice are one; different ones are ambiguous,
    and the action never runs (:data:`AMBIGUOUS_INPUT`).
    """
    if not action.has_input:
        _fill(action, sec.content, [])
        return
    if action.args == {}:  # tool(), tool[], tool {}, an empty Action Input: no arguments yet
        action.inline = False  # a further Action Input is a second call
        action.codes = [c for c in action.codes if c != "empty_action_input"]
        _fill(action, sec.content, ["input_after_empty_call"])
        return
    if action.inline:
        action.inline = False  # a further Action Input is a second call
        args, _ = _input(sec.content)
        if args == action.args:
            action.codes.append("duplicate_input_dropped")
            return
        action.error = Note(ObservationCode.AMBIGUOUS_INPUT, tool=action.tool or "")
        action.codes.append("ambiguous_action_input")
        return
    item = _Item(sec.start, tool=action.tool)
    _fill(item, sec.content, ["repeated_action_input"])
    r.items.append(item)


def _fill(action: _Item, raw: str, codes: list[str]) -> None:
    args, more = _input(raw)
    action.args, action.raw_input, action.has_input = args, raw.strip(), True
    action.codes = [c for c in action.codes if c != "missing_action_input"]
    action.codes.extend(codes)
    action.codes.extend(more)


# --- actions ------------------------------------------------------------------------------------


def _action(content: str, pos: int) -> tuple[list[_Item], _Problem | None]:
    """The item(s) an Action section names (several for a list blob), or a problem."""
    stripped = content.strip()
    at = pos + (len(content) - len(content.lstrip()))
    missing = _Problem(at, "the Action has no tool name", "a tool name after 'Action:'")
    if not stripped:
        return [], missing
    if stripped.startswith(_BLOB_OPENERS):
        found = _blob(stripped, 0)
        if found is not None:
            items, end = found
            try:
                chained = _chained(stripped, end)
            except _BrokenChain as exc:
                raise _BrokenChain(at + exc.pos) from None
            if chained:
                items = [*items, *(item for _, _, more in chained for item in more)]
                end = chained[-1][1]
            trailing = bool(stripped[end:].strip())
            for item in items:
                item.pos = at
                item.inline = len(items) == 1
                if trailing:
                    item.codes.append("text_after_input")
            return items, None
        if stripped.startswith(("{", "```", "~~~")):
            return [], missing  # JSON that names no tool
    eol = stripped.find("\n")
    first = stripped if eol < 0 else stripped[:eol]
    rest = "" if eol < 0 else stripped[eol + 1 :]
    item = _Item(at)
    if P.TOOL_NAME.fullmatch(first):  # the usual "Action: tool_name"
        return _plain_action(item, first, rest, missing)
    m = P.INLINE_INPUT.search(first)
    item.inline = True  # every form below but the last writes its input on the Action line
    if m is not None:
        item.codes.append("inline_label")
        _fill(item, stripped[m.end() :], [])
        return _named(item, first[: m.start()].rstrip(" \t,;"), missing)
    m = P.BRACKET_ACTION.match(first)
    if m is not None:
        item.codes.append("bracket_action")
        close = stripped.rfind("]")
        if close < m.end():
            inner, after = stripped[m.end() :], ""
            item.codes.append("unclosed_bracket")
        else:
            inner, after = stripped[m.end() : close], stripped[close + 1 :]
        if after.strip():
            item.codes.append("text_after_input")
        _fill(item, inner, [])
        return _named(item, m.group("tool"), missing)
    m = P.PAREN_ACTION.match(first)
    if m is not None and stripped.endswith(")"):
        item.codes.append("paren_action")
        inner = stripped[m.end() : -1].strip()
        if inner:
            item.args, item.raw_input = _call_args(inner, item.codes), inner
        item.has_input = True
        return _named(item, m.group("tool"), missing)
    m = P.NAME_THEN_JSON.match(first)
    if m is not None:
        item.codes.append("inline_input")
        _fill(item, stripped[m.end() :], [])
        return _named(item, m.group("tool"), missing)
    return _plain_action(item, first, rest, missing)


def _plain_action(
    item: _Item, first: str, rest: str, missing: _Problem
) -> tuple[list[_Item], _Problem | None]:
    """``Action: tool`` whose input, if any, is on the following lines."""
    item.inline = False
    if rest.strip():
        if rest.lstrip()[:1] in ("{", "[", "`", "~"):
            item.codes.append("unlabeled_action_input")
            _fill(item, rest, [])
            item.inline = True
        else:
            item.codes.append("ignored_text")
    return _named(item, first, missing)


def _named(item: _Item, name: str, missing: _Problem) -> tuple[list[_Item], _Problem | None]:
    tool = name.strip(P.TOOL_NAME_DECORATION).rstrip(".,;:。，；：")
    tool = tool.strip(P.TOOL_NAME_DECORATION)
    if not tool:
        return [], missing
    if tool != name.strip():
        item.codes.append("decorated_tool_name")
    item.tool = tool
    if not item.has_input:
        item.codes.append("missing_action_input")
    return [item], None


def _input(raw: str) -> tuple[dict[str, Any] | str, list[str]]:
    """Arguments from an Action Input: a JSON object, or the text itself."""
    text = raw.strip()
    codes: list[str] = []
    if not text:
        return {}, ["empty_action_input"]
    if text.startswith(("```", "~~~")):
        inner, after = unfence(text) or (text, "")
        codes.append("fenced_json")
        if after.strip():
            codes.append("text_after_input")
        text = inner.strip()
        if not text:
            return {}, [*codes, "empty_action_input"]
    elif len(text) > 1 and text[0] == "`" and text[-1] == "`" and "`" not in text[1:-1]:
        codes.append("backtick_input")
        text = text[1:-1].strip()
    if text[:1] in ("{", "["):
        try:
            value = DECODER.decode(text)
        except (ValueError, RecursionError):
            try:
                # complete but sloppy JSON is repaired; cut-off JSON is not closed, since
                # that would run the tool on a value the model never finished writing
                result = repair_json(text, allow_truncated=False)
            except JSONRepairError:
                return text, [*codes, "action_input_not_json"]
            value = result.value
            codes.extend("json:" + c for c in result.repairs)
        return _as_args(value, text, codes)
    unquoted = _unquote(text)
    if unquoted is None:
        if text[:1] in '"“':  # a string opened and never closed as one: cut or broken
            return text, [*codes, "action_input_not_json"]
        wrapped = WRAPPED_INPUT.fullmatch(text)  # ToolInput(query="x")
        if wrapped is not None and (inner := wrapped.group("inner").strip()):
            args = _call_args(inner, more := [*codes, "wrapped_input"])
            if isinstance(args, dict):
                return args, more
        return text, codes
    codes.append("quoted_input")
    if unquoted.lstrip()[:1] == "{":  # a JSON object sent as a JSON string
        try:
            value = DECODER.decode(unquoted)
        except (ValueError, RecursionError):
            return unquoted, codes
        return value, [*codes, "json_string_arguments"]  # "{..." decodes to an object
    return unquoted, codes


def _unquote(text: str) -> str | None:
    """The string inside ``"..."`` or ``'...'`` when that is all the text is."""
    if len(text) < 2 or text[0] != text[-1] or text[0] not in "\"'":
        return None
    if text[0] == '"':
        try:
            value = DECODER.decode(text)
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    return text[1:-1] if "'" not in text[1:-1] else None


def _as_args(value: Any, text: str, codes: list[str]) -> tuple[dict[str, Any] | str, list[str]]:
    if isinstance(value, dict):
        return value, codes
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        return value[0], [*codes, "unwrapped_array"]
    return text, [*codes, "action_input_not_object"]


def _blob_args(value: Any, codes: list[str]) -> dict[str, Any] | str:
    """Arguments as a JSON blob gives them: an object, a JSON string, text or nothing."""
    if value is None:
        return {}
    if isinstance(value, str):
        if value.strip()[:1] != "{":
            return value
        try:
            # "{..." decodes to an object or fails; cut-off JSON is not closed
            parsed = repair_json(value.strip(), allow_truncated=False)
        except JSONRepairError:
            codes.append("action_input_not_json")
            return value
        codes.append("json_string_arguments")
        codes.extend("json:" + c for c in parsed.repairs)
        decoded: dict[str, Any] = parsed.value
        return decoded
    if isinstance(value, dict):  # the usual case: no text needed, no code
        return value
    args, more = _as_args(value, _dumps(value), [])
    codes.extend(more)
    return args


def _call_args(inner: str, codes: list[str]) -> dict[str, Any] | str:
    """Arguments of ``tool(...)``: JSON, ``key=value`` pairs, a quoted string or text."""
    if inner[0] in "{[":
        args, more = _input(inner)
        codes.extend(more)
        return args
    kwargs = _kwargs(inner, codes)
    if kwargs is not None:
        return kwargs
    args, more = _input(inner)
    codes.extend(more)
    return args


def _kwargs(text: str, codes: list[str]) -> dict[str, Any] | None:
    """``key="v", n=2`` as a dict (values decoded as JSON where they are), or None.

    The repairs a value took join ``codes`` (as ``json:`` codes); a value that is no JSON
    at all (``path=/srv/x``) is kept as text, reported as ``json:unquoted_value``."""
    out: dict[str, Any] = {}
    found: list[str] = []
    pos = 0
    for _ in range(MAX_KWARGS):
        m = P.KWARG.match(text, pos)
        if m is None:
            return None
        value = m.group("value").strip()
        try:
            result = repair_json(value, allow_truncated=False) if value else None
        except JSONRepairError:
            out[m.group("key")] = value
            found.append("json:unquoted_value")
        else:
            out[m.group("key")] = result.value if result is not None else ""
            found.extend("json:" + c for c in (result.repairs if result is not None else ()))
        pos = m.end()
        if pos >= len(text):
            codes.extend(c for c in dict.fromkeys(found) if c not in codes)
            return out
        sep = P.KWARG_SEP.match(text, pos)
        if sep is None:
            return None
        if text[pos] == "，":
            found.append("json:fullwidth_delimiter")
        pos = sep.end()
    return None


# --- JSON blobs --------------------------------------------------------------------------------


def _blob(text: str, pos: int) -> tuple[list[_Item], int] | None:
    """The tool calls of a JSON blob or tool-call markup at ``pos``, and where it ends.

    None when what is there is not a tool call. A blob cut off before its JSON closes
    still names its tools, but its arguments are not made up by closing it: each call
    keeps the blob's text as its input, with ``action_input_not_json``.
    """
    codes: list[str] = ["json_blob"]
    fname: str | None = None
    json_at = -1  # where the JSON itself starts, when not the fenced inner text
    inner = ""
    tag = P.TOOL_CALL_TAG.match(text, pos)
    if tag is not None:
        codes.append("tool_call_tag")
        fname = tag.group("fname")
        start = json_at = run_end(P.JSON_WS, text, tag.end(), len(text))
        closing = P.TOOL_CALL_CLOSE.search(text, start)
        if closing is not None:
            value, cut = _json_value(text[start : closing.start()], codes)
            end = closing.end()
        else:
            value, end, cut = _json_prefix(text, start, codes)
    elif text.startswith(("```", "~~~"), pos):
        inner, after = unfence(text[pos:]) or (text[pos:], "")
        end = len(text) - len(after)
        codes.append("fenced_json")
        value, cut = _json_value(inner, codes)
        if "json:extra_value" in codes:  # {call}; {call} in the fence: every one of them
            chain = _fenced_chain(inner.strip())
            if chain:
                return chain, end
    else:
        json_at = pos
        value, end, cut = _json_prefix(text, pos, codes)
    if value is None:
        return None
    if fname is not None:
        value = {"name": fname, "arguments": value}
    calls = call_objects(value)
    if calls is None:
        return None
    items: list[_Item] = []
    for call in calls:
        items.append(_blob_item(call, text, pos, end, codes, cut, json_at, inner))
    return items, end


def _blob_item(
    call: PendingCall,
    text: str,
    pos: int,
    end: int,
    codes: list[str],
    cut: bool = False,
    json_at: int = -1,
    inner: str = "",
) -> _Item:
    """The item of one call of the blob ``text[pos:end]`` (see :func:`_blob`)."""
    item = _Item(pos, tool=call.tool, has_input=True, thought=call.thought, codes=list(codes))
    args = written_value(call)
    if _is_finish(call.tool):
        item.final = _answer_text(args)
        item.codes.append("final_as_action")
    elif cut:
        item.args = item.raw_input = (text[json_at:end] if json_at >= 0 else inner).strip()
        item.codes.append("action_input_not_json")
    else:
        item.args = _blob_args(args, item.codes)
        if isinstance(args, str):
            item.raw_input = args
        else:
            try:
                item.raw_input = _JSON.encode(args)  # json.dumps(args, ensure_ascii=False)
                item.dumped = (args, item.raw_input)
            except (RecursionError, ValueError):  # nested too deep for json.dumps
                item.raw_input = text[pos:end]
        item.codes.extend(code for code in call.repairs if code != NOT_OBJECT)
    return item


def _json_value(chunk: str, codes: list[str]) -> tuple[Any, bool]:
    """A JSON object or array making up ``chunk`` (repaired), or None; and whether it was
    cut off (closed by the repair at the end of the chunk)."""
    stripped = chunk.strip()
    if stripped[:1] not in ("{", "["):
        return None, False
    cut = False
    try:
        result = repair_json(stripped, allow_truncated=False)
    except JSONRepairError:
        try:
            result = repair_json(stripped)
        except JSONRepairError:
            return None, False
        cut = True
    codes.extend("json:" + c for c in result.repairs)
    return result.value, cut


def _json_prefix(text: str, pos: int, codes: list[str]) -> tuple[Any, int, bool]:
    """The JSON object or array starting at ``pos`` (repaired) and its end, or
    (None, pos); and whether it was cut off (closed by the repair at the end of the text)."""
    if text[pos : pos + 1] not in ("{", "["):
        return None, pos, False
    cut = False
    try:
        value, end, repairs = decode_prefix(text, pos, allow_truncated=False)
    except JSONRepairError:
        try:
            value, end, repairs = decode_prefix(text, pos)
        except JSONRepairError:
            return None, pos, False
        cut = True
    codes.extend("json:" + c for c in repairs)
    return value, end, cut


def _find_blobs(sections: list[_Section], r: _Reading) -> None:
    """Tool-call blobs in the thoughts and unlabeled text of a reply with no Action label.

    The first section holding one is used; all the blobs in it are read, in order. The
    text before the first blob is the thought; text after the last is ignored.
    """
    for sec in sections:
        if sec.kind not in (P.THOUGHT, _PREAMBLE):
            continue
        try:
            found = _search_blobs(sec.content)
        except _BrokenChain as exc:
            raise _BrokenChain(sec.content_start + exc.pos) from None
        if not found:
            continue
        start = found[0][0]
        before = sec.content[:start].strip()
        r.thoughts = [(p, t) for p, t in r.thoughts if p != sec.start]
        if before:
            r.thoughts.append((sec.start, before))
            if sec.kind == _PREAMBLE and (sec.start, "unlabeled_thought") not in r.codes:
                r.codes.append((sec.start, "unlabeled_thought"))
        if sec.content[found[-1][1] :].strip():
            found[-1][2][-1].codes.append("text_after_input")
        for at, _end, items in found:
            for item in items:
                item.pos = sec.content_start + at
                if item.thought:
                    r.thoughts.append((item.pos, item.thought))
                r.items.append(item)
        r.items.sort(key=lambda it: it.pos)
        r.thoughts.sort(key=lambda pt: pt[0])
        return


def _search_blobs(text: str) -> list[tuple[int, int, list[_Item]]]:
    """The tool-call blobs in prose, in order: markup, fenced blocks, line-start brackets.

    Candidates come from three position-ordered scans merged lazily; each is tried once,
    and the search gives up after ``_MAX_BLOB_CANDIDATES`` failures, so it stays linear.
    It stops once the blobs hold :data:`MAX_LABELS` calls: the rest is text, as for labels
    (a megabyte of JSON lines would otherwise be tens of thousands of actions).
    """
    if not any(c in text for c in _BLOB_CHARS):  # every candidate needs one of them
        return []
    candidates = heapq.merge(
        (m.start() for m in P.TOOL_CALL_TAG.finditer(text)),
        (m.start() for m in P.FENCE_LINE.finditer(text)),
        (m.end() for m in P.BLOB_START.finditer(text)),
    )
    found: list[tuple[int, int, list[_Item]]] = []
    resume = 0
    failures = 0
    read = 0
    for start in candidates:
        if read >= MAX_LABELS:
            break
        if start < resume:
            continue
        at = run_end(P.JSON_WS, text, start, len(text))
        blob = _blob(text, at)
        if blob is None:
            failures += 1
            if failures >= _MAX_BLOB_CANDIDATES:
                break
            resume = start + 1
            continue
        for one in [(at, blob[1], blob[0]), *_chained(text, blob[1])]:
            found.append(one)
            read += len(one[2])
            resume = one[1]
    return found


def _fenced_chain(chunk: str) -> list[_Item]:
    """The calls of a fence's content made of blobs chained with ``;`` (else none)."""
    first = _blob(chunk, 0)
    chained = _chained(chunk, first[1]) if first is not None else []
    if first is None or not chained or chunk[chained[-1][1] :].strip():
        return []
    items = [item for found in (first[0], *(c[2] for c in chained)) for item in found]
    for item in items:
        item.codes.append("fenced_json")
    return items


_CHAIN: Final = re.compile(r"[ \t]*;\s*(?=[\[{<])")
"""A ``;`` between two chained calls (Llama 3.1 writes ``{call}; {call}``)."""


def _chained(text: str, end: int) -> list[tuple[int, int, list[_Item]]]:
    """The blobs chained with ``;`` after the one ending at ``end``: where each starts and
    ends, and its calls, in order. A reading never stops at the first of several chained
    calls as if it were the whole reply: JSON after a ``;`` that cannot be read at all
    raises :class:`_BrokenChain`; JSON or markup that is no call stays text
    (``text_after_input``). At most :data:`MAX_LABELS` blobs."""
    out: list[tuple[int, int, list[_Item]]] = []
    while len(out) < MAX_LABELS:
        m = _CHAIN.match(text, end)
        if m is None:
            return out
        blob = _blob(text, m.end())
        if blob is None:
            if _json_prefix(text, m.end(), [])[0] is None and text[m.end()] in "{[":
                raise _BrokenChain(m.end())
            return out
        out.append((m.end(), blob[1], blob[0]))
        end = blob[1]
    return out


# --- choosing ------------------------------------------------------------------------------------


_JSON: Final = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(..., ensure_ascii=False)``, its encoder made once."""


def _dumps(value: Any, fallback: str | None = None) -> str:
    """``value`` as JSON text. A value nested too deep for ``json.dumps`` (JSON decodes
    deeper than it encodes) gives ``fallback``, else an encoding cut at a safe depth."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):
        if fallback is not None:
            return fallback
        return json.dumps(to_jsonable(value), ensure_ascii=False)


def _is_finish(tool: str) -> bool:
    return P.normalise_word(tool) in _FINISH_NAMES


def _answer_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict) and len(value) == 1:  # {"answer": ...}
        (value,) = value.values()
        return value.strip() if isinstance(value, str) else _dumps(value)
    return _dumps(value) if value else ""


def _usable(r: _Reading) -> list[_Item]:
    """The items that say something: finish actions become answers, no-ops and empty
    answers are dropped (and remembered as problems, in case nothing else is left)."""
    items: list[_Item] = []
    for item in r.items:
        if item.final is None and item.tool is not None and _is_finish(item.tool):
            item.final = _answer_text(item.args)
            item.codes = [c for c in item.codes if c != "missing_action_input"]
            item.codes.append("final_as_action")
        if item.final is None and P.normalise_word(item.tool or "") in _NOOP_NAMES:
            r.codes.append((item.pos, "noop_action_dropped"))
            r.problems.append(
                _Problem(item.pos, "the Action is a no-op", "a tool name or 'Final Answer:'")
            )
            continue
        if item.final == "":
            r.codes.append((item.pos, "empty_final_dropped"))
            r.problems.append(_Problem(item.pos, "the final answer is empty", "the answer text"))
            continue
        items.append(item)
    return items


def _choose(r: _Reading, cut: _Cut, think: str, text: str, multi_action: bool) -> ParsedStep:
    offset = cut.body_start
    items = _usable(r)
    if not items:
        if r.problems:
            problem = min(r.problems, key=lambda p: p.pos)
        else:
            problem = _Problem(
                len(cut.text) - offset,
                "the reply has thoughts but no action and no final answer",
                "'Action:' and 'Action Input:', or 'Final Answer:'",
            )
        raise ReActParseError(
            problem.message, text=text, pos=offset + problem.pos, expected=problem.expected
        )
    if r.problems:  # recovered from: say what was dropped
        for problem in r.problems:
            if problem.message == "the Action has no tool name":
                r.codes.append((problem.pos, "empty_action_dropped"))
    first = items[0]
    drops: list[str] = []
    later = [p for p, _ in r.thoughts] + r.others + [it.pos for it in items]
    if first.final is not None:
        kept = [first]
        keep_until = min((p for p in later if p > first.pos), default=_END)
        if any(it.final is None for it in items[1:]):
            drops.append("action_after_final_dropped")
        elif keep_until != _END:
            drops.append("text_after_final_dropped")
    else:
        kept = []
        taken = 0
        last = first.pos
        for item in items:
            if item.final is not None:
                break
            taken += 1
            last = item.pos
            kept.append(item)
        if taken < len(items):
            drops.append("final_after_action_dropped")
        if not multi_action and len(kept) > 1:
            kept, last = kept[:1], kept[0].pos
            drops.append("first_action_only")
        keep_until = _END
        if drops:
            keep_until = min((p for p in later if p > last), default=_END)
    codes = [code for pos, code in sorted(r.codes, key=lambda pc: pc[0]) if pos < keep_until]
    for item in kept:
        codes.extend(item.codes)
    thoughts = [t for pos, t in r.thoughts if pos < keep_until and t]
    if think:
        thoughts.insert(0, think)
    return ParsedStep(
        thought="\n\n".join(thoughts) or None,
        actions=[
            PendingCall(
                id=None,
                tool=item.tool,
                arguments=item.args,
                raw_arguments=item.raw_input,
                error=item.error,
                repairs=_call_repairs(item),
                exact=_exact(item.args, item.raw_input, item.dumped),
            )
            for item in kept
            if item.tool is not None and item.final is None
        ],
        final_answer=first.final,
        repairs=_dedupe([*cut.codes, *codes, *drops]),
        text=cut.text,
    )


_END: Final = 1 << 62


def _call_repairs(item: _Item) -> list[str]:
    """An action's repairs: its reading's, and ``json:duplicate_key`` when its arguments
    give a key two values (:mod:`.duplicates`), however they were decoded."""
    codes = _dedupe(item.codes)
    if "json:duplicate_key" not in codes and has_conflict(item.args):
        codes.append("json:duplicate_key")
    return codes


def _exact(args: dict[str, Any] | str, raw: str, dumped: tuple[Any, str] | None = None) -> bool:
    """Whether ``raw`` is JSON text that decodes, as it stands, to the object ``args``
    (:attr:`PendingCall.exact <react_engine.types.PendingCall.exact>`).

    ``dumped``: ``(args, raw)`` when ``raw`` is ``json.dumps(args)`` of a decoded object,
    which decodes back to an equal one unless it holds a NaN (never equal to itself)."""
    if dumped is not None and dumped[0] is args and dumped[1] is raw and "NaN" not in raw:
        return isinstance(args, dict)
    if not isinstance(args, dict) or raw[:1] != "{":
        return False
    try:
        return bool(json.loads(raw) == args)
    except (ValueError, RecursionError):
        return False


def _dedupe(codes: list[str]) -> list[str]:
    return list(dict.fromkeys(codes))
