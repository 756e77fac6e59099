"""A server's rejection of a request: :func:`classify_rejection` names the parameter it
refused, :data:`REACTIONS` says what a run does about it (which capability to turn off and
remember, which protocol to switch to, what the trace shows).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .capabilities import RejectedParam

__all__ = ["REACTIONS", "SCAN_TIMEOUT", "Reaction", "classify_rejection"]

logger = logging.getLogger(__name__)


_PRIORITY: Final[tuple[RejectedParam, ...]] = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "temperature",
    "constrained_decoding",
    "reasoning_content",
)

# 400/422 are the usual answers; 404 and 501 come from servers that treat an unknown
# feature as a missing route; llama.cpp answers 500 for "tools param requires --jinja flag".
# Every rule below needs the body to name the parameter or feature as unsupported, so a
# 500 is only classified when its body says so. 401/403/429 and 502-504 never are.
_REJECTION_STATUSES: Final = frozenset({400, 404, 422, 500, 501})
_MAX_BODY: Final = 100_000


class _Pattern:
    """A ``regex`` pattern compiled (and ``regex`` imported) on first use."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            import regex

            self._compiled = regex.compile(self._source)
        return getattr(self._compiled, name)


_PARAM = r"(tools|tool_choice|parallel_tool_calls|stop)"
_NOT_SUPPORTED = r"(?:not supported|unsupported|not allowed|not permitted|not enabled)"
_NEGATED_SUPPORT = r"(?:does not|doesn't|do not|don't|cannot|can't|unable to) support"

# Patterns over the lowercased error text. Each is linear: no nested quantifiers, and every
# "anything" gap is bounded and cannot cross a sentence.
# "Unsupported parameter: 'stop' ...", "Unrecognized request arguments supplied: a, b"
_RE_PARAM_LIST = _Pattern(
    r"(?:unsupported|unknown|unrecognized|unrecognised) (?:request )?"
    r"(?:parameter|param|argument|field)s?(?: supplied)?\s*:\s*([^.\n]{1,200})"
)
# one name of such a list; "'tools[0].function.strict'" names a nested field, not ``tools``
_RE_LIST_ITEM = _Pattern(r"\s*['\"`]?([a-z_]+)(?:['\"`]|\s|$)")
# "'parallel_tool_calls' is not supported", "tools is not supported with this model"
_RE_PARAM_NOT_SUPPORTED = _Pattern(
    rf"['\"`]?\b{_PARAM}\b['\"`]? (?:param(?:eter)? |argument )?(?:is|are) {_NOT_SUPPORTED}"
)
# llama.cpp without --jinja: "tools param requires --jinja flag"
_RE_PARAM_REQUIRES = _Pattern(rf"\b{_PARAM} param(?:eter)? requires\b")
# a Python server passing the request on as keyword arguments
_RE_UNEXPECTED_KWARG = _Pattern(rf"unexpected keyword argument ['\"]{_PARAM}['\"]")
# pydantic errors quoted as Python reprs (older vLLM) or as pydantic's own text
_RE_EXTRA_REPR = _Pattern(rf"'type': 'extra_forbidden', 'loc': \('body', '{_PARAM}'\)")
_RE_EXTRA_TEXT = _Pattern(rf"(?m)^{_PARAM}\n[ \t]+extra (?:inputs|fields) (?:are )?not permitted")
# some context saying the named thing is not accepted (used with a JSON "param" field)
_RE_UNSUPPORTED_CONTEXT = _Pattern(
    rf"{_NOT_SUPPORTED}|{_NEGATED_SUPPORT}|unrecognized|unknown parameter|"
    r"supported values are|extra_forbidden|extra inputs|requires --jinja"
)
# vLLM without --enable-auto-tool-choice: no tool calls at all under tool_choice "auto"
_RE_VLLM_AUTO = _Pattern(r"--enable-auto-tool-choice|\"auto\" tool choice requires")
_RE_PARALLEL = _Pattern(
    rf"parallel[ _](?:tool|function)[ _]calls?\b[^.\n]{{0,60}}?{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} parallel[ _](?:tool|function)"
)
_RE_TOOL_CHOICE = _Pattern(
    rf"tool[ _]choice\b[^.\n]{{0,60}}?{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} (?:the )?['\"`]?tool[ _]choice"
)
_TOOL_WORDS = (
    r"(?:tools?|tool[ _]use|tool[ _]calls?|tool[ _]calling|"
    r"function[ _]calling|function[ _]calls?|functions)"
)
_RE_TOOLS = _Pattern(
    rf"{_NEGATED_SUPPORT} (?:the )?{_TOOL_WORDS}\b"
    rf"|\b{_TOOL_WORDS}\b(?: is| are)? (?:not supported|unsupported|not enabled|not available)"
    r"|not supported for [^.\n]{0,60}?(?:function[ _]calling|tool[ _]use|tools)"
)
_RE_STOP = _Pattern(
    r"\bstop(?:[ _](?:sequences?|words?))?\b['\"`]?(?: param(?:eter)?)? (?:is|are) "
    rf"{_NOT_SUPPORTED}"
    rf"|{_NEGATED_SUPPORT} (?:the )?['\"`]?stop\b"
)

