"""What ``agent.run()`` promises, run as a user runs it (react_engine/runtime.py).

A real SIGINT to a child process during a model request and during a sync tool ends the run
at once, with the run so far (:class:`~react_engine.errors.RunInterrupted`); the run's
deadline holds during a sync tool that never returns; a forked child runs an agent with
sync tools as promptly as its parent; ``@tool(inline=True)`` runs in the run's own task;
a user's own blocking client keeps its retries, context variables and attempt limit."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from react_engine import (
    Agent,
    CapabilityCache,
    CapabilityRegistry,
    ModelSettings,
    ModelUnavailableError,
    OpenAIChatModel,
    RetryPolicy,
    tool,
)
from react_engine.errors import ModelAPIError
from react_engine.testing import MockResponse, ScriptedServer, completion, tool_calls_completion
from react_engine.types import ModelRequest, UserMessage

KEY = "sk-sync-runs-secret-0123456789"
REPO = Path(__file__).resolve().parents[2]
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("sync_runs_var", default="unset")
SENT: list[tuple[str, str]] = []
CLIENTS: list[openai.OpenAI] = []


def recording_client(base_url: str) -> openai.OpenAI:
    """A user's own blocking client that notes the thread (and a context variable) each
    request is sent on, through its HTTP client's public request hook."""

    def note(request: Any) -> None:
        SENT.append((threading.current_thread().name, VAR.get()))

    http = openai.DefaultHttpxClient(event_hooks={"request": [note]})
    return openai.OpenAI(base_url=base_url, api_key=KEY, http_client=http)


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    SENT.clear()
    yield
    while CLIENTS:
        CLIENTS.pop().close()


def _agent(base_url: str, tools: list[Any] | None = None, **options: Any) -> Agent:
    """An agent on a user's own blocking client."""
    options.setdefault("settings", ModelSettings(timeout=10.0))
    options.setdefault("retry", RetryPolicy(max_attempts=1, sleep=None))
    CLIENTS.append(recording_client(base_url))
    return Agent(
        "mock-model",
        tools or [],
        client=OpenAIChatModel(CLIENTS[-1]),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **options,
    )


def _built(base_url: str, tools: list[Any], **options: Any) -> Agent:
    """An agent on the client it builds itself (``base_url=``)."""
    return Agent(
        "mock-model",
        tools,
        base_url=base_url,
        api_key=KEY,
        retry=RetryPolicy(max_attempts=1, sleep=None),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **options,
    )


def _call(name: str) -> dict[str, Any]:
    return tool_calls_completion((name, {"city": "Paris"}))


def _observation(result: Any, step: int) -> str:
    return str(result.steps[step].actions[0].observation)


# --- a user's own blocking client ---------------------------------------------------------------


def test_a_users_blocking_client_keeps_retries_and_context_variables() -> None:
    with ScriptedServer(
        MockResponse(503, {"error": {"message": "busy"}}), completion("done")
    ) as server:
        agent = _agent(server.base_url, retry=RetryPolicy(max_attempts=2, sleep=None))
        token = VAR.set("the caller's")
        try:
            assert agent.run("go").answer == "done"
        finally:
            VAR.reset(token)
    assert [var for _, var in SENT] == ["the caller's"] * 2
    assert all(name.startswith("react-engine") for name, _ in SENT)  # on worker threads


def test_each_run_sees_the_callers_context_of_the_moment() -> None:
    # A kept runner's own context (copied once) would hand the first run's variables on.
    with ScriptedServer(completion("one"), completion("two")) as server:
        agent = _agent(server.base_url)
        token = VAR.set("first")
        try:
            agent.run("go")
            VAR.set("second")
            agent.run("go")
        finally:
            VAR.reset(token)
    assert [var for _, var in SENT] == ["first", "second"]


class Trickle:
    """Answers with valid HTTP one byte every 0.1 s (a reply of minutes): only the
    attempt's total limit ends the request. Notes when the client gives the connection up.
    ``streamed``: the headers of an event stream at once, then its body a byte at a time."""

    def __init__(self, *, streamed: bool = False) -> None:
        self.streamed = streamed
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._stop = threading.Event()
        self.given_up = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Trickle:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        body = json.dumps(completion("x" * 2000)).encode()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        head += f"content-length: {len(body)}\r\n\r\n".encode()
        if self.streamed:
            body = b"data: " + json.dumps(CHUNK).encode() + b"\n\n"
            head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            head += f"content-length: {len(body) * 1000}\r\n\r\n".encode()
            body *= 1000
        data = body if self.streamed else head + body
        with conn:
            try:
                conn.recv(65536)
                if self.streamed:
                    conn.sendall(head)
                for byte in data:
                    if self._stop.wait(0.1):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:  # the client shut the connection down
                self.given_up.set()


