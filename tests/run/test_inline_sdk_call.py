"""The blocking SDK call inline on ``agent.run()``'s private loop (run/_threads.py).

Alone on the engine's own loop, a sync client's request runs on the loop's thread, with no
hand-off to a worker and back; every guarantee of the worker-thread path holds: the
attempt's time limit (a watchdog thread aborts the call), Ctrl-C (a real SIGINT cancels
the run as promptly), retries, context variables, a key never in an error. Wherever one
of them could not hold (a run deadline, another task, a user's loop or Ctrl-C handler),
the request goes to a worker thread as before."""

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

KEY = "sk-inline-call-secret-0123456789"
REPO = Path(__file__).resolve().parents[2]
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("inline_test_var", default="unset")


class RecordingOpenAI(openai.OpenAI):
    """A blocking client that notes the thread (and a context variable) each request is
    prepared on: the agent's own copy of it (``with_options``) is of this class too."""

    def _prepare_request(self, request: Any) -> None:
        SENT.append((threading.current_thread().name, VAR.get()))
        super()._prepare_request(request)


SENT: list[tuple[str, str]] = []


CLIENTS: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    SENT.clear()
    yield
    while CLIENTS:
        CLIENTS.pop().close()


def _agent(base_url: str, tools: list[Any] | None = None, **options: Any) -> Agent:
    options.setdefault("settings", ModelSettings(timeout=10.0))
    options.setdefault("retry", RetryPolicy(max_attempts=1, sleep=None))
    CLIENTS.append(RecordingOpenAI(base_url=base_url, api_key=KEY))
    return Agent(
        "mock-model",
        tools or [],
        client=OpenAIChatModel(CLIENTS[-1]),
        capability_cache=CapabilityCache(),
        registry=CapabilityRegistry.from_default(env={}),
        **options,
    )


def _threads_used() -> list[str]:
    return [name for name, _ in SENT]


def _on_caller(names: list[str], caller: str) -> bool:
    return bool(names) and all(name == caller for name in names)


def _on_workers(names: list[str]) -> bool:
    return bool(names) and all(name.startswith("react-engine_") for name in names)


@tool
async def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city.
    """
    return f"{city}: sunny"


BACKGROUND: list[asyncio.Task[None]] = []


@tool
async def start_background(city: str) -> str:
    """Start a task that lives on after the call.

    Args:
        city: the city.
    """
    BACKGROUND.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
    return "started"


def _two_steps(name: str = "lookup") -> list[Any]:
    return [tool_calls_completion((name, {"city": "Paris"})), completion("done")]


# --- the inline path ----------------------------------------------------------------------------


def test_agent_run_sends_each_request_from_the_calling_thread() -> None:
    with ScriptedServer(*_two_steps(), *_two_steps()) as server:
        agent = _agent(server.base_url, [lookup])
        assert agent.run("go").answer == "done"
        assert agent.run("go").answer == "done"
    # Four requests, none handed to a worker thread (before: "react-engine_0" each).
    assert _threads_used() == ["MainThread"] * 4


def test_a_run_in_another_thread_runs_inline_there_too() -> None:
    answers: list[str | None] = []

    def other() -> None:
        answers.append(_agent(server.base_url, [lookup]).run("go").answer)

    with ScriptedServer(*_two_steps()) as server:
        thread = threading.Thread(target=other, name="user-thread")
        thread.start()
        thread.join(30)
    assert answers == ["done"]
    assert _threads_used() == ["user-thread"] * 2


def test_retries_and_context_variables_hold_inline() -> None:
    with ScriptedServer(
        MockResponse(503, {"error": {"message": "busy"}}), completion("done")
    ) as server:
        agent = _agent(server.base_url, retry=RetryPolicy(max_attempts=2, sleep=None))
        token = VAR.set("the caller's")
        try:
            assert agent.run("go").answer == "done"
        finally:
            VAR.reset(token)
    assert SENT == [("MainThread", "the caller's")] * 2


def test_each_run_sees_the_callers_context_of_the_moment() -> None:
    # The kept loop's runner gave every run the context copied for its first one: a
    # variable set by the caller later was not seen, one a run set leaked into the next.
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


# --- where the worker thread stays --------------------------------------------------------------


def test_a_run_deadline_keeps_the_worker_thread() -> None:
    # The deadline is a timer on the loop: a call blocking the loop would hold it up.
    with ScriptedServer(*_two_steps()) as server:
        assert _agent(server.base_url, [lookup]).run("go", deadline=30).answer == "done"
    assert _on_workers(_threads_used())


def test_another_task_on_the_loop_keeps_the_worker_thread() -> None:
    with ScriptedServer(*_two_steps("start_background")) as server:
        agent = _agent(server.base_url, [start_background])
        assert agent.run("go").answer == "done"
    names = _threads_used()
    assert names[0] == "MainThread"  # alone on the loop
    assert _on_workers(names[1:])  # the tool's task was still pending
    BACKGROUND.clear()


def test_a_users_event_loop_keeps_the_worker_thread() -> None:
    async def main() -> str | None:
        return _agent(server.base_url).run("go").answer  # on a thread of its own

    with ScriptedServer(completion("done")) as server:
        assert asyncio.run(main()) == "done"
    assert _on_workers(_threads_used())


def test_a_users_own_sigint_handler_keeps_the_worker_thread() -> None:
    # Only the runner's own handler knows to give the inline call up.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        with ScriptedServer(completion("done")) as server:
            assert _agent(server.base_url).run("go").answer == "done"
    finally:
        signal.signal(signal.SIGINT, previous)
    assert _on_workers(_threads_used())


# --- the attempt's time limit: the watchdog -------------------------------------------------------


class Trickle:
    """Answers with valid HTTP one byte every 0.1 s (a reply of minutes): only the
    attempt's total limit ends the request. Notes when the client gives the connection up."""

    def __init__(self) -> None:
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
        data = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        data += f"content-length: {len(body)}\r\n\r\n".encode() + body
        with conn:
            try:
                conn.recv(65536)
                for byte in data:
                    if self._stop.wait(0.1):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:  # the client shut the connection down
                self.given_up.set()


