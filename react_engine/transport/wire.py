"""The wire format: typed requests to the chat completions API's keyword arguments, and
the SDK's replies, chunks and exceptions back to ours (the only code that builds
``{"role": ...}`` dicts or reads the SDK's objects). Replies are read tolerantly and made
valid Unicode; secrets are masked in every message built from a server's text.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from ..errors import ContextWindowExceeded, ModelAPIError, ModelRequestError, ModelUnavailableError
from ..text import valid_unicode
from ..types import (
    Constraint,
    Message,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolCallChunk,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..wording import Notice, NoticeCode

__all__ = [
    "context_overflow",
    "delta_from_chunk",
    "error_body",
    "mask_key",
    "mask_secret",
    "message_dict",
    "request_payload",
    "response_from_sdk",
    "sdk_arguments",
    "translate_error",
]


def message_dict(message: Message) -> dict[str, Any]:
    """One typed message as the chat completions API wants it, its text valid Unicode (a
    lone surrogate would make every later request of the run impossible to encode)."""
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": valid_unicode(message.content)}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": valid_unicode(message.content),
        }
    # An empty string rather than null: llama.cpp's server (and others) reject a null
    # content even beside tool_calls; OpenAI accepts both.
    content = "" if message.content is None else valid_unicode(message.content)
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": valid_unicode(c.arguments)},
            }
            for c in message.tool_calls
        ]
    if message.reasoning is not None:
        out["reasoning_content"] = valid_unicode(message.reasoning)
    return out


def request_payload(request: ModelRequest) -> dict[str, Any]:
    """The exact keyword arguments passed to ``client.chat.completions.create``."""
    payload: dict[str, Any] = {
        "model": request.model,
        "messages": [message_dict(m) for m in request.messages],
    }
    if request.tools:
        payload["tools"] = list(request.tools)
        if (choice := request.tool_choice) is not None:
            named = {"type": "function", "function": {"name": choice}}
            payload["tool_choice"] = choice if choice in ("auto", "required", "none") else named
        if request.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = request.parallel_tool_calls
    if request.stop:
        payload["stop"] = list(request.stop)
    s = request.settings
    for name in ("temperature", "seed", "max_tokens", "top_p"):
        if (value := getattr(s, name)) is not None:
            payload[name] = value
    extra: dict[str, Any] = dict(s.extra_body) if s.extra_body else {}
    if request.constraint is not None:
        _constrain(request.constraint, payload, extra)
    if extra:
        payload["extra_body"] = extra
    return payload


def sdk_arguments(request: ModelRequest) -> dict[str, Any]:
    """The keywords of ``chat.completions.create`` for ``request``: its
    :func:`request_payload` carried in ``extra_body``, which the SDK sends as given instead
    of walking it against its typed parameters (docs/performance.md). The JSON sent is the
    same, and the settings' own ``extra_body`` still wins over it."""
    payload = request_payload(request)
    body = {k: v for k, v in payload.items() if k not in ("model", "extra_body")}
    extra = payload.get("extra_body")
    return {
        "model": payload["model"],
        "messages": [],
        "extra_body": {**body, **extra} if extra else body,
    }


def _constrain(c: Constraint, payload: dict[str, Any], extra: dict[str, Any]) -> None:
    """Put a constraint where its kind of server reads it: llama.cpp's ``grammar``, vLLM's
    ``guided_grammar`` / ``guided_json``, else ``response_format`` with a JSON Schema."""
    if c.style == "llama.cpp" and c.grammar is not None:
        extra["grammar"] = c.grammar
    elif c.style == "vllm" and c.grammar is not None:
        extra["guided_grammar"] = c.grammar
    elif c.style == "vllm" and c.json_schema is not None:
        extra["guided_json"] = dict(c.json_schema)
    elif c.json_schema is not None:
        spec: dict[str, Any] = {"name": "react_step", "schema": dict(c.json_schema)}
        if c.strict:
            spec["strict"] = True
        payload["response_format"] = {"type": "json_schema", "json_schema": spec}


