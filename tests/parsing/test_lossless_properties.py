"""The lossless property: every way the readers know to damage a call either gives back
exactly the arguments the model meant, or no call that runs.

Random tools and arguments are rendered as each protocol writes a call (native
``tool_calls`` arguments, a text ``Action Input``, a structured step); the arguments' JSON
is then damaged in every way the readers repair (fences, quote styles, full-width
delimiters, comments, trailing commas, a missing final brace...) and in the ways they must
not guess (cuts, merged tokens, unquoted and unescaped text, random characters), alone and
combined. Each damaged reply goes through the protocol and the policy (``decide``):
a call that would run must carry exactly the original arguments (or, as plain text, the
text the model wrote). The number of damaged replies read is asserted.

Profiles as in ``test_properties.py``: 200 examples by default,
``HYPOTHESIS_PROFILE=fuzz`` for many more.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from react_engine import Tool
from react_engine.protocols.base import Protocol, RequestContext
from react_engine.protocols.decision import CallTools
from react_engine.protocols.function_calling import FunctionCallingProtocol
from react_engine.protocols.policy import decide
from react_engine.protocols.structured import StructuredOutputProtocol
from react_engine.protocols.text import TextReActProtocol
from react_engine.transport.capabilities import Capabilities
from react_engine.types import ModelResponse, ToolCall

pytestmark = pytest.mark.slow  # property-based tests (hypothesis)

settings.register_profile(
    "parsing", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "parsing"))
if os.environ.get("HYPOTHESIS_PROFILE") != "fuzz":
    # make test draws the same damaged replies every run (a new draw that finds something
    # should fail a fuzz run, not an unrelated CI run); make fuzz explores afresh
    PROFILE = settings(PROFILE, derandomize=True)

# --- arguments, and JSON written in any style ------------------------------------------------------

KEYS = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=8)
TRICKY = "\"'“”‘’：，,:{}[]\\/ \n\t#*=+-_.0123456789aé中"
STRINGS = st.text(alphabet=TRICKY, max_size=12) | st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**6), max_value=10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | STRINGS
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(KEYS, VALUES, min_size=1, max_size=4)
TOOL_NAMES = st.from_regex(r"[a-z][a-z0-9_]{2,12}", fullmatch=True).filter(
    lambda n: n not in ("none", "null", "finish", "final", "answer", "nothing", "final_answer")
)


class Style:
    """How a model may write JSON: every choice here is one the decoder reads losslessly."""

    def __init__(self, **choices: Any) -> None:
        self.quote = choices.get("quote", ('"', '"'))
        self.colon = choices.get("colon", ": ")
        self.comma = choices.get("comma", ", ")
        self.bare_keys = choices.get("bare_keys", False)
        self.python = choices.get("python", False)
        self.trailing = choices.get("trailing", False)
        self.comment = choices.get("comment", "")

    def string(self, s: str) -> str:
        body = json.dumps(s, ensure_ascii=False)[1:-1]
        open_, close = self.quote
        if open_ == "'":
            body = body.replace('\\"', '"').replace("'", "\\'")
        return open_ + body + close

    def key(self, k: str) -> str:
        return k if self.bare_keys and k.isidentifier() else self.string(k)

    def write(self, value: Any) -> str:
        if isinstance(value, dict):
            items = [f"{self.key(k)}{self.colon}{self.write(v)}" for k, v in value.items()]
            return "{" + self._join(items) + "}"
        if isinstance(value, list):
            return "[" + self._join([self.write(v) for v in value]) + "]"
        if isinstance(value, str):
            return self.string(value)
        if self.python and (value is None or isinstance(value, bool)):
            return {None: "None", True: "True", False: "False"}[value]
        return json.dumps(value)

    def _join(self, items: list[str]) -> str:
        sep = self.comment + self.comma
        return sep.join(items) + ("," if self.trailing and items else "")


STYLES: dict[str, Style] = {
    "plain": Style(),
    "single_quotes": Style(quote=("'", "'")),
    "python": Style(quote=("'", "'"), python=True),
    "bare_keys": Style(bare_keys=True),
    "trailing_comma": Style(trailing=True),
    "fullwidth": Style(colon="：", comma="，"),
    "comment": Style(comment=" /* c */"),
    "compact": Style(colon=":", comma=","),
}
"""Lossless ways to write the same value."""


def _fence(text: str) -> str:
    return f"```json\n{text}\n```"


WRAPS: dict[str, Callable[[str], str]] = {
    "none": lambda t: t,
    "fence": _fence,
    "bom": lambda t: "\ufeff" + t,
    "missing_final_brace": lambda t: t[:-1] if t.endswith("}") else t,
    "extra_closing_brace": lambda t: t + "}",
    "prose_after": lambda t: t + "\nThis is what I will use.",
    "doubled_braces": lambda t: t.replace("{", "{{").replace("}", "}}"),
}
"""Lossless things around the value (or a missing last brace at the very end)."""

MUTATIONS = "\"'“”‘’：，,:{}[]\\ \nx"
"""Characters inserted into the JSON: the ones that decide where a value ends. (Deleting a
character can make another lossless reading, an unquoted key, and a ``#`` or ``/`` a
comment, which only the decoder could say; the lossless styles above cover those.)"""

# --- one damaged reply per protocol ---------------------------------------------------------------


def _tool(name: str) -> Tool:
    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    return Tool.from_schema(name, schema, lambda args: "ok")


def _reply(protocol: str, tool: str, written: str, *, ends_here: bool) -> ModelResponse:
    if protocol == "function_calling":
        return ModelResponse(content=None, tool_calls=[ToolCall("call_1", tool, written)])
    if protocol == "text":
        return ModelResponse(
            content=f"Thought: I will use {tool}.\nAction: {tool}\nAction Input: {written}",
            finish_reason="stop",
        )
    head = f'{{"thought": "I will use it.", "action": {{"tool": "{tool}", "arguments": '
    return ModelResponse(content=head + written + ("" if ends_here else "}}"), finish_reason="stop")


PROTOCOLS: dict[str, Protocol] = {
    "function_calling": FunctionCallingProtocol(),
    "text": TextReActProtocol(),
    "structured": StructuredOutputProtocol(),
}

TRIED: Counter[str] = Counter()


def _check(
    protocol: str,
    tool: str,
    arguments: dict[str, Any],
    written: str,
    cut: bool,
    oracle: tuple[str, ...] | list[str] = (),
) -> None:
    ctx = RequestContext(
        model="m",
        history=[],
        tools=[_tool(tool)],
        tool_choice="auto",
        capabilities=Capabilities(),
    )
    reply = _reply(protocol, tool, written, ends_here=cut)
    decision = decide(PROTOCOLS[protocol], reply, ctx)
    TRIED["replies"] += 1
    runs = [c for c in decision.calls if c.error is None] if isinstance(decision, CallTools) else []
    if not runs:
        TRIED["refused"] += 1
        return
    expected = json.dumps(arguments, sort_keys=True)
    for call in runs:
        assert call.tool == tool, (protocol, written, call)
        if isinstance(call.arguments, str):
            # plain text input, the text as the model wrote it: never a decoded guess
            assert call.arguments.strip() in written, (protocol, written, call)
            assert not call.lossy
            TRIED["text"] += 1
            continue
        got = json.dumps(call.arguments, sort_keys=True)
        if got == expected:
            TRIED["exact"] += 1
        elif cut:
            # a reply that ends before its closing brackets: what it holds is read as it
            # stands (the model stopped there), never a value cut in the middle
            assert _prefix(call.arguments, arguments), (protocol, written, call.repairs)
            TRIED["prefix"] += 1
        else:
            assert got in oracle, (protocol, written, call.repairs)
            TRIED["as_written"] += 1


def _prefix(read: Any, full: Any) -> bool:
    """Whether ``read`` is ``full`` with its end missing, at a value boundary."""
    if isinstance(full, dict) and isinstance(read, dict):
        keys = list(read)
        if keys != list(full)[: len(keys)]:
            return False
        return all(read[k] == full[k] for k in keys[:-1]) and (
            not keys or _prefix(read[keys[-1]], full[keys[-1]])
        )
    if isinstance(full, list) and isinstance(read, list):
        if not read:
            return True
        if len(read) > len(full) or read[:-1] != full[: len(read) - 1]:
            return False
        return not read or _prefix(read[-1], full[len(read) - 1])
    return json.dumps(read) == json.dumps(full)


def _ascii_delimiters(text: str) -> str:
    """``，`` and ``：`` outside double-quoted strings as ``,`` and ``:``."""
    out, in_string, escaped = [], False, False
    for c in text:
        if in_string:
            if c == '"' and not escaped:
                in_string = False
            escaped = c == "\\" and not escaped
        elif c == '"':
            in_string = True
        else:
            c = {"，": ",", "：": ":"}.get(c, c)
        out.append(c)
    return "".join(out)


def _as_written(text: str) -> list[str]:
    """The values a damaged text still says as JSON (raw control characters allowed; the
    final brackets may be missing at the end of the reply, as a structured step's are when
    a closer of the arguments was deleted): what the model wrote, read exactly."""
    out = []
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] in "'‘’" and stripped[-1] in "'‘’":
        # JSON inside a single-quoted string, straight or curly (double-encoded arguments):
        # what the string holds is what the model wrote, read as JSON
        out += _as_written(stripped[1:-1])
    if len(stripped) > 3 and stripped.startswith("{{") and stripped.endswith("}}"):
        # a template's escaping ({{ }} for { }): every pair undone, inside strings as well
        out += _as_written(stripped.replace("{{", "{").replace("}}", "}"))
    # what is lossless as written: full-width delimiters, numbers written .5 or 5.,
    # trailing commas
    fullwidth = _ascii_delimiters(text)
    variants = {text, fullwidth}
    for t in (text, fullwidth):
        t = re.sub(r"(?<![\w.])\.(\d)", r"0.\1", t)
        variants |= {t, re.sub(r"(\d)\.(?!\d)", r"\1.0", t)}
    variants |= {re.sub(r",\s*(?=[}\]]|$)", "", v) for v in variants}  # trailing commas
    # strings in single quotes, with no other quote inside: the same strings, as written
    variants |= {re.sub(r"'([^'\"\\]*)'", r'"\1"', v) for v in variants}
    for quotes in ("''", "“”", "‘’"):  # quoted strings, quotes of other kinds inside
        pattern = f"[{quotes}]([^{quotes}\\\\]*)[{quotes}]"
        variants |= {re.sub(pattern, lambda m: json.dumps(m[1]), v) for v in variants}
    variants |= {re.sub(r"[“”]([^'\"“”‘’\\]*)[“”]", r'"\1"', v) for v in variants}
    variants |= {re.sub(r"[‘’]([^'\"“”‘’\\]*)[‘’]", r'"\1"', v) for v in variants}
    for variant in variants:
        for end in ("", "}", "]", "}}", "]}", "}}}"):
            with contextlib.suppress(ValueError, RecursionError):
                out.append(json.dumps(json.loads(variant + end, strict=False), sort_keys=True))
    # a complete value followed only by closing brackets nothing opened (extra_closing_bracket)
    for variant in variants:
        try:
            value, end = json.JSONDecoder(strict=False).raw_decode(variant)
        except (ValueError, RecursionError):
            continue
        if not variant[end:].strip(" \t\r\n}]"):
            out.append(json.dumps(value, sort_keys=True))
    # a complete object after prose (no quote or brace before it): the object as written
    start = text.find("{")
    if start > 0 and not any(c in "\"'“”‘’{}" for c in text[:start]):
        for variant in variants:
            try:
                value = json.JSONDecoder(strict=False).raw_decode(variant, variant.find("{"))[0]
            except (ValueError, RecursionError):
                continue
            out.append(json.dumps(value, sort_keys=True))
    return out


@settings(PROFILE)
@given(
    TOOL_NAMES,
    ARGUMENTS,
    st.sampled_from(sorted(STYLES)),
    st.sampled_from(sorted(WRAPS)),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, len(MUTATIONS) - 1)), max_size=6),
    st.floats(0, 1),
)
def _every_damage(
    tool: str,
    arguments: dict[str, Any],
    style: str,
    wrap: str,
    mutations: list[tuple[float, int]],
    cut_at: float,
) -> None:
    clean = STYLES[style].write(arguments)
    lossless = WRAPS[wrap](clean)
    for protocol in PROTOCOLS:  # lossless damage: exactly the arguments
        _check(protocol, tool, arguments, lossless, False)
    # damage that guesses: mutate the plain JSON; a reading that runs must be the original
    # arguments or what the mutated text says as JSON, nothing in between
    text = json.dumps(arguments, ensure_ascii=False)
    for at, which in mutations:  # each prefix of the insertions, in turn
        pos = int(at * len(text))
        text = text[:pos] + MUTATIONS[which] + text[pos:]
        if text.strip():
            for protocol in PROTOCOLS:
                _check(protocol, tool, arguments, text, False, _as_written(text))
    cut = lossless[: int(cut_at * len(lossless))]  # a reply cut short
    if cut.strip():
        for protocol in PROTOCOLS:
            _check(protocol, tool, arguments, cut, True)


def test_every_damaged_call_runs_exactly_or_not_at_all() -> None:
    TRIED.clear()
    _every_damage()
    # the number of damaged replies read (200 examples, 3 protocols, 2 or more each)
    assert TRIED["replies"] >= 1000, TRIED
    assert TRIED["exact"] >= 200, TRIED  # lossless damage is still read...
    assert TRIED["refused"] >= 300, TRIED  # ... and guesses are refused


# --- readings the fuzz run raised, decided one by one ---------------------------------------------


def _runs(protocol: str, written: str) -> list[Any]:
    ctx = RequestContext(
        model="m", history=[], tools=[_tool("kw2")], tool_choice="auto", capabilities=Capabilities()
    )
    decision = decide(PROTOCOLS[protocol], _reply(protocol, "kw2", written, ends_here=False), ctx)
    calls = decision.calls if isinstance(decision, CallTools) else []
    return [c.arguments for c in calls if c.error is None]


def test_a_single_quoted_string_holding_brackets_is_read_as_written() -> None:
    """Decided: the decoder is right. ``'...'`` is a quote style (lossless) and what it holds,
    brackets and double quotes included, is the string; the one brace then missing at the
    very end of a structured step is the missing final brace (lossless). The model wrote a
    string, and the tool gets that string, never ``{"a": 1}`` and ``b`` guessed apart."""
    written = """{"k": '{"a": 1}, "b": 2}'"""
    assert _runs("structured", written) == [{"k": '{"a": 1}, "b": 2}'}]
    assert json.dumps({"k": '{"a": 1}, "b": 2}'}, sort_keys=True) in _as_written(written)
    # the string left open swallows the brackets to the end: a guess, refused
    assert _runs("structured", """{"k": '{"a": 1}, "b": 2}""") == []


def test_braces_doubled_at_one_end_only_are_no_template_escaping() -> None:
    """``{{{X}}`` is not ``{X}`` escaped (three braces open, two close): undoing "doubled
    braces" twice at the start and once at the end guessed which braces the model meant.
    Refused; ``{{X}}`` and ``{{{{X}}}}`` are read as written."""
    inner = '{"a": {"b": 1}, "c": "{x}"}'
    for protocol in PROTOCOLS:
        assert _runs(protocol, "{{" + inner + "}") == [], protocol
    for protocol in ("function_calling", "text"):
        doubled = inner.replace("{", "{{").replace("}", "}}")
        assert _runs(protocol, doubled) == [json.loads(inner)], protocol
        assert _runs(protocol, doubled.replace("{", "{{").replace("}", "}}")) == [json.loads(inner)]
