"""The ``react-engine`` command line, as ``main(argv) -> int``.

Commands::

    react-engine run "question"   answer one question, showing each step as it happens
    react-engine chat             a multi-turn conversation with slash commands
    react-engine compare          the side-by-side protocol comparison (react_engine.compare)
    react-engine demo             the weather agent (what ``make demo`` runs)
    react-engine eval bfcl        BFCL's AST categories under each protocol (react_engine.eval)

Where the model is: ``--base-url``/``--model``/``--api-key-env`` (or ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``REACT_ENGINE_MODEL``); ``--local`` for the embedded llama.cpp model,
which ``demo`` and ``compare`` use when no endpoint is configured; ``--dry-run`` (a canned
weather transcript) or ``--scripted FILE`` for the scripted model, with no server at all.

Errors a user can cause (no endpoint, a bad key, an unknown model, an unreachable server, a
tools module that does not import, a bad template) print one line on stderr and return a
non-zero code: 2 for configuration, 3 for a run that ended without an answer, 4 for the
API, 130 for Ctrl-C, 141 when the reader of the output went away (``| head``).

Ctrl-C ends the process at once, the trace of what was done written first: it does not
wait for the request (or the tool) in flight, and a second Ctrl-C prints no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import io
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..agent import Agent, Conversation
from ..compare.run import (
    CompareSettings,
    Target,
    TaskRun,
    format_report,
    run_comparison,
    write_outputs,
)
from ..compare.suite import (
    ALL_PROTOCOLS,
    PROTOCOLS,
    ScriptReply,
    Transcript,
    load_script,
    load_tasks,
)
from ..errors import (
    ConfigurationError,
    ModelAPIError,
    ReactEngineError,
    RunAborted,
    UserError,
)
from ..eval.bfcl import add_eval_parser, run_eval_command
from ..events import ActionDecided, Event, RunDone, StepDone
from ..model import ChatModel, RetryPolicy, mask_key
from ..selection import protocol_names
from ..state import RUN_EVENT
from ..testing import ScriptedModel
from ..tools import Tool
from ..types import (
    ActionRecord,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    RunResult,
    Step,
    Usage,
    to_jsonable,
)
from .demo import DEMO_QUESTION, DEMO_TOOLS, DRY_RUN_SCRIPT, demo_check, get_weather
from .render import LivePrinter, StepPrinter, _isatty, format_history, format_result, use_color

__all__ = ["ChatSession", "Endpoint", "build_parser", "main"]

EXIT_CONFIG = 2
EXIT_NO_ANSWER = 3
EXIT_API = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a process the broken pipe would have killed."""


