"""The chat-model seam: one call, ``complete(request) -> response``.

A model may also stream (``stream(request)``, an async iterator of
:class:`~react_engine.types.ModelDelta`); the default answers with ``complete`` and yields
the whole reply as one delta, so implementing ``complete`` is enough. Assembling deltas,
live stop detection and retries of streams are in :mod:`react_engine.transport.streaming`.

:class:`OpenAIChatModel` is the only code in react-engine that builds ``{"role": ...}``
dicts and talks to the ``openai`` SDK (sync or async client, any ``base_url``).
:class:`~react_engine.testing.ScriptedModel` is the fake that ships with the seam: queued
replies or a function of the request, used by the tests, dry runs and the comparison script.

Retries live here too, apart from both: :func:`complete_with_retries` retries what is
transient (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections, garbled
bodies) with exponential backoff and jitter, within a bounded number of attempts and a
bounded total time. Other 4xx surface at once as :class:`ModelRequestError`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import random
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

# ``asyncio`` (with ``ssl``, ``socket``, ``subprocess``...) and the worker threads are
# imported by the coroutines that use them, not with the library: a coroutine runs on an
# event loop, so asyncio is loaded by then and the import is a lookup.
if TYPE_CHECKING:
    import asyncio

    import openai

from ..errors import (
    ContextWindowExceeded,
    ModelAPIError,
    ModelRequestError,
    ModelUnavailableError,
)
from ..run.observations import valid_unicode
from ..types import (
    AssistantMessage,
    Constraint,
    Message,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ReplyCall,
    SystemMessage,
    ToolCallChunk,
    ToolMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "ChatModel",
    "OpenAIChatModel",
    "RetryPolicy",
    "complete_with_retries",
    "mask_secret",
    "request_payload",
    "with_retries",
]

T = TypeVar("T")


class ChatModel(ABC):
    """Anything that answers a :class:`ModelRequest`. One method; one attempt per call."""

    base_url: str = ""
    """Where the model lives; with the model name it keys learned capabilities."""

    @abstractmethod
    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request, or raise :class:`ModelAPIError`.

        Raise :class:`ModelUnavailableError` for failures worth retrying and
        :class:`ModelRequestError` for those that are not.
        """

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """Answer one request as it is written, in :class:`ModelDelta` pieces.

        The default answers with :meth:`complete` and yields the whole reply as one delta,
        so a model that cannot stream (a scripted one, a third party's) still serves
        ``Agent.iter``. Errors are those of :meth:`complete`.
        """
        yield ModelDelta.whole(await self.complete(request))


# --- the SDK edge ------------------------------------------------------------------------


def message_dict(message: Message) -> dict[str, Any]:
    """One typed message as the chat completions API wants it.

    Text is made valid Unicode on the way out: one lone surrogate anywhere in the history
    (a tool's ``surrogateescape`` output, a question) would otherwise make every later
    request of the run impossible to encode.
    """
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": valid_unicode(message.content)}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": valid_unicode(message.content),
        }
    if isinstance(message, AssistantMessage):
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
    raise TypeError(f"not a message: {message!r}")  # pragma: no cover


def request_payload(request: ModelRequest) -> dict[str, Any]:
    """The exact keyword arguments passed to ``client.chat.completions.create``."""
    payload: dict[str, Any] = {
        "model": request.model,
        "messages": [message_dict(m) for m in request.messages],
    }
    if request.tools:
        payload["tools"] = list(request.tools)
        if request.tool_choice is not None:
            choice = request.tool_choice
            if choice in ("auto", "required", "none"):
                payload["tool_choice"] = choice
            else:
                payload["tool_choice"] = {"type": "function", "function": {"name": choice}}
        if request.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = request.parallel_tool_calls
    if request.stop:
        payload["stop"] = list(request.stop)
    s = request.settings
    if s.temperature is not None:
        payload["temperature"] = s.temperature
    if s.seed is not None:
        payload["seed"] = s.seed
    if s.max_tokens is not None:
        payload["max_tokens"] = s.max_tokens
    if s.top_p is not None:
        payload["top_p"] = s.top_p
    extra: dict[str, Any] = dict(s.extra_body) if s.extra_body else {}
    if request.constraint is not None:
        _constrain(request.constraint, payload, extra)
    if extra:
        payload["extra_body"] = extra
    return payload