def mask_secret(text: str, secret: str | None) -> str:
    """Replace a secret (an API key) wherever it appears by a masked form."""
    if not secret or len(secret) < 4 or secret not in text:
        return text
    return text.replace(secret, mask_key(secret))


def mask_key(key: str | None) -> str:
    """``sk-abc...wxyz`` style: enough to tell keys apart, not enough to use one."""
    if not key:
        return "(none)"
    if len(key) <= 8:
        return "***"
    return f"{key[:3]}...{key[-4:]}"


_URL = re.compile(
    r"(?P<head>[^:/?#]+://)?(?P<user>[^/?#]*@)?(?P<path>[^?#]*)(?P<query>\?[^#]*)?(?P<tail>#.*)?",
    re.DOTALL,
)


def mask_url(url: str) -> str:
    """``url`` with the credentials it may carry masked (the password of ``user:password@``,
    a lone ``token@``, every query value, a fragment); idempotent."""
    found = _URL.fullmatch(url)
    assert found is not None  # every part is optional, and the path takes the rest
    head, user, path, query, tail = found.group("head", "user", "path", "query", "tail")
    if user:
        name, colon, _ = user[:-1].partition(":")
        user = f"{name}:***@" if colon else "***@"
    if query:
        pairs = (pair.partition("=") for pair in query[1:].split("&"))
        query = "?" + "&".join(
            f"{name}={'***' if value else ''}" if eq else ("***" if name else "")
            for name, eq, value in pairs
        )
    return "".join((head or "", user or "", path, query or "", "#***" if tail else ""))


MAX_TOKEN_COUNT = 10**12
"""The largest token count read from a server (a larger one is garbage)."""


def _count(value: Any) -> int | None:
    """A token count sent as an int, a float or a numeric string; ``None`` for garbage."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if value > MAX_TOKEN_COUNT or not math.isfinite(value):
        return None
    return max(0, int(value))


def _field(raw: Any, name: str) -> Any:
    if isinstance(raw, Mapping):
        return raw.get(name)
    return getattr(raw, name, None)


def _usage(raw: Any, events: list[Notice]) -> Usage:
    """Token counts from the reply's ``usage``: counts that are not counts are read as 0
    (and named in ``events``), negative ones as 0."""
    if raw is None:
        return Usage(requests=1)
    if isinstance(raw, str | bytes | int | float | list | tuple):
        events.append(Notice(NoticeCode.USAGE_NOT_OBJECT, value=_one_value(raw)))
        return Usage(requests=1)
    bad: list[str] = []

    def count(source: Any, name: str) -> int:
        value = _field(source, name)
        number = _count(value)
        if number is None:
            if value is not None:
                bad.append(f"{name}={_one_value(value)}")
            return 0
        return number

    prompt = count(raw, "prompt_tokens")
    completion = count(raw, "completion_tokens")
    total = max(count(raw, "total_tokens"), prompt + completion)
    cached = count(_field(raw, "prompt_tokens_details"), "cached_tokens")
    extra = getattr(raw, "model_extra", None)
    if not cached and isinstance(extra, Mapping):  # DeepSeek's
        cached = count(extra, "prompt_cache_hit_tokens")
    if bad:
        events.append(Notice(NoticeCode.USAGE_INVALID, counts=", ".join(bad)))
    return Usage(prompt, completion, total, cached, 1)


def _one_value(value: Any) -> str:
    text = valid_unicode(repr(value))
    return text if len(text) <= 40 else text[:39] + "…"


def _text_content(content: Any) -> str | None:
    """The reply's text: a string, or the text parts of a list of content parts
    (``[{"type": "text", "text": "..."}]``), joined."""
    if isinstance(content, str):
        return valid_unicode(content)
    if not isinstance(content, list | tuple):
        return None
    texts = [
        part if isinstance(part, str) else _field(part, "text")
        for part in content
        if isinstance(part, str)
        or (
            _field(part, "type") in (None, "text", "output_text")
            and isinstance(_field(part, "text"), str)
        )
    ]
    return valid_unicode("".join(texts)) if texts else None


def response_from_sdk(completion: Any) -> ModelResponse:
    """Convert an SDK ``ChatCompletion`` (or anything shaped like one) to a ModelResponse."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelUnavailableError("the API returned a reply with no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ModelUnavailableError("the API returned a choice with no message")
    calls: list[ToolCall] = []
    for tc in getattr(message, "tool_calls", None) or []:
        call_id, name, arguments = _call_parts(tc)
        if name:
            calls.append(ToolCall(call_id, name, arguments or ""))
    events: list[Notice] = []
    return ModelResponse(
        content=_text_content(getattr(message, "content", None)),
        tool_calls=calls,
        reasoning=_reasoning(message),
        finish_reason=getattr(choice, "finish_reason", None),
        usage=_usage(getattr(completion, "usage", None), events),
        model=getattr(completion, "model", None),
        events=events,
    )