class _Exit(Exception):
    """Leave ``main`` with one line on stderr and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- where the model is -----------------------------------------------------------------------


class _ScriptedReplies:
    """The scripted model's replies per protocol: a request with ``tools`` is answered from
    the function-calling list, one without from the text list, or from the structured list
    when the agent runs that protocol (or from one shared list)."""

    def __init__(self, script: dict[str, list[ScriptReply]], label: str) -> None:
        self._transcripts = {k: Transcript(v, label=f"{label} [{k}]") for k, v in script.items()}
        self.protocol = "auto"
        """The protocol the agent was asked for (a structured request looks like a text one)."""

    def __call__(self, request: ModelRequest) -> ModelResponse:
        protocol = "function_calling" if request.tools else "text"
        if protocol == "text" and self.protocol == "structured":
            protocol = "structured"
        transcript = self._transcripts.get(protocol) or self._transcripts.get("*")
        if transcript is None:
            raise ConfigurationError(f"the script has no replies for the {protocol} protocol")
        return transcript(request)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A chat model the CLI talks to: an API endpoint, the local server, or a script."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    key_env: str = "OPENAI_API_KEY"
    local: bool = False
    client: ChatModel | None = field(default=None, compare=False)
    """A scripted model in place of an endpoint."""
    replies: _ScriptedReplies | None = field(default=None, compare=False)
    """The script behind ``client``, told which protocol the agent runs."""

    @property
    def where(self) -> str:
        if self.client is not None:
            return "scripted replies, no server"
        if self.local:
            return f"embedded local model at {self.base_url}"
        return self.base_url or "the default OpenAI endpoint"


def _env_model() -> str | None:
    return os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")


def _api_key(args: argparse.Namespace) -> tuple[str | None, str]:
    explicit = getattr(args, "api_key_env", None)
    env = explicit or "OPENAI_API_KEY"
    key = os.environ.get(env) or None
    if explicit and key is None:
        raise ConfigurationError(f"--api-key-env {explicit}: the environment variable is not set")
    return key, env


def _configured(
    args: argparse.Namespace, models: Sequence[str], *, strict: bool
) -> Endpoint | None:
    """The endpoint given by flags or the environment; ``None`` when there is none.

    With ``strict``, a half-configured endpoint is an error; otherwise (``demo``, ``compare``)
    an environment with a key but no model name leaves the choice to the local model.
    """
    base_url = getattr(args, "base_url", None) or os.environ.get("OPENAI_BASE_URL") or None
    key, env = _api_key(args)
    flags = bool(getattr(args, "base_url", None) or models or getattr(args, "api_key_env", None))
    model = models[0] if models else _env_model()
    if not (base_url or key):
        if flags:
            raise ConfigurationError(
                "no endpoint: pass --base-url or set OPENAI_BASE_URL (and the API key in "
                "$OPENAI_API_KEY or --api-key-env NAME)"
            )
        return None
    if not model:
        if strict or flags:
            raise ConfigurationError(
                f"no model name for {base_url or 'the OpenAI API'}: pass --model or set "
                "REACT_ENGINE_MODEL"
            )
        return None
    return Endpoint(model, base_url, key, env)


def _script(args: argparse.Namespace) -> dict[str, list[ScriptReply]] | None:
    if getattr(args, "scripted", None):
        return load_script(Path(args.scripted))
    if getattr(args, "dry_run", False):
        return {k: [ScriptReply.model_validate(r) for r in v] for k, v in DRY_RUN_SCRIPT.items()}
    return None


@contextlib.contextmanager
def _endpoint(args: argparse.Namespace, *, local_default: bool) -> Iterator[Endpoint]:
    script = _script(args)
    if script is not None:
        model = args.model or "scripted"
        replies = _ScriptedReplies(script, "script")
        yield Endpoint(model, client=ScriptedModel(replies), replies=replies)
        return
    if not args.local:
        configured = _configured(args, [args.model] if args.model else [], strict=not local_default)
        if configured is not None:
            yield configured
            return
        if not local_default:
            raise ConfigurationError(
                "no endpoint: pass --base-url and --model (or set OPENAI_BASE_URL / "
                "OPENAI_API_KEY and REACT_ENGINE_MODEL), use --local for the embedded model, "
                "or --dry-run"
            )
    with _local() as ep:
        yield ep


@contextlib.contextmanager
def _local() -> Iterator[Endpoint]:
    from ..local import local_server

    print(
        ">> starting the embedded SmolLM2-135M model on 127.0.0.1 (a few seconds)...",
        file=sys.stderr,
        flush=True,
    )
    with local_server() as local:
        print(f">> local server ready at {local.base_url}", file=sys.stderr, flush=True)
        yield Endpoint(
            local.model,
            local.base_url,
            local.api_key,
            local=True,
        )


def _describe_api_error(exc: ModelAPIError, ep: Endpoint | None, model: str | None) -> str:
    """One line that says what the user can do about an API failure."""
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
    return _describe_api_failure(exc, ep, model) + notes


def _describe_api_failure(exc: ModelAPIError, ep: Endpoint | None, model: str | None) -> str:
    log_path = getattr(exc, "log_path", None)
    if log_path is not None:  # the local server did not start
        return f"{_one_line(str(exc).splitlines()[0])} (server log: {log_path})"
    where = ep.where if ep is not None else "the server"
    detail = _one_line(exc.body or str(exc), 200)
    status = exc.status_code
    if status in (401, 403):
        key = f"${ep.key_env} = {mask_key(ep.api_key)}" if ep is not None else "the API key"
        return f"{where} rejected the API key ({key}): HTTP {status}: {detail}"
    if status == 404:
        return (
            f"{where} does not know model {model!r} (HTTP 404: {detail}); "
            "check --model and --base-url"
        )
    if status is None and str(exc).startswith("cannot reach"):
        return f"cannot reach {where}: is the server running? ({_one_line(str(exc), 200)})"
    return _one_line(str(exc))


# --- tools, agents, settings ------------------------------------------------------------------


def _load_tools(spec: str | None) -> list[Tool]:
    if not spec:
        return list(DEMO_TOOLS)
    try:
        module = importlib.import_module(spec)
    except Exception as exc:  # any import failure is the user's to fix
        raise ConfigurationError(
            f"cannot import tools module {spec!r}: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from None
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise ConfigurationError(f"module {spec!r} defines no @tool")
    return found


def _settings(args: argparse.Namespace, ep: Endpoint) -> ModelSettings:
    """Sampling settings: the flags, with repeatable defaults for the local model."""
    local = ep.local
    return ModelSettings(
        temperature=args.temperature if args.temperature is not None else (0.0 if local else None),
        seed=args.seed if args.seed is not None else (42 if local else None),
        max_tokens=args.max_tokens if args.max_tokens is not None else (256 if local else None),
    )


def _make_agent(
    args: argparse.Namespace,
    ep: Endpoint,
    tools: Sequence[Tool],
    protocol: str,
    on_step: Callable[[Step], None] | None,
    **options: Any,
) -> Agent:
    """The agent a command runs: the endpoint, the flags, and ``options`` over them."""
    if ep.replies is not None:
        ep.replies.protocol = protocol
    chosen: dict[str, Any] = {
        "max_steps": args.max_steps,
        "settings": _settings(args, ep),
        "retry": RetryPolicy(max_attempts=args.max_retries + 1),
        **options,
    }
    return Agent(
        ep.model,
        tools,
        protocol=protocol,
        client=ep.client,
        base_url=ep.base_url,
        api_key=ep.api_key,
        template=args.template,
        implicit_final_answer=args.implicit_final_answer,
        on_step=on_step,
        **chosen,
    )


def _describe_protocol(agent: Agent) -> str:
    protocol, reason, _ = agent.choose_protocol()
    return f"{protocol.name} ({reason})"


def _partial_result(agent: Agent, question: str, steps: list[Step], started: float) -> RunResult:
    """What a trace file records of a run that Ctrl-C interrupted."""

    protocol, reason, _ = agent.choose_protocol()
    usage = Usage()
    for step in steps:
        usage.add(step.usage)
    return RunResult(
        question=question,
        answer=None,
        steps=list(steps),
        usage=usage,
        protocol=steps[-1].protocol if steps else protocol.name,
        protocol_reason=reason,
        stop_reason="cancelled",
        model=agent.model,
        duration_s=time.perf_counter() - started,
        error="interrupted by the user (Ctrl-C)",
    )


# --- run and demo -----------------------------------------------------------------------------


def _check_trace(path: str | None) -> None:
    """Fail before the run, not after it, when the trace file cannot be written."""
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"--trace {path}: cannot write it: {exc.strerror or exc}"
        ) from None


def _trace_error(result: RunResult, path: str | None) -> str | None:
    """Append ``result`` to the trace file; what went wrong, in one line, if it could not."""
    if not path:
        return None
    try:
        result.write_trace(path)
    except OSError as exc:
        return f"cannot write the trace to {path}: {exc.strerror or exc}"
    return None


def _write_trace(result: RunResult, path: str | None) -> None:
    """Append ``result`` to the trace file, or say in one line on stderr why it could not."""
    error = _trace_error(result, path)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)


def _print_result(result: RunResult, args: argparse.Namespace) -> None:
    """Print the result, then append it to the trace file: a trace that cannot be written
    does not cost the answer (the error comes after it, and the exit code says so)."""
    try:
        _show_result(result, args)
    finally:  # written even when the output cannot be (a closed pipe)
        error = _trace_error(result, args.trace)
    if error is not None:
        raise _Exit(error, EXIT_CONFIG)


def _show_result(result: RunResult, args: argparse.Namespace) -> None:
    if args.json:
        payload = {
            "question": result.question,
            "answer": result.answer,
            "stop_reason": result.stop_reason,
            "error": result.error,
            "model": result.model,
            "protocol": result.protocol,
            "protocol_reason": result.protocol_reason,
            "usage": to_jsonable(result.usage),
            "duration_s": result.duration_s,
            "events": result.events,
            "steps": to_jsonable(result.steps),
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print(format_result(result, color=use_color(sys.stdout)))


def _cmd_run(args: argparse.Namespace, *, local_default: bool) -> int:
    tools = _load_tools(args.tools)
    _check_trace(args.trace)
    question: str = args.question
    with _endpoint(args, local_default=local_default) as ep:
        printer = None if args.json else StepPrinter(sys.stdout)
        # On a terminal the run streams: tokens as they come, each action before its tool
        # runs. Elsewhere (a pipe, a file, a test) the output is step by step, as before.
        live = LivePrinter(sys.stdout, steps=printer) if printer and _isatty(sys.stdout) else None
        steps: list[Step] = []

        def on_step(step: Step) -> None:
            steps.append(step)
            if printer is not None and live is None:
                printer(step)

        agent = _make_agent(args, ep, tools, args.protocol, on_step)
        chosen = _describe_protocol(agent)
        if not args.json:
            print(f"model {agent.model} · {ep.where} · protocol {chosen}", flush=True)
        started = time.perf_counter()
        try:
            result = agent.run(question) if live is None else _streamed(agent, question, live)
        except RunAborted as exc:
            _print_result(exc.result, args)
            raise _Exit(
                f"the run stopped without an answer: {_one_line(str(exc))}", EXIT_NO_ANSWER
            ) from None
        except ModelAPIError as exc:
            if exc.result is not None:
                _write_trace(exc.result, args.trace)
            raise _Exit(_describe_api_error(exc, ep, agent.model), EXIT_API) from None
        except (KeyboardInterrupt, BrokenPipeError):
            # Ctrl-C, or the reader of our output went away: keep what was done.
            _write_trace(_partial_result(agent, question, steps, started), args.trace)
            raise
        _print_result(result, args)
    return 0 if result.answer is not None else EXIT_NO_ANSWER


def _streamed(
    agent: Agent, question: str, show: Callable[[Event], None], **options: Any
) -> RunResult:
    """Run streaming, showing each event; the result, or the run's error raised."""
    for event in agent.run_stream(question, **options):
        show(event)
        if isinstance(event, RunDone):
            return event.result
    raise AssertionError("a run's events end with RunDone")  # pragma: no cover