def _constrain(c: Constraint, payload: dict[str, Any], extra: dict[str, Any]) -> None:
    """Put a constraint where its kind of server reads it.

    llama.cpp (its own server and llama-cpp-python) reads a GBNF ``grammar``; vLLM reads
    ``guided_grammar`` / ``guided_json``; OpenAI and the many ``/v1`` servers that copy it
    (Ollama among them) read ``response_format`` with a JSON Schema.
    """
    if c.style == "llama.cpp" and c.grammar is not None:
        extra["grammar"] = c.grammar
    elif c.style == "vllm" and c.grammar is not None:
        extra["guided_grammar"] = c.grammar
    elif c.style == "vllm" and c.json_schema is not None:
        extra["guided_json"] = dict(c.json_schema)
    elif c.json_schema is not None:
        spec: dict[str, Any] = {"name": c.name, "schema": dict(c.json_schema)}
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


MAX_TOKEN_COUNT = 10**12
"""The largest token count read from a server: no request comes near a trillion tokens, and
a larger figure (``1e308``) is garbage that would swamp every total built on it."""


def _count(value: Any) -> int | None:
    """A token count as the server sent it, or ``None`` when it is not one.

    Servers send ints, but also floats (``12.0``), numeric strings, ``null``, or garbage
    (``"abc"``, ``1e308``); a negative count is read as 0, so it can never lower a running
    total, and one past :data:`MAX_TOKEN_COUNT` is not a count.
    """
    if value is None or isinstance(value, bool):
        return None
    number: float | int
    if isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                return None
    else:
        return None
    if isinstance(number, float) and not math.isfinite(number):
        return None
    if number > MAX_TOKEN_COUNT:
        return None
    return max(0, int(number))


def _field(raw: Any, name: str) -> Any:
    if isinstance(raw, Mapping):
        return raw.get(name)
    return getattr(raw, name, None)


def _usage(raw: Any, events: list[str] | None = None) -> Usage:
    """Token counts from the reply's ``usage``: counts that are not counts are read as 0
    (and named in ``events``), negative ones as 0."""
    if raw is None:
        return Usage(requests=1)
    if isinstance(raw, str | bytes | int | float | list | tuple):
        if events is not None:
            events.append(f"the reply's usage was not an object, ignored: {_one_value(raw)}")
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
    cached = 0
    details = _field(raw, "prompt_tokens_details")
    if details is not None:
        cached = count(details, "cached_tokens")
    if not cached:
        extra = getattr(raw, "model_extra", None)
        if isinstance(extra, Mapping) and "prompt_cache_hit_tokens" in extra:  # DeepSeek
            cached = count(extra, "prompt_cache_hit_tokens")
    if bad and events is not None:
        events.append(f"the reply's usage had invalid counts, read as 0: {', '.join(bad)}")
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
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = _field(part, "type")
        text = _field(part, "text")
        if kind in (None, "text", "output_text") and isinstance(text, str):
            texts.append(text)
    if not texts:
        return None
    return valid_unicode("".join(texts))