def test_a_trickling_reply_is_given_up_at_the_attempt_limit() -> None:
    with Trickle() as trickle:
        agent = _agent(trickle.base_url, settings=ModelSettings(timeout=1.0))
        started = time.monotonic()
        with pytest.raises(ModelUnavailableError) as info:
            agent.run("go")
        elapsed = time.monotonic() - started
        assert 0.9 < elapsed < 10, elapsed  # the limit, not the trickle's minutes
        assert "timed out" in str(info.value) and "1s" in str(info.value)
    error: BaseException | None = info.value
    while error is not None:  # only our own errors, none with the key
        assert isinstance(error, ModelAPIError), type(error)
        assert KEY not in str(error)
        error = error.__cause__ or error.__context__


CHUNK = {
    "id": "c",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "mock-model",
    "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
}


def test_a_trickling_stream_given_up_has_its_connection_shut_down() -> None:
    # A worker thread reads a blocking client's stream: cancelling cannot stop it, so the
    # connection is shut down under it (docs/reliability.md), not left to the trickle.
    async def read(model: OpenAIChatModel) -> None:
        request = ModelRequest(
            model="mock-model",
            messages=(UserMessage("go"),),
            settings=ModelSettings(timeout=1.0),
        )
        with pytest.raises(ModelUnavailableError, match="timed out"):
            async for _ in model.stream(request):
                pass

    with Trickle(streamed=True) as trickle:
        CLIENTS.append(openai.OpenAI(base_url=trickle.base_url, api_key=KEY))
        started = time.monotonic()
        asyncio.run(read(OpenAIChatModel(CLIENTS[-1])))  # past the headers, in the body
        assert time.monotonic() - started < 5
        assert trickle.given_up.wait(2)  # shut down, not left reading for minutes


# --- sync tools ------------------------------------------------------------------------------------

LOOP: list[asyncio.AbstractEventLoop] = []


@tool
async def keep_the_loop(city: str) -> str:
    """Note the run's loop.

    Args:
        city: anything.
    """
    LOOP.append(asyncio.get_running_loop())
    return "kept"


@tool
def call_back_into_the_loop(city: str) -> str:
    """Run a coroutine on the run's own loop and wait for it, from the tool's thread.

    Args:
        city: anything.
    """

    async def answer() -> str:
        await asyncio.sleep(0)
        return f"{city} from the loop"

    return asyncio.run_coroutine_threadsafe(answer(), LOOP[-1]).result(timeout=10)


def test_a_sync_tool_calling_back_into_the_runs_loop_does_not_wait_for_itself() -> None:
    LOOP.clear()
    script = [_call("keep_the_loop"), _call("call_back_into_the_loop"), completion("done")]
    with ScriptedServer(*script) as server:
        agent = _agent(server.base_url, [keep_the_loop, call_back_into_the_loop])
        started = time.monotonic()
        result = agent.run("go")
    assert time.monotonic() - started < 5  # not the 10 s wait
    assert result.answer == "done"
    assert "Paris from the loop" in _observation(result, 1)


@tool(timeout=0.3)
def oversleep(city: str) -> str:
    """Sleep past the tool's timeout.

    Args:
        city: anything.
    """
    time.sleep(1.5)
    return "late"


def test_a_sync_tool_past_its_timeout_is_given_up() -> None:
    with ScriptedServer(_call("oversleep"), completion("done")) as server:
        started = time.monotonic()
        result = _built(server.base_url, [oversleep]).run("go")
        elapsed = time.monotonic() - started
    assert result.answer == "done"
    assert elapsed < 1.4  # the timeout, not the sleep
    assert "did not finish within 0.3s" in _observation(result, 0)