# --- demo -------------------------------------------------------------------------------------


class _Ticker:
    """Shows how long the model has been thinking, on a terminal, until the next event."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = _isatty(stream)
        self.since = time.perf_counter()
        self._stop = threading.Event()
        self.lock = threading.Lock()
        self._shown = False
        self._thread: threading.Thread | None = None
        self.paused: Callable[[], bool] = lambda: False
        """True while something else writes on the line (a streamed reply)."""

    def __enter__(self) -> _Ticker:
        if self.live:
            self._thread = threading.Thread(target=self._run, daemon=True, name="demo-ticker")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.clear()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with self.lock:
                if self.paused():
                    continue
                elapsed = time.perf_counter() - self.since
                self.stream.write(f"\r  … the model is thinking ({elapsed:4.1f} s)")
                self.stream.flush()
                self._shown = True

    def clear(self) -> None:
        with self.lock:
            if self._shown:
                self.stream.write("\r" + " " * 48 + "\r")
                self.stream.flush()
                self._shown = False

    def say(self, text: str) -> None:
        """Print a line, then start timing the next wait."""
        with self.lock:
            if self._shown:
                self.stream.write("\r" + " " * 48 + "\r")
                self._shown = False
            print(text, file=self.stream, flush=True)
            self.since = time.perf_counter()


def _cmd_demo(args: argparse.Namespace) -> int:
    """The weather agent, with every step shown as it happens and the answer checked."""
    tools = _load_tools(args.tools) if args.tools else [get_weather]
    _check_trace(args.trace)
    with _endpoint(args, local_default=True) as ep:
        out = sys.stdout
        printer = None if args.json else StepPrinter(out)
        ticker = _Ticker(out if printer is not None else io.StringIO())

        live = LivePrinter(out, steps=printer) if printer and _isatty(out) else None

        def on_call(record: ActionRecord) -> None:
            if live is None:
                ticker.say(f"  → calling {record.tool}({_args_text(record.arguments)})")

        def on_step(step: Step) -> None:
            if printer is not None and live is None:
                ticker.clear()
                printer(step)
            ticker.since = time.perf_counter()

        def show(event: Event) -> None:
            assert live is not None
            if not live.writing:
                ticker.clear()
            with ticker.lock:  # the ticker does not write over the reply
                live(event)
            if isinstance(event, StepDone | ActionDecided):
                ticker.since = time.perf_counter()

        protocol = args.protocol
        # The question needs a tool: the first step must call one (then the choice is
        # the model's again). A 135M model given the choice after a result tends to call
        # the same tool again rather than answer, so on the embedded model the demo allows
        # one round of calls and then asks for the answer (--max-steps changes that).
        limits: dict[str, Any] = {"tool_choice": "required"}
        max_steps = args.max_steps if args.max_steps is not None else (1 if ep.local else 6)
        agent = _make_agent(
            args, ep, tools, protocol, on_step, max_steps=max_steps, on_call=on_call
        )
        if not args.json:
            print(f"model {agent.model} · {ep.where} · protocol {_describe_protocol(agent)}")
            print(f"question: {args.question}", flush=True)
        if live is not None:
            ticker.paused = lambda: live.writing
        with ticker:
            try:
                if live is None:
                    result = agent.run(args.question, **limits)
                else:
                    result = _streamed(agent, args.question, show, **limits)
            except RunAborted as exc:
                ticker.clear()
                _print_result(exc.result, args)
                raise _Exit(
                    f"the run stopped without an answer: {_one_line(str(exc))}", EXIT_NO_ANSWER
                ) from None
            except ModelAPIError as exc:
                raise _Exit(_describe_api_error(exc, ep, agent.model), EXIT_API) from None
        _print_result(result, args)
    ok, why = demo_check(result)
    if not args.json:
        print(("✓ " if ok else "✗ ") + why, flush=True)
    if not ok:
        return EXIT_NO_ANSWER
    return 0


def _args_text(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, dict):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return arguments


# --- chat -------------------------------------------------------------------------------------

_HELP = """\
Commands:
  /help             this help
  /history          the conversation so far: questions, tool calls, answers
  /tools            the tools the agent may call
  /settings         model, endpoint, API key (masked), protocol, limits
  /trace FILE       append each turn's trace to FILE (JSON Lines); /trace off to stop
  /protocol NAME    switch protocol: auto, function_calling, text or structured (history kept)
  /exit             leave (Ctrl-D too)