def response_from_sdk(completion: Any) -> ModelResponse:
    """Convert an SDK ``ChatCompletion`` (or anything shaped like one) to a ModelResponse."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelUnavailableError("the API returned a reply with no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ModelUnavailableError("the API returned a choice with no message")
    calls: list[ReplyCall] = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None) if fn is not None else None
        if not name:
            continue
        arguments = getattr(fn, "arguments", None)
        if not isinstance(arguments, str):
            arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
        call_id = getattr(tc, "id", None) or None
        calls.append(
            ReplyCall(
                None if call_id is None else valid_unicode(str(call_id)),
                valid_unicode(str(name)),
                valid_unicode(arguments),
            )
        )
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    # JSON can carry lone surrogates ("\ud83d"): keep the transcript encodable as UTF-8.
    events: list[str] = []
    usage = _usage(getattr(completion, "usage", None), events)
    return ModelResponse(
        content=_text_content(getattr(message, "content", None)),
        tool_calls=calls,
        reasoning=valid_unicode(reasoning) if isinstance(reasoning, str) else None,
        finish_reason=getattr(choice, "finish_reason", None),
        usage=usage,
        model=getattr(completion, "model", None),
        events=events,
    )


def delta_from_chunk(chunk: Any) -> ModelDelta:
    """Convert one SDK ``ChatCompletionChunk`` (or anything shaped like one) to a delta."""
    events: list[str] = []
    raw_usage = getattr(chunk, "usage", None)
    usage = _usage(raw_usage, events) if raw_usage is not None else None
    model = getattr(chunk, "model", None)
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ModelDelta(usage=usage, model=model, events=tuple(events))
    choice = choices[0]
    delta = getattr(choice, "delta", None)
    content = _text_content(getattr(delta, "content", None)) if delta is not None else None
    extra = (getattr(delta, "model_extra", None) or {}) if delta is not None else {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    calls: list[ToolCallChunk] = []
    for position, tc in enumerate(getattr(delta, "tool_calls", None) or []):
        index = getattr(tc, "index", None)
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None) if fn is not None else None
        arguments = getattr(fn, "arguments", None) if fn is not None else None
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = getattr(tc, "id", None)
        calls.append(
            ToolCallChunk(
                index if isinstance(index, int) and not isinstance(index, bool) else position,
                valid_unicode(str(call_id)) if call_id else None,
                valid_unicode(str(name)) if name else None,
                valid_unicode(arguments) if arguments else None,
            )
        )
    return ModelDelta(
        content=content,
        reasoning=valid_unicode(reasoning) if isinstance(reasoning, str) and reasoning else None,
        tool_calls=tuple(calls),
        finish_reason=getattr(choice, "finish_reason", None),
        usage=usage,
        model=model,
        events=tuple(events),
    )


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        import email.utils  # an HTTP date: rare, so not imported with the library

        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def _error_body(exc: Any) -> str:
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


TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})

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
"""Lower-case phrases by which servers say a request does not fit the context window.
Plain substring tests: the body is a stranger's text, and this stays linear in it."""


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


def translate_error(exc: BaseException, *, secret: str | None = None) -> ModelAPIError:
    """Map an SDK exception to our tree: transient ones to ModelUnavailableError."""
    import openai  # loaded already: the exception came from it

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = mask_secret(_error_body(exc), secret)
        headers = getattr(exc.response, "headers", None)
        msg = f"HTTP {status} from the chat API: {body[:500]}"
        if status in TRANSIENT_STATUS or status >= 500:
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


