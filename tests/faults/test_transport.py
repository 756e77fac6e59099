"""Replies and transports that break the engine in quieter ways (issue 12, round two).

* usage counts that are not counts (``"abc"``, ``-500``, ``1e999``...): never a foreign
  exception, never a negative total, so ``max_total_tokens`` still stops the run;
* ``content`` sent as a list of parts: its text is read, not dropped;
* a failed request's exception chain (``__cause__``, ``__context__``, args, traceback) never
  holds the raw API key, with either client;
* a server that trickles its reply, one byte at a time: each attempt is bounded in total,
  not only per read, with either client.

Every case goes through the real ``openai`` SDK over HTTP to a loopback server.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support.replies import FakeSleep, call_body, final_body

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelAPIError,
    ModelSettings,
    ModelUnavailableError,
    RetryPolicy,
    RunResult,
    Tool,
)
from react_engine.testing import ScriptedServer, completion

PROTOCOLS = ["function_calling", "text"]
CLIENTS = ["sync", "async"]


def lookup(city: str) -> str:
    """Facts about a city.

    Args:
        city: the city's name.
    """
    return f"{city}: 5000 people"


def run_agent(
    base_url: str,
    protocol: str = "function_calling",
    *,
    client: str = "sync",
    api_key: str = "sk-test-reply-faults",
    timeout: float | None = 10.0,
    **options: Any,
) -> RunResult:
    options.setdefault("retry", RetryPolicy(max_attempts=1, sleep=FakeSleep()))

    def build(sdk: openai.OpenAI | openai.AsyncOpenAI) -> Agent:
        return Agent(
            "mock-model",
            [Tool.from_function(lookup)],
            protocol=protocol,
            client=sdk,
            settings=ModelSettings(timeout=timeout),
            capability_cache=CapabilityCache(),
            registry=CapabilityRegistry.from_default(env={}),
            **options,
        )

    if client == "sync":
        with openai.OpenAI(base_url=base_url, api_key=api_key) as sdk:
            return build(sdk).run("Tell me about Paris.")

    async def arun() -> RunResult:
        async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key) as sdk:
            return await build(sdk).arun("Tell me about Paris.")

    return asyncio.run(arun())


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def with_usage(body: dict[str, Any], **usage: Any) -> dict[str, Any]:
    body["usage"] = usage
    return body


# --- usage counts that are not counts -------------------------------------------------------------

BAD_USAGE: dict[str, dict[str, Any]] = {
    "string": {"prompt_tokens": 10, "completion_tokens": "abc", "total_tokens": 15},
    "float_string": {"prompt_tokens": "1e999", "completion_tokens": 5, "total_tokens": "x"},
    "nested_object": {"prompt_tokens": {"n": 1}, "completion_tokens": [5], "total_tokens": None},
    "bool": {"prompt_tokens": True, "completion_tokens": False, "total_tokens": True},
    "details_garbage": {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": "lots"},
    },
    "usage_is_a_string": "n/a",  # type: ignore[dict-item]
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", sorted(BAD_USAGE))
def test_usage_counts_that_are_not_counts_do_not_break_the_run(
    server: ScriptedServer, case: str, client: str
) -> None:
    first = call_body("function_calling", "lookup", {"city": "Paris"})
    first["usage"] = BAD_USAGE[case]
    server.push(first, final_body("function_calling", "Paris is big."))
    result = run_agent(server.base_url, client=client)
    assert result.answer == "Paris is big."
    usage = result.steps[0].usage
    for value in (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens):
        assert isinstance(value, int) and value >= 0
    assert usage.total_tokens >= usage.prompt_tokens + usage.completion_tokens
    assert result.usage.total_tokens == usage.total_tokens + 15
    if case != "bool":  # the SDK itself reads true/false as 1/0
        assert any("usage" in e for e in result.steps[0].events)


def test_a_garbage_count_is_named_in_the_step_events(server: ScriptedServer) -> None:
    body = with_usage(
        call_body("function_calling", "lookup", {"city": "Paris"}),
        prompt_tokens=10,
        completion_tokens="abc",
        total_tokens=15,
    )
    server.push(body, final_body("function_calling", "ok"))
    result = run_agent(server.base_url)
    step = result.steps[0]
    assert (step.usage.prompt_tokens, step.usage.completion_tokens) == (10, 0)
    assert step.usage.total_tokens == 15
    assert step.events == [
        "the reply's usage had invalid counts, read as 0: completion_tokens='abc'"
    ]


def test_numeric_strings_and_floats_are_read_as_counts(server: ScriptedServer) -> None:
    body = with_usage(
        call_body("function_calling", "lookup", {"city": "Paris"}),
        prompt_tokens="12",
        completion_tokens=3.0,
        total_tokens=" 15 ",
    )
    server.push(body, final_body("function_calling", "ok"))
    step = run_agent(server.base_url).steps[0]
    assert (step.usage.prompt_tokens, step.usage.completion_tokens, step.usage.total_tokens) == (
        12,
        3,
        15,
    )
    assert step.events == []


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_negative_usage_is_not_summed_and_the_token_budget_still_stops_the_run(
    server: ScriptedServer, protocol: str, client: str
) -> None:
    """Each reply claims 400 real tokens but a total of -1000: summed, the run's total
    would go down forever and the 1000-token budget would never stop it."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        city = f"City{len(server.requests)}"
        out = call_body(protocol, "lookup", {"city": city})
        return with_usage(out, prompt_tokens=-1000, completion_tokens=400, total_tokens=-1000)

    server.default = reply
    result = run_agent(server.base_url, protocol, client=client, max_total_tokens=1000, max_steps=8)
    assert result.stop_reason == "token_budget"
    assert result.usage.total_tokens >= 1000
    assert result.usage.prompt_tokens == 0
    assert all(s.usage.total_tokens == 400 for s in result.steps)
    assert len(result.steps) == 3