Ctrl-C during an answer interrupts it; the conversation keeps what was done so far."""


class ChatSession:
    """The interactive loop of ``react-engine chat``, with its slash commands.

    Streams and the line reader are injectable, so the loop runs in-process in tests.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        endpoint: Endpoint,
        tools: Sequence[Tool],
        *,
        out: TextIO | None = None,
        read_line: Callable[[str], str] = input,
    ) -> None:
        self.args = args
        self.endpoint = endpoint
        self.tools = list(tools)
        self.out = out or sys.stdout
        self.read_line = read_line
        self.protocol: str = args.protocol
        self.trace_path: str | None = args.trace
        self.printer = StepPrinter(self.out)
        self.conversation = Conversation(self._agent())

    def _agent(self) -> Agent:
        return _make_agent(self.args, self.endpoint, self.tools, self.protocol, self.printer)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def loop(self) -> int:
        agent = self.conversation.agent
        self.say(
            f"react-engine chat · model {agent.model} · {self.endpoint.where} · "
            f"protocol {_describe_protocol(agent)}\nType a question, or /help."
        )
        while True:
            try:
                line = self.read_line("you> ").strip()
            except EOFError:
                self.say("")
                return 0
            except KeyboardInterrupt:
                self.say("\n(Ctrl-C: type /exit or press Ctrl-D to leave)")
                continue
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    return 0
                continue
            self.ask(line)

    # --- slash commands ------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run a slash command; ``False`` means leave."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/exit", "/quit"):
            self.say("bye")
            return False
        if name == "/help":
            self.say(_HELP)
        elif name == "/history":
            self.say(format_history(self.conversation.history))
        elif name == "/tools":
            for t in self.tools:
                args = ", ".join(t.argument_names)
                self.say(
                    f"  {t.name}({args}): {t.description.splitlines()[0] if t.description else ''}"
                )
        elif name == "/settings":
            self.say(self._settings_text())
        elif name == "/trace":
            self._set_trace(rest)
        elif name == "/protocol":
            self._set_protocol(rest)
        else:
            self.say(f"unknown command {name}; /help lists the commands")
        return True

    def _settings_text(self) -> str:
        ep, agent, args = self.endpoint, self.conversation.agent, self.args
        s = _settings(args, ep)
        sampling = ", ".join(
            f"{k}={v}"
            for k, v in (
                ("temperature", s.temperature),
                ("seed", s.seed),
                ("max_tokens", s.max_tokens),
            )
            if v is not None
        )
        key = (
            "(not used)"
            if ep.client is not None
            else f"{mask_key(ep.api_key)} (from ${ep.key_env})"
        )
        return "\n".join(
            [
                f"  model:     {agent.model}",
                f"  endpoint:  {ep.where}",
                f"  API key:   {key}",
                f"  protocol:  {self.protocol} -> {_describe_protocol(agent)}",
                f"  template:  {args.template or '(the model family default)'}",
                f"  tools:     {', '.join(t.name for t in self.tools)}",
                f"  max steps: {args.max_steps}",
                f"  sampling:  {sampling or '(server defaults)'}",
                f"  trace:     {self.trace_path or 'off'}",
                f"  history:   {len(self.conversation.history)} items",
            ]
        )

    def _set_trace(self, rest: str) -> None:
        if not rest:
            self.say(f"trace: {self.trace_path or 'off'} (usage: /trace FILE or /trace off)")
        elif rest == "off":
            self.trace_path = None
            self.say("trace: off")
        else:
            try:
                with open(rest, "a", encoding="utf-8"):
                    pass
            except OSError as exc:
                self.say(f"cannot write {rest}: {exc.strerror or exc}")
                return
            self.trace_path = rest
            self.say(f"trace: appending each turn to {rest}")

    def _set_protocol(self, rest: str) -> None:
        if rest not in protocol_names():
            self.say(f"protocol: {self.protocol}; usage: /protocol {'|'.join(protocol_names())}")
            return
        self.protocol = rest
        self.conversation.agent = self._agent()
        self.say(f"protocol: {_describe_protocol(self.conversation.agent)}; the history is kept")

    # --- a turn ----------------------------------------------------------------------------------

    def _trace(self, result: RunResult) -> None:
        try:
            result.write_trace(str(self.trace_path))
        except OSError as exc:
            self.say(f"(cannot write the trace to {self.trace_path}: {exc.strerror or exc})")

    def ask(self, question: str) -> None:
        import time

        history = self.conversation.history
        before = len(history)
        started = time.perf_counter()
        try:
            result = asyncio.run(self.conversation.aask(question))
        except KeyboardInterrupt:
            steps = [i for i in history[before:] if isinstance(i, Step)]
            self.say(
                f"\n(interrupted: the conversation keeps this question and the {len(steps)} "
                "step(s) done so far)"
            )
            if self.trace_path:
                agent = self.conversation.agent
                self._trace(_partial_result(agent, question, steps, started))
            return
        except RunAborted as exc:
            result = exc.result
        except ModelAPIError as exc:
            self.say(
                f"error: {_describe_api_error(exc, self.endpoint, self.conversation.agent.model)}"
            )
            return
        if self.trace_path:
            self._trace(result)
        if result.answer is not None:
            self.say(f"assistant> {result.answer}")
        else:
            self.say(
                f"(no answer: {result.stop_reason}{': ' + result.error if result.error else ''})"
            )
        u = result.usage
        self.say(
            f"   [{result.protocol} · {u.requests} LLM call(s) · {len(result.tool_calls)} tool "
            f"call(s) · {u.prompt_tokens}+{u.completion_tokens} tokens · {result.duration_s:.1f}s]"
        )
        shown = {event for step in result.steps for event in step.events}
        for event in result.events:
            if event not in shown:  # the run's own events, which no step printed
                self.say(f"   ! {event}")