class OpenAIChatModel(ChatModel):
    """Chat completions through the ``openai`` SDK, with a sync or an async client.

    The SDK's own retries are switched off (``max_retries=0``) so that the retry budget of
    :func:`complete_with_retries` is the only one.
    """

    def __init__(self, client: openai.AsyncOpenAI | openai.OpenAI, *, owned: bool = False) -> None:
        import openai  # only once a client exists: ``import react_engine`` stays light

        self._client = client.with_options(max_retries=0)
        self._is_async = isinstance(client, openai.AsyncOpenAI)
        if not self._is_async:
            _note_requests(self._client)
        timeout = getattr(client, "timeout", None)
        self._default_timeout = (
            float(timeout)
            if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
            else DEFAULT_ATTEMPT_TIMEOUT
        )
        self.base_url = str(client.base_url).rstrip("/")
        key = getattr(client, "api_key", None)
        self._secret: str | None = key if isinstance(key, str) else None
        self._owned = owned and self._is_async
        """An async client this model built itself (see :meth:`connect`): one per event loop."""
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lent_first = False
        self._stream_usage = True
        """Ask for the usage chunk of a stream; off once the server rejected the option."""
        """Whether ``_client`` went to a loop already (it is closed with that loop)."""

    @classmethod
    def connect(cls, base_url: str | None, api_key: str, *, asynchronous: bool) -> OpenAIChatModel:
        """A model on a client of its own for ``base_url``.

        An async client's pooled connections belong to the event loop that opened them, so
        each ``asyncio.run(agent.arun(...))`` gets its own client, closed when that loop
        shuts down; reusing the first loop's connections would fail with "Event loop is
        closed".
        """
        import openai

        if asynchronous:
            return cls(openai.AsyncOpenAI(base_url=base_url, api_key=api_key), owned=True)
        client = openai.OpenAI(base_url=base_url, api_key=api_key)
        model = cls(client)
        # The pooled connections are ours: close them when the model goes away, rather
        # than leave open sockets for the garbage collector to warn about.
        weakref.finalize(model, client.close)
        return model

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self.base_url!r}, api_key={mask_key(self._secret)!r})"

    async def _client_here(self) -> Any:
        if not self._owned:
            return self._client
        import asyncio

        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is None:
            client = self._client if not self._lent_first else self._fresh_client()
            self._lent_first = True
            # Registered with the loop as an async generator, so that the loop's shutdown
            # (asyncio.run does it) closes the client's connections while it still can, and
            # drops the entry: the generator holds the loop (its finalizer hook), so an
            # entry left behind would keep every loop and client alive.
            closer = _close_at_loop_shutdown(client, self._per_loop, loop)
            entry = self._per_loop[loop] = _LoopClient(client, closer)
            await closer.__anext__()
        return entry.client

    def _fresh_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=self._secret).with_options(
            max_retries=0
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One attempt, bounded in total by ``settings.timeout`` (else the client's own
        timeout, else :data:`DEFAULT_ATTEMPT_TIMEOUT`): the HTTP timeout bounds each read
        only, and a server that trickles a byte at a time would hold a run forever."""
        payload = request_payload(request)
        if request.settings.timeout is not None:
            payload["timeout"] = request.settings.timeout
        import asyncio

        limit = request.settings.timeout or self._default_timeout
        error: ModelAPIError | None = None
        try:
            if self._is_async:
                create: Any = (await self._client_here()).chat.completions.create
                async with asyncio.timeout(limit):
                    completion = await create(**payload)
            else:
                completion = await self._complete_sync(payload, limit)
            if isinstance(completion, str):  # a server that answered with non-JSON text
                raise ValueError("non-JSON body")
        except ModelAPIError:
            raise
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            error = ModelUnavailableError(
                f"the chat API timed out: no complete reply within {limit:g}s"
            )
        except Exception as exc:
            error = translate_error(exc, secret=self._secret)
        if error is not None:
            # Raised outside the ``except`` block: ``raise ... from None`` would still keep
            # the SDK's exception as ``__context__``, and its message, its request and the
            # request's headers hold the unmasked API key.
            raise error
        return response_from_sdk(completion)

    async def _complete_sync(self, payload: dict[str, Any], limit: float) -> Any:
        """The blocking client's call in a worker thread, given up after ``limit`` seconds
        (or when the run is cancelled). Cancelling cannot stop a thread, so the request's
        connection is shut down under it: the worker's read fails and the thread returns."""
        import asyncio

        from ..run import _threads

        attempt = _SyncAttempt()
        create: Any = self._client.chat.completions.create
        try:
            # asyncio.timeout, not wait_for: when the run's deadline cancels this at the
            # same moment, that cancellation wins (3.11's wait_for could swallow it).
            async with asyncio.timeout(limit):
                return await _threads.run_blocking(attempt.call, create, payload)
        except (TimeoutError, asyncio.CancelledError):
            attempt.abort(self._client)
            raise

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        """One streamed attempt (``stream=True``), bounded in total like :meth:`complete`.

        ``stream_options={"include_usage": True}`` asks for the usage chunk; a server that
        rejects the option is asked again without it, and not asked with it again. Closing
        the generator closes the HTTP response (the server sees the connection end).
        """
        payload = request_payload(request)
        payload["stream"] = True
        if request.settings.timeout is not None:
            payload["timeout"] = request.settings.timeout
        import asyncio

        from ..run import _threads

        limit = request.settings.timeout or self._default_timeout
        deadline = asyncio.get_running_loop().time() + limit
        stream: Any = None
        attempt = _SyncAttempt()
        error: ModelAPIError | None = None
        finished = False
        try:
            stream = await self._open_stream(payload, deadline, attempt)
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        if self._is_async:
                            chunk = await stream.__anext__()
                        else:
                            chunk = await _threads.run_blocking(next, stream, _DONE)
                except StopAsyncIteration:
                    break
                if chunk is _DONE:
                    break
                yield delta_from_chunk(chunk)
            finished = True
        except ModelAPIError:
            raise
        except TimeoutError:
            error = ModelUnavailableError(
                f"the chat API timed out: no complete reply within {limit:g}s"
            )
        except Exception as exc:
            error = translate_error(exc, secret=self._secret)
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    if self._is_async:
                        await stream.close()
                    else:
                        if not finished:  # a worker thread may be blocked on a read
                            attempt.abort(self._client)
                        stream.close()
            elif not finished and not self._is_async:
                attempt.abort(self._client)
        if error is not None:
            raise error

    async def _open_stream(self, payload: dict[str, Any], deadline: float, attempt: Any) -> Any:
        import openai

        if self._stream_usage:
            payload = {**payload, "stream_options": {"include_usage": True}}
        try:
            return await self._create_stream(payload, deadline, attempt)
        except openai.APIStatusError as exc:
            if not (self._stream_usage and exc.status_code in (400, 422)):
                raise
            if "stream_options" not in _error_body(exc) and "include_usage" not in _error_body(exc):
                raise
        self._stream_usage = False
        payload = {k: v for k, v in payload.items() if k != "stream_options"}
        return await self._create_stream(payload, deadline, attempt)

    async def _create_stream(self, payload: dict[str, Any], deadline: float, attempt: Any) -> Any:
        import asyncio

        from ..run import _threads

        async with asyncio.timeout_at(deadline):
            if self._is_async:
                create: Any = (await self._client_here()).chat.completions.create
                return await create(**payload)
            sync_create: Any = self._client.chat.completions.create
            return await _threads.run_blocking(attempt.call, sync_create, payload)


_DONE = object()


DEFAULT_ATTEMPT_TIMEOUT = 600.0
"""Seconds one request may take in all, when neither the settings nor the client say."""

_SYNC_ATTEMPT: contextvars.ContextVar[_SyncAttempt | None] = contextvars.ContextVar(
    "react_engine_sync_attempt", default=None
)


class _SyncAttempt:
    """One blocking request in a worker thread: the HTTP requests it sent, so that their
    connections can be shut down when the attempt is given up."""

    def __init__(self) -> None:
        self.extensions: list[Any] = []
        self.given_up = False

    def call(self, create: Callable[..., Any], payload: dict[str, Any]) -> Any:
        token = _SYNC_ATTEMPT.set(self)
        try:
            return create(**payload)
        finally:
            _SYNC_ATTEMPT.reset(token)

    def abort(self, client: Any) -> None:
        """Shut down the sockets of this attempt's requests still in the client's pool.

        This reaches into the HTTP client's pool (``httpx2``/``httpcore2`` internals); with
        a transport of another kind nothing is found, and the worker thread is left to end
        when its request does.
        """
        self.given_up = True
        import socket

        with contextlib.suppress(Exception):
            pool = client._client._transport._pool
            for pending in list(pool._requests):
                if not any(pending.request.extensions is e for e in self.extensions):
                    continue
                stream = pending.connection._connection._network_stream
                sock = stream.get_extra_info("socket")
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _note_requests(client: Any) -> None:
    """Have a blocking client tell the attempt in progress (if any) about each HTTP request
    it sends, through the SDK's ``_prepare_request`` hook (on our own copy of the client)."""
    original = getattr(client, "_prepare_request", None)
    if not callable(original):  # pragma: no cover - an SDK without the hook
        return

    def prepare(request: Any) -> None:
        attempt = _SYNC_ATTEMPT.get()
        if attempt is not None:
            if attempt.given_up:
                raise TimeoutError("the attempt was given up")
            attempt.extensions.append(request.extensions)
        original(request)

    with contextlib.suppress(AttributeError, TypeError):
        client._prepare_request = prepare


@dataclass(slots=True)
class _LoopClient:
    client: Any
    closer: AsyncGenerator[None, None]


async def _close_at_loop_shutdown(
    client: Any,
    per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClient],
    loop: asyncio.AbstractEventLoop,
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        per_loop.pop(loop, None)
        with contextlib.suppress(Exception):
            await client.close()


# --- retries -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How transient API failures are retried (network retries; format retries are apart)."""

    max_attempts: int = 4
    """Attempts per request in all, the first included."""
    initial_backoff: float = 0.5
    """Seconds before the first retry; doubles each time, with jitter."""
    max_backoff: float = 20.0
    """Upper bound on one wait, ``Retry-After`` included."""
    max_total: float = 90.0
    """Give up once this many seconds have passed since the first attempt."""
    jitter: float = 0.5
    """Random seconds added to each exponential wait, so clients do not retry in lockstep."""
    sleep: Callable[[float], Awaitable[None]] | None = None
    """Replaces ``asyncio.sleep`` (tests pass a fake that records waits and returns at once)."""
    on_retry: Callable[[int, float, BaseException], None] | None = None
    """Called before each wait with the number of the attempt that follows (2 for the first
    retry), the seconds it waits and the error of the attempt that failed: so a program can
    show what a silent wait is (the CLI prints ``retry 1/3 in 0.6 s: ...``). It runs in the
    run's event loop: it must return at once."""


def backoff(policy: RetryPolicy, error: BaseException | None, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first): the
    server's ``Retry-After`` when it sent one, else an exponential wait with jitter; at
    most ``policy.max_backoff`` either way (the jitter aside)."""
    hint = getattr(error, "retry_after", None)
    if isinstance(hint, int | float):
        return float(min(hint, policy.max_backoff))
    exponential = policy.initial_backoff * float(2 ** max(0, attempt - 1))
    return min(policy.max_backoff, exponential) + random.uniform(0, policy.jitter)


async def with_retries(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """``await attempt()``, again after each :class:`ModelUnavailableError` while
    ``policy`` allows (shared by the plain and the streamed request).

    The last error is raised as it is, with the number of attempts made as its
    ``attempts`` (and in its message, after more than one); any other error is raised at
    once. The first attempt is a plain ``await``: it nearly always succeeds, and then costs
    nothing beyond the call and leaves no objects in reference cycles (a tenacity
    ``AsyncRetrying`` leaves about 37 per request, which set off garbage collections in the
    middle of runs). Only a request that failed goes on to :func:`_retry`.
    """
    started = time.monotonic()
    try:
        return await attempt()
    except ModelUnavailableError as exc:
        return await _retry(attempt, policy, exc, started)
    except ModelAPIError as exc:
        exc.attempts = 1
        raise


async def _retry(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    failed: ModelUnavailableError,
    started: float,
) -> T:
    """The attempts after a first one failed with ``failed``, with tenacity's
    ``AsyncRetrying``: at most ``policy.max_attempts`` in all and none started
    ``policy.max_total`` seconds after the first, each after its :func:`backoff`."""
    import asyncio

    from tenacity import (  # imported with the first failure, not with the library
        AsyncRetrying,
        RetryCallState,
        retry_if_exception_type,
        stop_after_attempt,
        stop_after_delay,
    )

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return backoff(policy, error, state.attempt_number + 1)

    def before_sleep(state: RetryCallState) -> None:
        if policy.on_retry is not None and state.outcome is not None:
            error = state.outcome.exception()
            waited = state.next_action.sleep if state.next_action is not None else 0.0
            if error is not None:
                policy.on_retry(attempts + 1, waited, error)

    attempts = 1
    limit = max(1, policy.max_attempts)
    left = policy.max_total - (time.monotonic() - started)
    if limit > 1 and left > 0:
        sleep = policy.sleep or asyncio.sleep
        first_wait = backoff(policy, failed, 1)
        if policy.on_retry is not None:
            policy.on_retry(2, first_wait, failed)
        await sleep(first_wait)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(limit - 1)
            | stop_after_delay(max(0.0, policy.max_total - (time.monotonic() - started))),
            wait=wait,
            retry=retry_if_exception_type(ModelUnavailableError),
            sleep=sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for trial in retrying:
                with trial:
                    attempts += 1
                    return await attempt()
        except ModelUnavailableError as exc:
            failed = exc
        except ModelAPIError as exc:
            exc.attempts = attempts
            raise
    failed.attempts = attempts
    if attempts > 1:
        failed.args = (f"{failed.args[0] if failed.args else failed} (after {attempts} attempts)",)
    raise failed


async def complete_with_retries(
    model: ChatModel, request: ModelRequest, policy: RetryPolicy = RetryPolicy()
) -> ModelResponse:
    """``model.complete(request)``, retried on :class:`ModelUnavailableError`."""
    return await with_retries(lambda: model.complete(request), policy)