# OpenAI's reasoning models: "Unsupported value: 'temperature' does not support 0 with this
# model. Only the default (1) value is supported."
_RE_TEMPERATURE = _Pattern(
    r"\btemperature\b['\"`]?(?: param(?:eter)?)? (?:does not support|is not supported|"
    r"is unsupported|not supported)"
    r"|unsupported value:? ['\"`]?temperature\b"
)
# DeepSeek's thinking mode with tools: "Missing `reasoning_content` field in the assistant
# message at message index 2" (the reasoning must be sent back while the tool loop goes on)
_RE_REASONING_MISSING = _Pattern(
    r"\bmissing\b[^.\n]{0,20}?\breasoning_content\b"
    r"|\breasoning_content\b[^.\n]{0,40}?\b(?:is required|must be (?:passed|sent|provided|"
    r"included))"
)
# a server that takes no reasoning_content in messages: "('reasoning_content' was
# unexpected)", "reasoning_content ... not supported", "unknown field reasoning_content"
_RE_REASONING_REJECTED = _Pattern(
    rf"['\"`]?\breasoning_content\b['\"`]? (?:was unexpected|(?:is |are )?{_NOT_SUPPORTED})"
    r"|(?:unknown|unrecognized|unexpected|extra) (?:field|key|property|argument)s?:? "
    r"['\"`]?reasoning_content\b"
)


_CONSTRAINT_PARAMS: Final = frozenset(
    {"grammar", "response_format", "guided_grammar", "guided_json", "json_schema", "format"}
)
_RE_CONSTRAINT: Final = _Pattern(
    r"\b(grammar|response_format|guided_(?:grammar|json|decoding)|json_schema|structured output)"
    r"\b[^.\n]{0,80}?\b(not supported|unsupported|not allowed|unknown|unrecognized|"
    r"not permitted|invalid|extra)\b"
    r"|\b(unsupported|unknown|unrecognized|extra)\b[^.\n]{0,40}?\b(grammar|response_format|"
    r"guided_(?:grammar|json)|json_schema)\b"
)


def classify_rejection(status_code: int | None, body: str) -> RejectedParam | None:
    """Which request parameter a server rejected as unsupported, if its error says so.

    ``"tools"``: the server takes no tools (fall back to text); the others name a parameter
    to drop before retrying, except ``"reasoning_content_missing"`` (send the reasoning
    back). ``None``: something else, not to be "fixed" by dropping features.
    ``status_code=None`` is read like a 400. The body may be JSON in any usual envelope, or
    text; a JSON ``param`` is trusted only when the message says it is unsupported.
    """
    if status_code is not None and status_code not in _REJECTION_STATUSES:
        return None
    try:
        return _classify(body)
    except TimeoutError:
        # The patterns are linear, but the body is a stranger's text: a scan that takes
        # this long is not worth finishing, and an unclassified error is simply raised.
        logger.warning("an error body took too long to classify; leaving it unclassified")
        return None


SCAN_TIMEOUT: float = 0.5
"""Seconds each pattern may spend on one error body (``regex``'s ``timeout=``)."""


def _classify(body: str) -> RejectedParam | None:
    t = SCAN_TIMEOUT
    body = body[:_MAX_BODY]
    params: list[str] = []
    extra: list[str] = []  # top-level request fields pydantic reported as forbidden extras
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        text = body.lower()
    else:
        texts: list[str] = []
        _walk_error(data, texts, params, extra, 0)
        text = "\n".join(texts).lower()
    if _RE_REASONING_MISSING.search(text, timeout=t):
        return "reasoning_content_missing"
    found: set[str] = set()

    for match in _RE_PARAM_LIST.finditer(text, timeout=t):
        for item in match.group(1).split(","):
            name = _RE_LIST_ITEM.match(item, timeout=t)
            if name:
                found.add(name.group(1))
    for pattern in (
        _RE_PARAM_NOT_SUPPORTED,
        _RE_PARAM_REQUIRES,
        _RE_UNEXPECTED_KWARG,
        _RE_EXTRA_REPR,
        _RE_EXTRA_TEXT,
    ):
        found.update(m.group(1) for m in pattern.finditer(text, timeout=t))
    found.update(extra)
    if any(p in _PRIORITY for p in params) and _RE_UNSUPPORTED_CONTEXT.search(text, timeout=t):
        found.update(params)
    for kind in _PRIORITY:
        if kind in found:
            return kind

    for pattern, named in _PHRASES:
        if pattern.search(text, timeout=t):
            return named
    if found & _CONSTRAINT_PARAMS or _RE_CONSTRAINT.search(text, timeout=t):
        return "constrained_decoding"
    return None