def _reasoning(message: Any) -> str | None:
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    # JSON can carry lone surrogates ("\ud83d"): keep the transcript encodable as UTF-8.
    return valid_unicode(reasoning) if isinstance(reasoning, str) and reasoning else None


def _call_parts(tc: Any) -> tuple[str | None, str | None, str | None]:
    fn = getattr(tc, "function", None)
    arguments = getattr(fn, "arguments", None)
    if arguments is not None and not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    parts = (getattr(tc, "id", None), getattr(fn, "name", None), arguments)
    id_, name, text = (valid_unicode(str(part)) if part else None for part in parts)
    return id_, name, text


def delta_from_chunk(chunk: Any) -> ModelDelta:
    """Convert one SDK ``ChatCompletionChunk`` (or anything shaped like one) to a delta."""
    events: list[Notice] = []
    raw_usage = getattr(chunk, "usage", None)
    usage = _usage(raw_usage, events) if raw_usage is not None else None
    model = getattr(chunk, "model", None)
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ModelDelta(usage=usage, model=model, events=tuple(events))
    choice = choices[0]
    delta = getattr(choice, "delta", None)
    calls: list[ToolCallChunk] = []
    for position, tc in enumerate(getattr(delta, "tool_calls", None) or []):
        index = getattr(tc, "index", None)
        if not isinstance(index, int) or isinstance(index, bool):
            index = position
        calls.append(ToolCallChunk(index, *_call_parts(tc)))
    return ModelDelta(
        content=_text_content(getattr(delta, "content", None)),
        reasoning=_reasoning(delta),
        tool_calls=tuple(calls),
        finish_reason=getattr(choice, "finish_reason", None),
        usage=usage,
        model=model,
        events=tuple(events),
    )


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The wait a server asked for, in seconds (a date past parsing is no wait asked)."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        with contextlib.suppress(ValueError):
            return max(0.0, float(headers.get(name) or "") / scale)
    import email.utils  # an HTTP date: rare, so not imported with the library

    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after") or "")
    except (ValueError, TypeError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_body(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text: str = err["message"]
            if err.get("param"):
                text += f" (param: {err['param']})"
            return text
        return json.dumps(body, ensure_ascii=False)
    if isinstance(body, str):
        return body
    response = getattr(exc, "response", None)
    try:
        return str(response.text) if response is not None else str(exc)
    except Exception:  # a streamed or closed response
        return str(exc)


_OVERFLOW_PHRASES = (
    "context_length_exceeded",  # OpenAI's error code (also sent by many proxies)
    "exceed_context_size",  # llama.cpp's server: type "exceed_context_size_error"
    "maximum context length",  # OpenAI, vLLM, DeepSeek, llama-cpp-python: "This model's ..."
    "context window",  # "exceed context window of 8192", "exceeds the context window"
    "available context size",  # llama.cpp: "the request exceeds the available context size"
    "prompt is too long",  # Anthropic's OpenAI-compatible endpoint
    "reduce the length of the messages",  # Groq and others, after the figures
    "input token count",  # Gemini: "The input token count (N) exceeds the maximum ..."
)
"""Lower-case phrases by which servers say a request does not fit the context window."""


def context_overflow(status_code: int | None, body: str, code: str | None = None) -> bool:
    """Whether a rejected request failed because it does not fit the model's context window
    (prompt plus ``max_tokens``); servers send a 400, some proxies a 413."""
    if status_code not in (None, 400, 413, 422):
        return False
    if code == "context_length_exceeded" or status_code == 413:
        # 413 is "request entity too large": a proxy's own limit on the body, often a bare
        # HTML page. What helps is the same as for a full context window: a shorter request.
        return True
    text = body[:4000].lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


def translate_error(
    exc: BaseException, *, secret: str | None = None, limit: float | None = None
) -> ModelAPIError:
    """Map what one attempt raised to our tree: the attempt's time limit (``limit``
    seconds) and transient SDK errors to ModelUnavailableError. Raise the result
    outside the ``except`` block: the SDK's exception would carry the unmasked API key."""
    import openai  # loaded already: the exception came from it

    if isinstance(exc, TimeoutError) and limit is not None:
        return ModelUnavailableError(f"the chat API timed out: no complete reply within {limit:g}s")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = mask_secret(error_body(exc), secret)
        headers = getattr(exc.response, "headers", None)
        msg = f"HTTP {status} from the chat API: {body[:500]}"
        if status in (408, 409, 429) or status >= 500:  # timeout, conflict, rate limit
            return ModelUnavailableError(
                msg, status_code=status, body=body, retry_after=_retry_after(headers)
            )
        if context_overflow(status, body, getattr(exc, "code", None)):
            return ContextWindowExceeded(msg, status_code=status, body=body)
        return ModelRequestError(msg, status_code=status, body=body)
    if isinstance(exc, openai.APITimeoutError):
        return ModelUnavailableError("the chat API timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return ModelUnavailableError(
            f"cannot reach the chat API: {mask_secret(str(cause), secret)[:300]}"
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return ModelUnavailableError("the chat API returned a malformed reply")
    if isinstance(exc, openai.APIError):
        return _stream_error(exc, secret)
    if isinstance(exc, openai.OpenAIError):
        return ModelRequestError(mask_secret(str(exc), secret)[:500])
    if isinstance(exc, ValueError | KeyError | TypeError | AttributeError):
        # A body that is not JSON, or JSON of the wrong shape.
        return ModelUnavailableError(
            f"the chat API returned a malformed reply ({type(exc).__name__})"
        )
    return ModelUnavailableError(
        f"the chat API call failed: {type(exc).__name__}: {mask_secret(str(exc), secret)}"[:500]
    )


_TRANSIENT_KINDS = (
    "server_error",
    "overloaded",
    "rate_limit",
    "timeout",
    "unavailable",
    "internal_error",
    "try again",
)
"""Lower-case words by which an error sent inside a stream says it will pass."""


def _stream_error(exc: Any, secret: str | None) -> ModelAPIError:
    """An error the server sent as an event of a stream (``data: {"error": {...}}``), after
    its 200: transient ("overloaded", "server_error") unless it says the request is wrong."""
    body = exc.body if isinstance(exc.body, dict) else {}
    kind = " ".join(str(body.get(key) or "") for key in ("type", "code", "message")).lower()
    text = mask_secret(json.dumps(body, default=str) if body else str(exc), secret)
    msg = f"the chat API sent an error inside the stream: {text[:500]}"
    if context_overflow(None, kind, str(body.get("code") or "")):
        return ContextWindowExceeded(msg, status_code=None, body=text)
    if any(word in kind for word in _TRANSIENT_KINDS):
        return ModelUnavailableError(msg, body=text)
    return ModelRequestError(msg, body=text)
