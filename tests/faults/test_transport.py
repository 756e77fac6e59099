"""The transport failing under a run, through the real ``openai`` SDK over HTTP to a loopback
server, under every protocol, with the sync and the async client.

* network faults and server errors are retried (``Retry-After`` honoured and capped),
  then the run recovers or ends with a typed error that holds the transcript; client
  errors are not retried;
* a request that hangs past the run's deadline ends the run at the deadline;
* a server that trickles its reply, one byte at a time: each attempt is bounded in total,
  not only per read;
* a failed request's exception chain (``__cause__``, ``__context__``, args, traceback)
  never holds the raw API key.

No test really sleeps for a backoff: the retry policy's ``sleep`` is a fake that records
the waits.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
from typing import Any

import openai
import pytest
from support.faults import (
    ATTEMPTS,
    CLIENTS,
    GOOD,
    PROTOCOLS,
    Harness,
    assert_first_step_kept,
    lookup,
    run_agent,
)
from support.replies import (
    call_body,
    final_body,
)

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelAPIError,
    ModelRequestError,
    ModelSettings,
    ModelUnavailableError,
    RetryPolicy,
    Tool,
)
from react_engine.testing import MockResponse, ScriptedServer, completion

# --- transport faults: retried, then recovered or a typed error -----------------------------------

TRANSPORT_FAULTS: dict[str, tuple[MockResponse, int | None]] = {
    "429_retry_after": (
        MockResponse(429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "3"}),
        429,
    ),
    "500": (MockResponse(500, {"error": {"message": "internal error"}}), 500),
    "502": (MockResponse(502, "<html><body>502 Bad Gateway</body></html>"), 502),
    "503": (MockResponse(503, {"error": {"message": "overloaded"}}), 503),
    "hang_past_timeout": (MockResponse(body=GOOD, delay=1.0), None),
    "dropped_connection": (MockResponse(drop=True), None),
    "malformed_json_body": (MockResponse(body=b'{"id": "chatcmpl-1", "choices": [{"mess'), None),
    "html_body_with_200": (
        MockResponse(body="<html>proxy error</html>", headers={"content-type": "text/html"}),
        None,
    ),
    "no_choices_key": (MockResponse(body={"id": "x", "object": "chat.completion"}), None),
    "empty_choices": (
        MockResponse(body={"id": "x", "object": "chat.completion", "choices": []}),
        None,
    ),
    "choice_without_message": (
        MockResponse(body={"id": "x", "object": "chat.completion", "choices": [{"index": 0}]}),
        None,
    ),
    "reply_cut_mid_body": (MockResponse(body=GOOD, truncate_at=60), None),
}


def _timeout_for(fault: str) -> float:
    return 0.25 if fault == "hang_past_timeout" else 10.0


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_transport_fault_is_retried_and_the_run_recovers(
    server: ScriptedServer, harness: Harness, fault: str, protocol: str, client: str
) -> None:
    response, _ = TRANSPORT_FAULTS[fault]
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        response,
        final_body(protocol, "Paris has 5000 people."),
    )
    result = harness.run(protocol, client=client, timeout=_timeout_for(fault))

    assert result.answer == "Paris has 5000 people."
    assert result.stop_reason == "final_answer"
    assert [s.kind for s in result.steps] == ["action", "final"]
    assert_first_step_kept(result)
    assert harness.lookup.calls == ["Paris"]  # the tool ran once: a retry re-sends, never re-runs
    assert len(server.requests) == 3
    assert server.requests[2] == server.requests[1]  # the very same request, sent again
    assert len(harness.sleep.waits) == 1
    if fault == "429_retry_after":
        assert harness.sleep.waits == [3.0]  # the server's Retry-After, not our backoff
    else:
        assert 0.5 <= harness.sleep.waits[0] <= 1.0  # initial backoff plus jitter
    assert result.usage.requests == 2  # the failed attempt produced no reply


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_persistent_transport_fault_ends_with_a_typed_error_and_the_transcript(
    server: ScriptedServer, harness: Harness, fault: str, protocol: str, client: str
) -> None:
    response, status = TRANSPORT_FAULTS[fault]
    server.push(call_body(protocol, "lookup", {"city": "Paris"}), *[response] * ATTEMPTS)
    with pytest.raises(ModelUnavailableError) as info:
        harness.run(protocol, client=client, timeout=_timeout_for(fault))

    err = info.value
    assert err.attempts == ATTEMPTS
    assert f"after {ATTEMPTS} attempts" in str(err)
    assert err.status_code == status
    assert len(server.requests) == 1 + ATTEMPTS
    assert len(harness.sleep.waits) == ATTEMPTS - 1
    assert err.result is not None
    assert err.result.stop_reason == "error"
    assert err.result.error == str(err)
    assert err.result.protocol == protocol
    assert [s.kind for s in err.result.steps] == ["action"]
    assert_first_step_kept(err.result)
    assert harness.lookup.calls == ["Paris"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_hang_past_the_run_deadline_ends_the_run_on_time(
    server: ScriptedServer, harness: Harness, protocol: str, client: str
) -> None:
    """The HTTP timeout is long and the server hangs as long: the deadline (1 s) still holds,
    for the blocking client too, whose request runs in a thread nothing can cancel."""
    hang = 60.0
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        MockResponse(body=GOOD, delay=hang),
        MockResponse(body=GOOD, delay=hang),
    )
    started = time.perf_counter()
    result = harness.run(
        protocol, client=client, timeout=hang, deadline=1.0, retry=RetryPolicy(sleep=None)
    )
    elapsed = time.perf_counter() - started
    assert result.stop_reason == "deadline"
    assert result.answer is None
    assert [s.kind for s in result.steps] == ["action"]
    assert_first_step_kept(result)
    assert len(server.requests) == 2  # the hung request was not retried either
    # The run ended long before the hang or the HTTP timeout would have let it: a run that
    # waited for either takes the whole minute.
    assert elapsed < hang / 3


def test_retry_after_longer_than_the_backoff_cap_is_capped(
    server: ScriptedServer, harness: Harness
) -> None:
    server.push(
        MockResponse(429, {"error": {"message": "slow down"}}, {"retry-after": "3600"}),
        final_body("function_calling", "ok"),
    )
    harness.run("function_calling", retry=RetryPolicy(max_backoff=7.5, sleep=harness.sleep))
    assert harness.sleep.waits == [7.5]


def test_a_retry_after_header_that_is_no_number_nor_date_is_backoff_as_usual(
    server: ScriptedServer, harness: Harness
) -> None:
    """``Retry-After: soon`` is no wait the server asked for: the run retries after its own
    backoff (it once raised the date parser's ValueError out of the request)."""
    server.push(
        MockResponse(503, {"error": {"message": "busy"}}, {"retry-after": "soon"}),
        final_body("function_calling", "ok"),
    )
    policy = RetryPolicy(initial_backoff=2.0, jitter=0.0, sleep=harness.sleep)
    assert harness.run("function_calling", retry=policy).answer == "ok"
    assert harness.sleep.waits == [2.0]


@pytest.mark.parametrize("client", CLIENTS)
def test_on_retry_is_told_of_each_retry_before_its_wait(
    server: ScriptedServer, harness: Harness, client: str
) -> None:
    """The hook the CLI shows retries with: the attempt that follows, its wait, the error."""
    seen: list[tuple[int, float, str, int]] = []

    def on_retry(attempt: int, wait: float, error: BaseException) -> None:
        seen.append((attempt, wait, str(error), len(harness.sleep.waits)))

    overloaded = MockResponse(503, {"error": {"message": "overloaded"}})
    server.push(overloaded, overloaded, final_body("function_calling", "ok"))
    policy = RetryPolicy(max_attempts=4, sleep=harness.sleep, on_retry=on_retry)
    assert harness.run("function_calling", client=client, retry=policy).answer == "ok"
    assert [attempt for attempt, *_ in seen] == [2, 3]  # the first retry, then the second
    assert [wait for _, wait, *_ in seen] == harness.sleep.waits  # the waits that followed
    assert [waited for *_, waited in seen] == [0, 1]  # each told before its wait
    assert all("overloaded" in error for _, _, error, _ in seen)


def test_retry_after_ms_is_honoured(server: ScriptedServer, harness: Harness) -> None:
    server.push(
        MockResponse(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "250"}),
        final_body("function_calling", "ok"),
    )
    assert harness.run("function_calling").answer == "ok"
    assert harness.sleep.waits == [0.25]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried_and_keep_the_transcript(
    server: ScriptedServer, harness: Harness, protocol: str, status: int
) -> None:
    server.push(
        call_body(protocol, "lookup", {"city": "Paris"}),
        MockResponse(status, {"error": {"message": f"nope ({status})"}}),
    )
    with pytest.raises(ModelRequestError) as info:
        harness.run(protocol)
    err = info.value
    assert err.status_code == status
    assert err.attempts == 1
    assert err.body == f"nope ({status})"
    assert harness.sleep.waits == []
    assert len(server.requests) == 2
    assert err.result is not None and err.result.stop_reason == "error"
    assert_first_step_kept(err.result)


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
        # An async client's connection is given up too. A blocking client's request is
        # left to its worker thread, which no public interface can stop (it ends with the
        # server's reply or the SDK's read timeout: docs/reliability.md).
        closed = client == "sync" or trickle.closed_by_client.wait(0 if hung else 2.0)
    runner.join(10)  # the server has stopped: a client still reading gets an error now
    for sdk in sync_sdk:
        sdk.close()
    assert not hung, f"the run waited for the trickle ({elapsed:.1f} s)"
    assert closed
    error = outcome.get("error")
    assert isinstance(error, ModelUnavailableError), repr(error)
    assert "timed out" in str(error)
    assert error.result is not None and error.result.stop_reason == "error"