def _watchdogs() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "react-engine-watchdog"]


def test_the_watchdog_gives_a_trickling_reply_up_at_the_attempt_limit() -> None:
    with Trickle() as trickle:
        agent = _agent(trickle.base_url, settings=ModelSettings(timeout=1.0))
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(ModelUnavailableError) as info:
                agent.run("go")
            elapsed = time.monotonic() - started
            assert 0.9 < elapsed < 10, elapsed  # the limit, not the trickle's minutes
            assert "timed out" in str(info.value) and "1s" in str(info.value)
            assert trickle.given_up.wait(5)  # the connection was shut down, not left
            trickle.given_up.clear()
            error: BaseException | None = info.value
            while error is not None:  # only our own errors, none with the key
                assert isinstance(error, ModelAPIError), type(error)
                assert KEY not in str(error)
                error = error.__cause__ or error.__context__
    assert _threads_used() == ["MainThread"] * 2
    assert len(_watchdogs()) == 1  # one thread for every call, not one per call


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_gets_a_watchdog_of_its_own() -> None:
    with Trickle() as trickle:
        agent = _agent(trickle.base_url, settings=ModelSettings(timeout=0.5))
        with pytest.raises(ModelUnavailableError):
            agent.run("go")  # the parent's watchdog runs
        pid = os.fork()
        if pid == 0:  # the child: the parent's watchdog thread is not here
            code = 1
            try:
                started = time.monotonic()
                try:
                    agent.run("go")
                except ModelUnavailableError as exc:
                    if "timed out" in str(exc) and time.monotonic() - started < 10:
                        code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# --- Ctrl-C: a real SIGINT --------------------------------------------------------------------------

CHILD = textwrap.dedent(
    '''
    import json, sys, threading, time
    import openai
    from react_engine import Agent, CapabilityCache, CapabilityRegistry, ModelSettings
    from react_engine import OpenAIChatModel, RetryPolicy, tool
    from react_engine.run import _threads

    if sys.argv[2] == "thread":  # the worker-thread path, for comparison
        _threads._alone_on = lambda loop: None
    names = []

    class Recording(openai.OpenAI):
        def _prepare_request(self, request):
            names.append(threading.current_thread().name)
            super()._prepare_request(request)

    @tool
    def nap(city: str) -> str:
        """Sleep a long time.

        Args:
            city: anything.
        """
        print("napping", flush=True)
        time.sleep(30)
        return "woke"

    agent = Agent(
        "mock-model", [nap], client=OpenAIChatModel(Recording(base_url=sys.argv[1], api_key="sk-x")),
        settings=ModelSettings(timeout=120.0), retry=RetryPolicy(max_attempts=1, sleep=None),
        capability_cache=CapabilityCache(), registry=CapabilityRegistry.from_default(env={}),
    )
    outcome = {}
    try:
        agent.run("go")
    except BaseException as exc:
        outcome["error"] = type(exc).__name__
    outcome["interrupted_at"] = time.monotonic()
    outcome["next"] = agent.run("again").answer  # the loop and the client still serve
    outcome["threads"] = names
    print(json.dumps(outcome), flush=True)
    '''
)