def _cmd_chat(args: argparse.Namespace) -> int:
    tools = _load_tools(args.tools)
    _check_trace(args.trace)
    with _endpoint(args, local_default=False) as ep:
        return ChatSession(args, ep, tools).loop()


# --- compare ----------------------------------------------------------------------------------


def _progress(run: TaskRun, done: int, total: int) -> None:
    m = run.metrics
    verdict = "ok" if run.success else "FAILED"
    print(
        f"[{done:>3}/{total}] {run.task} · {run.model} · {run.protocol}: {verdict} · "
        f"{m.llm_calls} LLM calls · {m.prompt_tokens:,}+{m.completion_tokens:,} tokens · "
        f"{m.wall_s:.1f}s",
        file=sys.stderr,
        flush=True,
    )


@contextlib.contextmanager
def _compare_targets(
    args: argparse.Namespace, protocols: Sequence[str]
) -> Iterator[tuple[list[Target], str]]:
    chosen = [p for p in ALL_PROTOCOLS if p in protocols]
    if args.scripted:
        yield [Target("scripted", p, scripted=True) for p in chosen], "scripted"
        return
    if not args.local:
        ep = _configured(args, args.model or [], strict=False)
        if ep is not None:
            models = args.model or [ep.model]
            targets = [
                Target(m, p, base_url=ep.base_url, api_key=ep.api_key)
                for m in models
                for p in chosen
            ]
            yield targets, ep.where
            return
    with _local() as local:
        targets = [
            Target(
                local.model,
                p,
                api_model=local.model,
                base_url=local.base_url,
                api_key=local.api_key,
            )
            for p in chosen
        ]
        yield targets, "embedded llama.cpp server"


