"""A small OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks
(docs/testing.md).

:class:`ScriptedServer` answers ``POST /v1/chat/completions`` (and ``GET /v1/models``)
over real HTTP/1.1 from a :class:`~.script.Script`: a JSON-ready dict, or a
:class:`MockResponse`, faults included. It runs its own event loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Final, Self

from .script import Script, ScriptExhausted

__all__ = [
    "MockResponse",
    "ScriptedServer",
    "StreamRecord",
    "completion",
    "stream_chunks",
    "tool_calls_completion",
]


@dataclass(slots=True)
class MockResponse:
    """One HTTP reply, possibly a faulty one."""

    status: int = 200
    body: Any = None
    """A JSON-ready value, or ``bytes``/``str`` sent as they are (malformed bodies)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (a hang past the client's timeout)."""
    drop: bool = False
    """Close the connection without answering."""
    truncate_at: int | None = None
    """Send only this many bytes of the body, then close (a reply cut in the middle)."""
    chunks: list[Any] | None = None
    """A streamed reply's chunks as they are sent (JSON-ready values, or ``str``/``bytes``
    sent as they are after ``data: ``); by default a completion body is streamed in
    chunks of its own (see :func:`stream_chunks`) when the request asks for a stream."""
    chunk_delay: float = 0.0
    """Seconds between two chunks of a streamed reply (a model generating tokens)."""
    drop_after: int | None = None
    """Streamed replies: close the connection after this many chunks (a stream cut)."""
    done: bool = True
    """Streamed replies: end with the ``data: [DONE]`` marker (False: the body just ends)."""


@dataclass(slots=True)
class StreamRecord:
    """What the server did with one streamed reply."""

    available: int
    """Chunks the reply had (the ``[DONE]`` marker not counted)."""
    sent: int = 0
    closed_by_client: bool = False
    """The client closed the connection before the last chunk was sent."""


Answer = MockResponse | dict[str, Any]
"""What a scripted server sends for one request: a JSON-ready body (status 200) or any
:class:`MockResponse`, faults included."""

_ids = itertools.count(1)


def completion(
    content: str | None,
    *,
    model: str = "mock-model",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A chat.completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def tool_calls_completion(
    *calls: tuple[str, dict[str, Any] | str], content: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A chat.completion body with native tool calls ``(name, arguments)``."""
    out = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args
                if isinstance(args, str)
                else json.dumps(args, ensure_ascii=False),
            },
        }
        for name, args in calls
    ]
    return completion(content, tool_calls=out, **kwargs)


_WORD = re.compile(r"\S+\s*|\s+")
"""A word-sized piece of text (with its trailing blanks): one chunk per "token"."""


def stream_chunks(
    body: dict[str, Any], *, include_usage: bool = True, argument_piece: int = 8
) -> list[dict[str, Any]]:
    """A chat.completion body as the ``chat.completion.chunk`` objects of its stream.

    Text and reasoning come a word at a time; each tool call starts with its id and name,
    then its arguments come ``argument_piece`` characters at a time; the finish reason
    comes last, then (``include_usage``) the usage in a chunk with no choices.
    """
    head = {
        "id": body.get("id", f"chatcmpl-{next(_ids)}"),
        "object": "chat.completion.chunk",
        "created": body.get("created", int(time.time())),
        "model": body.get("model", "mock-model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    out = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "content"):
        out += [chunk({key: piece}) for piece in _WORD.findall(message.get(key) or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        first = {"index": index, "id": call.get("id"), "type": "function"}
        out.append(chunk({"tool_calls": [{**first, "function": {"name": fn.get("name")}}]}))
        arguments = fn.get("arguments") or ""
        for at in range(0, len(arguments), argument_piece):
            piece = arguments[at : at + argument_piece]
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage and body.get("usage") is not None:
        out.append({**head, "choices": [], "usage": body["usage"]})
    return out


class ScriptedServer(Script[dict[str, Any], Answer]):
    """An OpenAI-compatible server whose answers come from a script of :data:`Answer` items
    (or functions of the decoded body giving one); once it is spent, ``default`` (a
    function of the body answers every request), else a 500 saying the script ran out.
    ``requests`` records each decoded body in arrival order.

    ``empty_tool_streams``: a streamed request with ``tools`` gets HTTP 200 and an empty
    stream. ``ignore_tools``: ``tools``, ``tool_choice`` and ``parallel_tool_calls`` are
    dropped from each request. Otherwise the engine's capability probe is answered here
    (as a server that honours tools but does not constrain decoding) and recorded in
    ``probes``, unless ``answer_probe=False``.
    """

    def __init__(
        self,
        *items: Answer | Callable[[dict[str, Any]], Answer],
        default: Answer | Callable[[dict[str, Any]], Answer] | None = None,
        empty_tool_streams: bool = False,
        ignore_tools: bool = False,
        answer_probe: bool = True,
    ) -> None:
        super().__init__(items, default=default)
        self.host, self.port = "127.0.0.1", 0
        self.empty_tool_streams = empty_tool_streams
        self.ignore_tools = ignore_tools
        self.answer_probe = answer_probe
        self.probes: list[dict[str, Any]] = []  # not in requests
        self.requests: list[dict[str, Any]] = []
        self.streams: list[StreamRecord] = []  # per streamed reply
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._serve, name="mock-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the mock server did not start")
        return self

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(
            asyncio.start_server(self._handle, self.host, self.port, backlog=2048)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                tasks = list(asyncio.all_tasks(loop))
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                fields = (line.partition(":") for line in lines[1:] if ":" in line)
                headers = {k.strip().lower(): v.strip() for k, _, v in fields}
                length = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(length) if length else b""
                keep = await self._answer(method, path, raw, reader, writer)
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the server is stopping
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(
        self,
        method: str,
        path: str,
        raw: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            await _write(writer, MockResponse(body={"object": "list", "data": [{"id": "mock"}]}))
            return True
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await _write(writer, MockResponse(404, {"error": {"message": f"no route {path}"}}))
            return True
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            await _write(writer, MockResponse(400, {"error": {"message": "invalid JSON"}}))
            return True
        if self.ignore_tools:
            body = {k: v for k, v in body.items() if k not in _TOOL_KEYS}
        elif self.answer_probe and _is_probe(body):
            with self._lock:
                self.probes.append(body)
            # a tool-honouring, unconstrained server's answer (off the schema's one value)
            probe = tool_calls_completion((_probe_tool(), '{"color": "Blue"}'))
            await _write(writer, MockResponse(body=probe))
            return True
        with self._lock:
            self.requests.append(body)
        if self.empty_tool_streams and body.get("stream") is True and body.get("tools"):
            return await self._stream(body, MockResponse(chunks=[], done=False), reader, writer)
        try:
            answer = self.answer(body)
        except ScriptExhausted:
            answer = MockResponse(500, {"error": {"message": "the test script ran out"}})
        except Exception as exc:  # a bug in a test's responder: say so over HTTP
            answer = MockResponse(500, {"error": {"message": f"responder failed: {exc!r}"}})
        response = answer if isinstance(answer, MockResponse) else MockResponse(body=answer)
        if response.delay:
            await asyncio.sleep(response.delay)
        if response.drop:
            writer.transport.abort()
            return False
        if response.chunks is not None or (
            body.get("stream") is True
            and response.status == 200
            and isinstance(response.body, dict)
        ):
            return await self._stream(body, response, reader, writer)
        await _write(writer, response)
        return response.truncate_at is None

    async def _stream(
        self,
        request: dict[str, Any],
        response: MockResponse,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Send a reply as server-sent events, a chunk at a time; stop when the client goes."""
        chunks = response.chunks
        if chunks is None:
            options = request.get("stream_options") or {}
            usage = isinstance(options, dict) and options.get("include_usage") is True
            chunks = stream_chunks(response.body, include_usage=usage)
        record = StreamRecord(available=len(chunks))
        with self._lock:
            self.streams.append(record)
        sse = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
        writer.write(_head(response.status, {**response.headers, **sse}))
        try:
            await writer.drain()
            for item in [*chunks, "[DONE]"] if response.done else chunks:
                if response.drop_after is not None and record.sent >= response.drop_after:
                    writer.transport.abort()
                    return False
                if record.sent and response.chunk_delay:
                    await asyncio.sleep(response.chunk_delay)
                if reader.at_eof() or writer.transport.is_closing():
                    record.closed_by_client = True
                    return False
                event = b"data: " + _encoded(item) + b"\n\n"
                writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                await writer.drain()
                if item != "[DONE]":
                    record.sent += 1
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            record.closed_by_client = True
            return False
        return True


_TOOL_KEYS: Final = frozenset({"tools", "tool_choice", "parallel_tool_calls"})


def _probe_tool() -> str:
    from ..transport.probe import PROBE_TOOL  # here: it loads the parsers, a run's business

    return PROBE_TOOL


def _is_probe(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    if not isinstance(tools, list) or len(tools) != 1 or not isinstance(tools[0], dict):
        return False
    function = tools[0].get("function")
    return isinstance(function, dict) and function.get("name") == _probe_tool()


def _encoded(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, ensure_ascii=False).encode()


def _head(status: int, headers: dict[str, str]) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:  # a status no standard names (529...)
        reason = "Status"
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _write(writer: asyncio.StreamWriter, response: MockResponse) -> None:
    data = _encoded(response.body)
    headers = {"content-type": "application/json", **response.headers}
    headers["content-length"] = str(len(data))
    if response.truncate_at is not None:
        data = data[: response.truncate_at]
        headers["connection"] = "close"
    writer.write(_head(response.status, headers) + data)
    await writer.drain()
    if response.truncate_at is not None:
        writer.transport.abort()