def _interrupt_child(server: ScriptedServer, path: str, ready: Callable[[Any], bool]) -> Any:
    """Start the child, send it a SIGINT once ``ready(child)``; its outcome."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.base_url, path],
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
    # As a worker thread's run: KeyboardInterrupt at once (not after the long wait).
    assert outcome["error"] == "KeyboardInterrupt"
    assert outcome["interrupted_at"] - sent < 10
    assert outcome["next"] == "after"
    return outcome


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("path", ["inline", "thread"])
def test_ctrl_c_cancels_a_run_waiting_for_a_silent_server(path: str) -> None:
    def requested(child: Any) -> bool:
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        return bool(server.requests)

    never = MockResponse(body=completion("too late"), delay=300)
    with ScriptedServer(never, completion("after")) as server:
        outcome = _interrupt_child(server, path, requested)
    if path == "inline":
        assert outcome["threads"] == ["MainThread"] * 2
    else:
        assert _on_workers(outcome["threads"])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("path", ["inline", "thread"])
def test_ctrl_c_cancels_a_run_waiting_for_a_sync_tool(path: str) -> None:
    def napping(child: Any) -> bool:
        return bool(child.stdout.readline().strip() == "napping")

    nap = tool_calls_completion(("nap", {"city": "x"}))
    with ScriptedServer(nap, completion("after")) as server:
        _interrupt_child(server, path, napping)


# --- a sync tool waited for by the loop's own thread --------------------------------------------

SEEN_WAITING: list[str] = []
LOOP: list[asyncio.AbstractEventLoop] = []


@tool
def where_is_the_loop(city: str) -> str:
    """Look at what the run's thread does while this runs.

    Args:
        city: anything.
    """
    time.sleep(0.05)
    frame = sys._current_frames()[threading.main_thread().ident or 0]
    SEEN_WAITING.append(frame.f_code.co_name)
    return threading.current_thread().name


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


def test_a_sync_tool_runs_on_a_worker_thread_that_the_runs_thread_waits_for() -> None:
    SEEN_WAITING.clear()
    with ScriptedServer(*_two_steps("where_is_the_loop")) as server:
        result = _agent(server.base_url, [where_is_the_loop]).run("go")
    assert result.answer == "done"
    assert "react-engine-tool" in _observation(result, 0)  # still on a worker thread
    # The run's thread waits for it itself, not in the event loop's select().
    assert SEEN_WAITING == ["_wait_here"]


def test_a_sync_tool_calling_back_into_the_runs_loop_does_not_wait_for_itself() -> None:
    LOOP.clear()
    script = [
        tool_calls_completion(("keep_the_loop", {"city": "Paris"})),
        tool_calls_completion(("call_back_into_the_loop", {"city": "Paris"})),
        completion("done"),
    ]
    with ScriptedServer(*script) as server:
        agent = _agent(server.base_url, [keep_the_loop, call_back_into_the_loop])
        started = time.monotonic()
        result = agent.run("go")
    assert time.monotonic() - started < 5  # handed back to the loop, not the 10 s wait
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


@pytest.mark.parametrize("path", ["here", "loop"])
def test_a_sync_tool_past_its_timeout_gives_the_same_step(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from react_engine.run import _threads

    if path == "loop":
        monkeypatch.setattr(_threads, "_alone_on", lambda loop: None)
    with ScriptedServer(*_two_steps("oversleep")) as server:
        started = time.monotonic()
        result = _agent(server.base_url, [oversleep]).run("go")
        elapsed = time.monotonic() - started
    assert result.answer == "done"
    assert elapsed < 1.4  # the timeout, not the sleep
    assert "did not finish within 0.3s" in _observation(result, 0)


def _observation(result: Any, step: int) -> str:
    return repr(result.steps[step])