def test_the_deadline_holds_during_a_sync_tool_that_never_returns() -> None:
    gate = threading.Event()

    @tool
    def stuck(city: str) -> str:
        """Wait for a gate nobody opens.

        Args:
            city: anything.
        """
        gate.wait(30)
        return "released"

    try:
        with ScriptedServer(_call("stuck"), completion("never asked")) as server:
            started = time.monotonic()
            result = _built(server.base_url, [stuck]).run("go", deadline=0.5, tool_timeout=None)
            elapsed = time.monotonic() - started
    finally:
        gate.set()
    assert elapsed < 5, elapsed  # the deadline, not the tool's 30 s
    assert result.stop_reason == "deadline"
    assert result.steps[0].actions[0].status == "timeout"


WHERE: list[tuple[str, bool]] = []


@tool(inline=True)
def add_inline(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: one.
        b: the other.
    """
    WHERE.append((threading.current_thread().name, asyncio.current_task() is not None))
    return a + b


@tool
def add_on_a_thread(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: one.
        b: the other.
    """
    WHERE.append((threading.current_thread().name, _in_a_task()))
    return a + b


def _in_a_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running loop on this thread
        return False


def test_an_inline_tool_runs_in_the_runs_own_task_and_others_on_a_thread() -> None:
    WHERE.clear()
    script = [
        tool_calls_completion(("add_inline", {"a": 1, "b": 2})),
        tool_calls_completion(("add_on_a_thread", {"a": 3, "b": 4})),
        completion("done"),
    ]
    with ScriptedServer(*script) as server:
        agent = _built(server.base_url, [add_inline, add_on_a_thread])
        result = agent.run("go")
    assert result.answer == "done"
    assert [_observation(result, 0), _observation(result, 1)] == ["3", "7"]
    here = threading.current_thread().name
    assert [(here, True), ("react-engine-tool", False)] == WHERE
    assert add_inline.inline and not add_on_a_thread.inline


def test_inline_must_be_a_bool() -> None:
    from react_engine import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match="inline must be True or False"):
        tool(inline="yes")(add_on_a_thread.function)  # type: ignore[call-overload]


def test_a_cancelled_async_run_carries_the_run_so_far() -> None:
    started = asyncio.Event()

    @tool
    async def wait_long(city: str) -> str:
        """Wait a long time.

        Args:
            city: anything.
        """
        started.set()
        await asyncio.sleep(60)
        return "late"

    async def main(base_url: str) -> Any:
        agent = _built(base_url, [add_on_a_thread, wait_long])
        run = asyncio.create_task(agent.arun("go"))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await run
        return info.value

    script = [
        tool_calls_completion(("add_on_a_thread", {"a": 1, "b": 1})),
        _call("wait_long"),
    ]
    with ScriptedServer(*script) as server:
        error = asyncio.run(main(server.base_url))
    result = error.result
    assert result.stop_reason == "cancelled"
    assert [_observation(result, 0)] == ["2"] and len(result.steps) == 1


# --- Ctrl-C: a real SIGINT to a child process ----------------------------------------------------

CHILD = textwrap.dedent(
    '''
    import json, sys, time
    import openai
    from react_engine import Agent, CapabilityCache, CapabilityRegistry, ModelSettings
    from react_engine import OpenAIChatModel, RetryPolicy, RunInterrupted, tool

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        return city + ": sunny"

    @tool
    def nap(city: str) -> str:
        """Sleep a long time.

        Args:
            city: anything.
        """
        print("napping", flush=True)
        time.sleep(60)
        return "woke"

    base_url, client = sys.argv[1], sys.argv[2]
    options = dict(
        settings=ModelSettings(timeout=120.0), retry=RetryPolicy(max_attempts=1, sleep=None),
        capability_cache=CapabilityCache(), registry=CapabilityRegistry.from_default(env={}),
    )
    if client == "sync":  # the user's own blocking client
        model = OpenAIChatModel(openai.OpenAI(base_url=base_url, api_key="sk-x"))
        agent = Agent("mock-model", [lookup, nap], client=model, **options)
    else:  # the client the agent builds
        agent = Agent("mock-model", [lookup, nap], base_url=base_url, **options)
    outcome = {}
    try:
        agent.run("go")
    except BaseException as exc:
        outcome["error"] = type(exc).__name__
        outcome["keyboard_interrupt"] = isinstance(exc, KeyboardInterrupt)
        if isinstance(exc, RunInterrupted):
            outcome["stop_reason"] = exc.result.stop_reason
            outcome["so_far"] = [a.observation for s in exc.result.steps for a in s.actions]
    outcome["interrupted_at"] = time.monotonic()
    outcome["next"] = agent.run("again").answer  # the process goes on serving runs
    print(json.dumps(outcome), flush=True)
    '''
)