# --- content as a list of parts --------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_content_sent_as_a_list_of_parts_is_read(
    server: ScriptedServer, protocol: str, client: str
) -> None:
    first = call_body(protocol, "lookup", {"city": "Paris"})
    text = first["choices"][0]["message"]["content"]
    if text is not None:  # text protocol: the Thought/Action block, split in two parts
        half = len(text) // 2
        first["choices"][0]["message"]["content"] = [
            {"type": "text", "text": text[:half]},
            {"type": "text", "text": text[half:]},
        ]
    final = final_body(protocol, "Paris has 5000 people.")
    answer = final["choices"][0]["message"]["content"]
    final["choices"][0]["message"]["content"] = [
        {"type": "text", "text": answer[:10]},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": answer[10:]},
    ]
    server.push(first, final)
    result = run_agent(server.base_url, protocol, client=client)
    assert result.answer == "Paris has 5000 people."
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert result.steps[0].actions[0].status == "ok"


def test_a_list_of_parts_without_text_is_an_empty_reply(server: ScriptedServer) -> None:
    server.push(
        completion([{"type": "image_url", "image_url": {"url": "data:,"}}]),  # type: ignore[arg-type]
        final_body("function_calling", "done"),
    )
    result = run_agent(server.base_url, max_consecutive_errors=2)
    assert result.answer == "done"
    assert [s.kind for s in result.steps] == ["format_error", "final"]


# --- the API key in the exception chain -------------------------------------------------------------

SECRET_PART = "4be1c07d93aa46f2b85e0c1d7f9a2e63"
KEY = f"sk-live-CHAIN-{SECRET_PART}"


def leaks(text: str) -> bool:
    return KEY in text or any(SECRET_PART[i : i + 8] in text for i in range(len(SECRET_PART) - 7))