def _cmd_compare(args: argparse.Namespace) -> int:
    tasks = load_tasks(Path(args.tasks) if args.tasks else None, args.task or ())
    settings = CompareSettings(
        seed=args.seed,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_attempts=args.max_retries + 1,
        tool_choice=args.tool_choice,
    )
    with _compare_targets(args, args.protocol or PROTOCOLS) as (targets, source):
        try:
            report = run_comparison(
                tasks, targets, settings, source=source, progress=None if args.quiet else _progress
            )
        except ModelAPIError as exc:
            ep = Endpoint(targets[0].model, targets[0].base_url, targets[0].api_key)
            raise _Exit(
                _describe_api_error(exc, ep, targets[0].api_model or targets[0].model), EXIT_API
            ) from None
    print(format_report(report))
    if args.out:
        for path in write_outputs(report, Path(args.out), plot=not args.no_plot):
            print(f"wrote {path}", file=sys.stderr)
    return 0


# --- the parser -------------------------------------------------------------------------------


def _add_endpoint_options(p: argparse.ArgumentParser, *, many_models: bool = False) -> None:
    if many_models:
        p.add_argument(
            "--model",
            action="append",
            help="model name; repeat to compare several (default: $REACT_ENGINE_MODEL)",
        )
    else:
        p.add_argument("--model", help="model name (default: $REACT_ENGINE_MODEL / $OPENAI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="use the embedded local model even if an endpoint is set",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=3,
        metavar="N",
        help="network retries of transient failures per request (default: 3)",
    )