def _interrupt_child(server: ScriptedServer, client: str, ready: Callable[[Any], bool]) -> Any:
    """Start the child, send it a SIGINT once ``ready(child)``; its outcome."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.base_url, client],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert ready(child), "the child never got where it waits"
        time.sleep(0.3)  # well into its wait
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    outcome = json.loads(out.splitlines()[-1])
    assert outcome["error"] == "RunInterrupted" and outcome["keyboard_interrupt"]
    assert outcome["interrupted_at"] - sent < 10  # at once, not after the long wait
    assert outcome["stop_reason"] == "cancelled"
    assert outcome["so_far"] == ["Paris: sunny"]  # the step done before the interrupt
    assert outcome["next"] == "after"
    return outcome


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("client", ["built", "sync"])
def test_ctrl_c_during_a_model_request_raises_the_run_so_far(client: str) -> None:
    def requested(child: Any) -> bool:
        deadline = time.monotonic() + 60
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(server.requests) == 2

    never = MockResponse(body=completion("too late"), delay=300)
    with ScriptedServer(_call("lookup"), never, completion("after")) as server:
        _interrupt_child(server, client, requested)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("client", ["built", "sync"])
def test_ctrl_c_during_a_sync_tool_raises_the_run_so_far(client: str) -> None:
    def napping(child: Any) -> bool:
        return bool(child.stdout.readline().strip() == "napping")

    with ScriptedServer(_call("lookup"), _call("nap"), completion("after")) as server:
        _interrupt_child(server, client, napping)


# --- fork -----------------------------------------------------------------------------------------

FORKING = textwrap.dedent(
    '''
    import json, os, sys, time
    from react_engine import Agent, CapabilityCache, CapabilityRegistry, RetryPolicy, tool

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city.
        """
        return city + ": sunny"

    agent = Agent(
        "mock-model", [lookup], base_url=sys.argv[1], retry=RetryPolicy(max_attempts=1, sleep=None),
        capability_cache=CapabilityCache(), registry=CapabilityRegistry.from_default(env={}),
    )
    agent.run("in the parent", tool_timeout=20)  # the pools' threads start here
    pid = os.fork()
    if pid == 0:  # as gunicorn --preload, Celery or multiprocessing's workers
        code = 1
        try:
            started = time.monotonic()
            result = agent.run("in the child", tool_timeout=20)
            print(json.dumps({
                "seconds": time.monotonic() - started,
                "observation": result.steps[0].actions[0].observation,
                "answer": result.answer,
            }), flush=True)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    '''
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_runs_an_agent_with_a_sync_tool_promptly() -> None:
    script = [_call("lookup"), completion("parent done"), _call("lookup"), completion("child done")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    with ScriptedServer(*script) as server:
        done = subprocess.run(
            [sys.executable, "-c", FORKING, server.base_url],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.splitlines()[-1])
    # Before: the child's call waited for a parent thread that is not there, for 20 s.
    assert outcome["seconds"] < 5, outcome
    assert outcome["observation"] == "Paris: sunny"
    assert outcome["answer"] == "child done"


# --- the kept loop and the clients on it -------------------------------------------------------


def test_a_dropped_agents_client_is_closed_on_the_kept_loop_which_stays() -> None:
    import gc

    LOOP.clear()
    script = [_call("keep_the_loop"), completion("done")] * 4
    dropped: list[Agent] = []

    async def collect(step: Any) -> None:
        if step.kind == "final":  # the first agent goes while a run is on the kept loop
            dropped.clear()
            gc.collect()  # its client is closed there, not left unclosed (a warning here)

    with ScriptedServer(*script) as server:
        first = _built(server.base_url, [keep_the_loop])
        assert first.run("go").answer == "done"
        dropped.append(first)
        del first
        second = _built(server.base_url, [keep_the_loop], on_step=collect)
        for _ in range(3):
            assert second.run("go").answer == "done"
    assert len(LOOP) == 4
    assert all(loop is LOOP[0] for loop in LOOP)  # one loop, kept across the four runs
    assert not LOOP[0].is_closed()