def chain_texts(exc: BaseException) -> list[str]:
    """Everything an exception chain shows: each link's str, repr, args, and attributes
    holding text, following ``__cause__`` and ``__context__``, plus the formatted
    traceback of the whole chain."""
    texts = ["".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        texts += [str(link), repr(link), repr(link.args), type(link).__name__]
        for name, value in vars(link).items():
            if name != "result":
                texts.append(f"{name}={value!r}")
        for attr in ("request", "response"):
            obj = getattr(link, attr, None)
            if obj is not None:
                texts.append(repr(getattr(obj, "headers", "")))
        for nxt in (link.__cause__, link.__context__):
            if nxt is not None:
                todo.append(nxt)
    return texts


def links(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop()
        if any(link is seen for seen in out):
            continue
        out.append(link)
        todo += [x for x in (link.__cause__, link.__context__) if x is not None]
    return out


ECHO_FAULTS = {
    "401_echo": (401, {"error": {"message": f"Incorrect API key provided: {KEY}."}}),
    "500_echo": (500, {"error": {"message": f"upstream rejected {KEY}"}}),
    "plain_text_echo": (400, f"bad header Authorization: Bearer {KEY}"),
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("fault", sorted(ECHO_FAULTS))
def test_no_link_of_the_exception_chain_holds_the_key(
    server: ScriptedServer, fault: str, client: str
) -> None:
    from react_engine.testing import MockResponse

    status, body = ECHO_FAULTS[fault]
    server.default = MockResponse(status, body)
    with pytest.raises(ModelAPIError) as info:
        run_agent(server.base_url, client=client, api_key=KEY)
    err = info.value
    chain = links(err)
    # Only our own errors: the SDK's exception (whose request headers hold the key) is
    # neither the cause nor the context.
    assert all(isinstance(link, ModelAPIError) for link in chain), [type(x) for x in chain]
    for text in chain_texts(err):
        assert not leaks(text), text[:300]


def test_a_connection_error_chain_holds_no_key() -> None:
    # A port nothing listens on: the SDK's APIConnectionError wraps an httpx error.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelUnavailableError) as info:
        run_agent(f"http://127.0.0.1:{port}/v1", client="async", api_key=KEY)
    assert all(isinstance(link, ModelAPIError) for link in links(info.value))
    for text in chain_texts(info.value):
        assert not leaks(text)


# --- a server that trickles -----------------------------------------------------------------------


class TricklingServer:
    """Answers every request with valid HTTP, one byte every ``interval`` seconds: each
    read gets a byte well within the read timeout, so only a bound on the attempt's total
    time ends it. Stops (and closes every connection) at the end of the ``with`` block."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.closed_by_client = threading.Event()
        """Set when the client closed or shut down its end in the middle of the reply."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> TricklingServer:
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            worker = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            worker.start()
            self._threads.append(worker)

    def _trickle(self, conn: socket.socket) -> None:
        import json

        body = json.dumps(completion("x" * 2000)).encode()
        data = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        with conn:
            conn.settimeout(0.5)
            try:
                conn.recv(65536)  # the request (small enough for one read)
                for byte in data:
                    if self._stop.wait(self.interval):
                        return
                    conn.sendall(bytes([byte]))
                    if _peer_closed(conn):
                        self.closed_by_client.set()
                        return
            except OSError:  # the client gave up and closed the connection
                self.closed_by_client.set()
                return


def _peer_closed(conn: socket.socket) -> bool:
    """The client's end is gone: a read that does not block says so (EOF or reset)."""
    conn.setblocking(False)
    try:
        return conn.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        conn.settimeout(0.5)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_trickling_server_is_bounded_by_the_attempt_timeout(client: str) -> None:
    outcome: dict[str, Any] = {}
    # A blocking client stays open until the end: closing it would close the connection
    # too, and hide a worker thread left reading the trickle.
    sync_sdk: list[openai.OpenAI] = []

    def attempt() -> None:
        try:
            if client == "sync":
                sync_sdk.append(openai.OpenAI(base_url=trickle.base_url, api_key="sk-test"))
                agent = Agent(
                    "mock-model",
                    [Tool.from_function(lookup)],
                    client=sync_sdk[0],
                    settings=ModelSettings(timeout=1.0),
                    retry=RetryPolicy(max_attempts=1),
                    capability_cache=CapabilityCache(),
                    registry=CapabilityRegistry.from_default(env={}),
                )
                agent.run("Tell me about Paris.")
            else:
                run_agent(trickle.base_url, client=client, timeout=1.0)
        except BaseException as exc:  # inspected below
            outcome["error"] = exc

    with TricklingServer(interval=0.1) as trickle:
        started = time.perf_counter()
        runner = threading.Thread(target=attempt)
        runner.start()
        # The whole reply would take over 200 s at this pace, and one attempt may take 1 s:
        # a run still going after a minute is waiting for the trickle.
        runner.join(60.0)
        elapsed = time.perf_counter() - started
        hung = runner.is_alive()
        # The connection is given up too, not left to a worker thread reading on: the
        # blocking client's socket is shut down under it.
        closed = trickle.closed_by_client.wait(0 if hung else 2.0)
    runner.join(10)  # the server has stopped: a client still reading gets an error now
    for sdk in sync_sdk:
        sdk.close()
    assert not hung, f"the run waited for the trickle ({elapsed:.1f} s)"
    assert closed
    error = outcome.get("error")
    assert isinstance(error, ModelUnavailableError), repr(error)
    assert "timed out" in str(error)
    assert error.result is not None and error.result.stop_reason == "error"