_PHRASES: Final[tuple[tuple[_Pattern, RejectedParam], ...]] = (
    (_RE_VLLM_AUTO, "tools"),
    (_RE_PARALLEL, "parallel_tool_calls"),
    (_RE_TOOL_CHOICE, "tool_choice"),
    (_RE_TOOLS, "tools"),
    (_RE_STOP, "stop"),
    (_RE_TEMPERATURE, "temperature"),
    (_RE_REASONING_REJECTED, "reasoning_content"),
)
"""Phrases naming what was rejected, in the order they are tried."""


def _walk_error(
    node: Any, texts: list[str], params: list[str], extra: list[str], depth: int
) -> None:
    if depth > 12:
        return
    if isinstance(node, str):
        texts.append(node)
        stripped = node.strip()
        if stripped[:1] in ("{", "[") and depth < 12:
            try:
                nested = json.loads(stripped)
            except (ValueError, RecursionError):
                return
            _walk_error(nested, texts, params, extra, depth + 1)
    elif isinstance(node, list):
        for item in node:
            _walk_error(item, texts, params, extra, depth + 1)
    elif isinstance(node, dict):
        loc = node.get("loc")
        kind = str(node.get("type", "")) + " " + str(node.get("msg", ""))
        if isinstance(loc, list) and re.search(
            r"extra_forbidden|extra (?:inputs|fields)", kind.lower()
        ):
            if len(loc) == 2 and loc[0] == "body" and isinstance(loc[1], str):
                extra.append(loc[1])
            elif loc[-1:] == ["reasoning_content"]:  # a message field: body.messages.N.<field>
                extra.append("reasoning_content")
        param = node.get("param")
        if isinstance(param, str):
            params.append(param)
        for key, value in node.items():
            if key in ("input", "loc", "param"):
                continue  # the request echoed back (tool descriptions are not errors)
            _walk_error(value, texts, params, extra, depth + 1)


@dataclass(frozen=True, slots=True)
class Reaction:
    """What a run does when the server rejects one kind of parameter."""

    capability: str
    """The :class:`Capabilities` flag to set for this run and remember for the model."""
    event: str
    """For the trace and the log; ``{model}``, ``{url}`` and ``{protocol}`` (the protocol
    switched to) are filled in."""
    switch: bool = False
    """The rejection rules out a protocol whose registration requires the capability: it
    applies only while one runs (and the user let the agent choose), and the run goes on
    with the one ``"auto"`` chooses next (:func:`~react_engine.protocols.registry.auto_order`)."""
    value: bool = False
    """What the flag becomes: off for a rejected parameter, on for a required one."""


REACTIONS: Final[Mapping[RejectedParam, Reaction]] = {
    "tools": Reaction(
        "function_calling",
        "fallback: {model} at {url} rejected tools; switched to the {protocol} protocol",
        switch=True,
    ),
    "stop": Reaction("stop", "stop sequences rejected; cutting replies client-side"),
    "constrained_decoding": Reaction(
        "constrained_decoding",
        "constrained decoding rejected by {model} at {url}; "
        "sending requests without a grammar or schema",
    ),
    "tool_choice": Reaction(
        "tool_choice_required", "tool_choice rejected; enforcing it client-side"
    ),
    "parallel_tool_calls": Reaction("parallel_tool_calls", "parallel_tool_calls rejected"),
    "temperature": Reaction("sampling", "temperature rejected by {model}; sending none"),
    "reasoning_content": Reaction(
        "reasoning_echo", "reasoning_content rejected by {model} at {url}; not sending it back"
    ),
    "reasoning_content_missing": Reaction(
        "reasoning_echo",
        "{model} at {url} wants its reasoning_content back on tool-call turns; sending it",
        value=True,
    ),
    "stream_tools": Reaction(
        "stream_tools",
        "{model} at {url} sent an empty stream for a request with tools; "
        "sending such requests without streaming",
    ),
}
"""One row per parameter a server may reject (``stream_tools``: ``stream=True`` beside
``tools``, refused with HTTP 200 and no chunk, which the loop sees, not the classifier)."""