def _add_agent_options(p: argparse.ArgumentParser) -> None:
    _add_endpoint_options(p)
    p.add_argument("--protocol", choices=list(protocol_names()), default="auto")
    p.add_argument("--template", help="text template: classic, json, zh, or a .toml path")
    p.add_argument(
        "--implicit-final-answer",
        action="store_true",
        help="text protocol: take a reply with no labels as the final answer (default: an error)",
    )
    p.add_argument(
        "--tools",
        metavar="MODULE",
        help="a module whose @tool functions the agent may call (default: the demo tools)",
    )
    p.add_argument("--max-steps", type=int, default=6, metavar="N")
    p.add_argument(
        "--trace", metavar="FILE", help="append each run's trace to this JSON Lines file"
    )
    p.add_argument("--temperature", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--max-tokens", type=int, metavar="N")
    scripted = p.add_mutually_exclusive_group()
    scripted.add_argument(
        "--dry-run", action="store_true", help="no server: replay a canned weather transcript"
    )
    scripted.add_argument(
        "--scripted", metavar="FILE", help="no server: replay the replies in FILE (JSON)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="react-engine", description="ReAct agents over any OpenAI-compatible chat API."
    )
    parser.add_argument("--version", action="version", version=f"react-engine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="answer one question, showing each step")
    run.add_argument("question")
    _add_agent_options(run)
    run.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")

    chat = sub.add_parser("chat", help="an interactive multi-turn conversation")
    _add_agent_options(chat)

    demo = sub.add_parser(
        "demo", help="the weather agent (embedded local model unless an endpoint is set)"
    )
    _add_agent_options(demo)
    demo.add_argument("--question", default=DEMO_QUESTION)
    demo.set_defaults(max_steps=None)
    demo.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")

    compare = sub.add_parser(
        "compare", help="run the task suite under each protocol and compare them side by side"
    )
    _add_endpoint_options(compare, many_models=True)
    compare.add_argument(
        "--protocol",
        action="append",
        choices=list(ALL_PROTOCOLS),
        help="a protocol to run; repeat for several (default: function_calling and text)",
    )
    compare.add_argument(
        "--tasks",
        metavar="DIR",
        help="a directory of task files (default: the suite shipped with react-engine)",
    )
    compare.add_argument(
        "--task", action="append", metavar="ID", help="run only this task; repeatable"
    )
    compare.add_argument(
        "--scripted", action="store_true", help="replay each task's scripted transcripts: no server"
    )
    compare.add_argument(
        "--out", metavar="DIR", help="write comparison.json, .csv, .txt and .png here"
    )
    compare.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    compare.add_argument("--seed", type=int, default=42)
    compare.add_argument("--temperature", type=float, default=0.0)
    compare.add_argument(
        "--tool-choice",
        choices=["auto", "required"],
        default="auto",
        help="'required': each run's first step must call a tool (then 'auto')",
    )
    compare.add_argument("--max-tokens", type=int, default=256, metavar="N")
    compare.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    add_eval_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (never raises for a user's mistake).

    With ``argv=None`` (``python -m react_engine``, the ``react-engine`` script) this is the
    whole process, and the end of it is handled here too: output to a reader that went away
    ends quietly with 141, and Ctrl-C ends the process at once with 130, without waiting
    for a request or a tool still running in a worker thread.
    """
    process = argv is None
    try:
        with _warnings_on_stderr():
            code = _main(argv, process=process)
        if process:
            sys.stdout.flush()  # a pipe's buffer: a closed reader shows up here
    except BrokenPipeError:
        code = _broken_pipe(process)
    if process and code == EXIT_INTERRUPTED:
        _exit_now(code)
    return code


class _NotARunEvent(logging.Filter):
    """Leaves out the warnings that are also a run's events (logged with ``RUN_EVENT``):
    the CLI prints those with the steps and the result."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(getattr(record, key, False) for key in RUN_EVENT)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """While the CLI runs, the library's warnings go to stderr, one ``warning:`` line each.

    The library's logger has only a ``NullHandler`` of its own: without this, a program
    that configures no logging (this one) would not see them at all. The handler is removed
    when ``main`` returns, so calling ``main`` again does not print each warning twice.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    handler.addFilter(_NotARunEvent())
    logger = logging.getLogger("react_engine")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _broken_pipe(process: bool) -> int:
    """The reader of stdout went away (``react-engine run ... | head -2``): stop quietly.

    The rest of the output goes to /dev/null, so the interpreter's final flush cannot
    complain about the pipe on stderr.
    """
    if process:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    return EXIT_BROKEN_PIPE


def _exit_now(code: int) -> None:
    """Leave the process now: a worker thread still blocked on a request or a tool would
    otherwise hold the interpreter's exit (up to the request's timeout)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


def _ignore_sigint() -> None:
    """After the first Ctrl-C the process is leaving: a second one must not interrupt that
    (it would print a traceback)."""
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main(argv: Sequence[str] | None, *, process: bool) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    try:
        if args.command == "run":
            return _cmd_run(args, local_default=False)
        if args.command == "demo":
            args.question = args.question or DEMO_QUESTION
            return _cmd_demo(args)
        if args.command == "chat":
            return _cmd_chat(args)
        if args.command == "eval":
            return run_eval_command(args)
        return _cmd_compare(args)
    except _Exit as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        if process:
            _ignore_sigint()
        print("interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _broken_pipe(process)
    except UserError as exc:
        print(f"error: {_one_line(str(exc), 500)}", file=sys.stderr)
        return EXIT_CONFIG
    except ModelAPIError as exc:
        print(f"error: {_describe_api_error(exc, None, None)}", file=sys.stderr)
        return EXIT_API
    except ReactEngineError as exc:
        print(f"error: {_one_line(str(exc), 500)}", file=sys.stderr)
        return 1
