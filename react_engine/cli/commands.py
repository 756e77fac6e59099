"""The ``react-engine`` command line, as ``main(argv) -> int``.

Commands::

    react-engine run "question"   answer one question, showing each step as it happens
    react-engine chat             a multi-turn conversation with slash commands
    react-engine compare          the side-by-side protocol comparison (react_engine.compare)
    react-engine demo             the weather agent (what ``make demo`` runs)
    react-engine eval bfcl        BFCL's AST categories under each protocol (react_engine.eval)

What goes where, as Unix tools do: the answer alone on stdout (the JSON with ``--json``);
the steps, the progress (a ticker while the model thinks and each network retry, on a
terminal), the summary and the warnings on stderr, so ``react-engine run q > answer.txt``
keeps the answer. ``-q`` prints the answer only; ``run -`` reads the question from stdin.

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
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import Capabilities, __version__
from ..compare.run import (
    CompareSettings,
    Target,
    TaskRun,
    format_report,
    run_comparison,
    write_outputs,
)
from ..compare.suite import (
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
from ..protocols.registry import auto_order, protocol_names, registration
from ..run.agent import Agent, Conversation
from ..run.events import Event, RunDone
from ..run.state import RUN_EVENT
from ..testing import ScriptedModel
from ..tools import Tool
from ..transport.base import ChatModel
from ..transport.retries import RetryPolicy
from ..transport.wire import mask_key
from ..types import (
    ActionRecord,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    RunResult,
    Step,
    to_jsonable,
)
from .demo import DEMO_QUESTION, DEMO_TOOLS, DRY_RUN_SCRIPT, demo_check, get_weather
from .probe import add_probe_parser, run_probe_command
from .render import (
    LivePrinter,
    StepPrinter,
    Ticker,
    _isatty,
    call_arguments,
    format_history,
    format_result,
    stop_words,
    use_color,
)
from .runs import add_runs_parser, chat_session, run_runs_command

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
    """The scripted model's replies per protocol: the list of the protocol the agent runs,
    else the native (function-calling) list written in its format by the registry
    (:meth:`Registration.scripted <react_engine.protocols.registry.Registration.scripted>`), else
    the one shared list (``"*"``). Under ``"auto"``, a request with ``tools`` is the native
    protocol's, one without the protocol ``"auto"`` falls back to."""

    def __init__(self, script: dict[str, list[ScriptReply]], label: str) -> None:
        self._script = script
        self._label = label
        self._transcripts: dict[str, Transcript] = {}
        self.protocol = "auto"
        """The protocol the agent was asked for (a structured request looks like a text one)."""

    def _protocol(self, request: ModelRequest) -> str:
        named = self.protocol if self.protocol in protocol_names()[1:] else None
        if named is not None and registration(named).native_calls == bool(request.tools):
            return named
        if request.tools:
            return "function_calling"
        return auto_order(Capabilities(function_calling=False))[0]

    def _transcript(self, protocol: str) -> Transcript | None:
        replies = self._script.get(protocol)
        native = self._script.get("function_calling")
        if replies is None and native is not None:
            written = registration(protocol).scripted([r.model_dump() for r in native])
            replies = [ScriptReply.model_validate(r) for r in written]
        key = protocol if replies is not None else "*"
        replies = replies if replies is not None else self._script.get("*")
        if replies is None:
            return None
        if key not in self._transcripts:
            self._transcripts[key] = Transcript(replies, label=f"{self._label} [{key}]")
        return self._transcripts[key]

    def __call__(self, request: ModelRequest) -> ModelResponse:
        protocol = self._protocol(request)
        transcript = self._transcript(protocol)
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
    an environment with a key but no model name leaves the choice to the local model (a
    key alone is often set for other programs). A base URL without a model name is an
    error for every command: that user meant their server.
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
        if strict or flags or base_url:
            raise ConfigurationError(
                f"no model name for {base_url or 'the OpenAI API'}: pass --model or set "
                "REACT_ENGINE_MODEL (or --local for the embedded model)"
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
    with _local(quiet=args.quiet) as ep:
        yield ep


@contextlib.contextmanager
def _local(*, quiet: bool = False) -> Iterator[Endpoint]:
    from ..local import local_server

    if not quiet:
        print(
            ">> starting the embedded SmolLM2-135M model on 127.0.0.1 (a few seconds)...",
            file=sys.stderr,
            flush=True,
        )
    with local_server() as local:
        if not quiet:
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
    """The ``@tool`` functions of ``--tools``: a ``.py`` file, or a module importable from
    the current directory (as ``python -m`` would find it, with no ``PYTHONPATH=.``)."""
    if not spec:
        return list(DEMO_TOOLS)
    try:
        module = _import_tools(spec)
    except ConfigurationError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name != spec.partition(".")[0]:
            raise ConfigurationError(
                f"cannot import tools module {spec!r}: ModuleNotFoundError: {_one_line(str(exc))}"
            ) from None
        raise ConfigurationError(
            f"--tools {spec}: no module {exc.name!r} in {os.getcwd()} or on the Python path; "
            "name a file to load it from elsewhere (--tools ./dir/mytools.py)"
        ) from None
    except Exception as exc:  # any import failure is the user's to fix
        raise ConfigurationError(
            f"cannot import tools module {spec!r}: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from None
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise ConfigurationError(f"module {spec!r} defines no @tool")
    return found


def _import_tools(spec: str) -> Any:
    path = Path(spec)
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        if not path.is_file():
            raise ConfigurationError(f"--tools {spec}: no such file")
        return _import_file(path.resolve())
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # what `python -m` does; the console script does not
    return importlib.import_module(spec)


def _import_file(path: Path) -> Any:
    """Import a ``.py`` file as a module (its folder on ``sys.path``, as ``python FILE``
    has it, so that it can import its neighbours)."""
    import importlib.util

    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    if loaded is not None or not name.isidentifier():
        name = f"_react_engine_tools_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"--tools {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module  # pydantic and dataclasses look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


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
    *,
    on_retry: Callable[[int, float, BaseException], None] | None = None,
    **options: Any,
) -> Agent:
    """The agent a command runs: the endpoint, the flags, and ``options`` over them;
    ``on_retry`` is told of each network retry before its wait."""
    if ep.replies is not None:
        ep.replies.protocol = protocol
    chosen: dict[str, Any] = {
        "max_steps": args.max_steps,
        "settings": _settings(args, ep),
        "retry": RetryPolicy(max_attempts=args.max_retries + 1, on_retry=on_retry),
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


def _show_result(result: RunResult, args: argparse.Namespace) -> None:
    """The answer alone on stdout (or the JSON with ``--json``); the rest of the result on
    stderr, unless ``--quiet``."""
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
            "events": [notice.message for notice in result.notices],
            "steps": to_jsonable(result.steps),
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    if not args.quiet:
        summary = format_result(result, color=use_color(sys.stderr), answer=False)
        print(summary, file=sys.stderr, flush=True)
    if result.answer is not None:
        print(result.answer, flush=True)


class _Progress:
    """What a command shows on stderr while a run goes: each step, each call before its
    tool runs, each network retry, and a ticker while the model thinks (on a terminal).

    With ``--quiet`` nothing; with ``--json`` only the ticker and the retries, on a
    terminal. On a terminal ``run`` and ``demo`` stream (:class:`LivePrinter`): the model's
    text as it is written, each step printed once.
    """

    def __init__(self, args: argparse.Namespace, *, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        quiet = bool(getattr(args, "quiet", False))
        tty = _isatty(self.stream)
        self.printer = None if quiet or getattr(args, "json", False) else StepPrinter(self.stream)
        self.ticker = Ticker(self.stream, live=tty and not quiet)
        self.live = LivePrinter(self.stream, steps=self.printer) if self.printer and tty else None
        if self.live is not None:
            live = self.live
            self.ticker.paused = lambda: live.writing
        self.max_retries: int = args.max_retries

    def say(self, text: str) -> None:
        if self.printer is not None:
            self.ticker.say(text)

    def on_step(self, step: Step) -> None:
        if self.printer is not None and self.live is None:
            with self.ticker.writing():
                self.printer(step)

    def on_call(self, record: ActionRecord) -> None:
        if self.printer is not None and self.live is None:
            self.ticker.say(f"  → calling {record.tool}({call_arguments(record.arguments)})")

    def on_retry(self, attempt: int, wait: float, error: BaseException) -> None:
        if self.printer is not None or self.ticker.live:
            self.ticker.say(
                f"   ↻ retry {attempt - 1}/{self.max_retries} in {wait:.1f} s: "
                f"{_one_line(str(error), 200)}"
            )

    def show(self, event: Event) -> None:
        """A streamed run's event, on the terminal (``live`` only)."""
        assert self.live is not None
        with self.ticker.writing():
            self.live(event)

    def run(self, agent: Agent, question: str, **options: Any) -> RunResult:
        """The run, streamed on a terminal; the ticker shows the waits."""
        with self.ticker:
            if self.live is None:
                return agent.run(question, **options)
            return _streamed(agent, question, self.show, **options)


def _read_question(args: argparse.Namespace) -> str:
    """The question: the argument, or stdin when it is ``-``."""
    question: str = args.question
    if question != "-":
        return question
    if _isatty(sys.stdin) and not args.quiet:
        print("(reading the question from stdin; end it with Ctrl-D)", file=sys.stderr)
    question = sys.stdin.read().strip()
    if not question:
        raise ConfigurationError("run -: no question on stdin")
    return question


def _warn_unused_options(args: argparse.Namespace, agent: Agent) -> None:
    """Say on stderr which options the chosen protocol does not read."""
    protocol, _, _ = agent.choose_protocol()
    if protocol.name == "text":
        return
    maybe = " unless the run falls back to text" if getattr(args, "protocol", "") == "auto" else ""
    for flag, given in (
        ("--template", getattr(args, "template", None)),
        ("--implicit-final-answer", getattr(args, "implicit_final_answer", False)),
    ):
        if given:
            print(
                f"warning: {flag} does nothing under the {protocol.name} protocol{maybe}: "
                "only the text protocol reads it",
                file=sys.stderr,
            )


def _answer(
    args: argparse.Namespace,
    ep: Endpoint,
    agent: Agent,
    progress: _Progress,
    question: str,
    **options: Any,
) -> RunResult:
    """Run ``agent`` on ``question`` with ``progress`` on stderr; the result printed, or the
    run's error as an :class:`_Exit`. With ``--trace`` the run writes its trace as it goes
    (:mod:`react_engine.run.tracefile`): a run stopped by Ctrl-C, SIGTERM or SIGKILL leaves
    every reply paid for and every call started on disk."""
    if args.trace:
        options["trace"] = args.trace
    try:
        result = progress.run(agent, question, **options)
    except RunAborted as exc:
        _show_result(exc.result, args)
        raise _Exit(
            f"the run stopped without an answer: {_one_line(str(exc))}", EXIT_NO_ANSWER
        ) from None
    except ModelAPIError as exc:
        raise _Exit(_describe_api_error(exc, ep, agent.model), EXIT_API) from None
    _show_result(result, args)
    from ..run.tracefile import TRACE_FAILED

    failed = next((n.message for n in result.notices if n.message.startswith(TRACE_FAILED)), None)
    if failed is not None:  # the answer is out; the exit code says the trace is not whole
        raise _Exit(failed, EXIT_CONFIG)
    return result


def _cmd_run(args: argparse.Namespace, *, local_default: bool) -> int:
    tools = _load_tools(args.tools)
    _check_trace(args.trace)
    question = _read_question(args)
    with _endpoint(args, local_default=local_default) as ep:
        progress = _Progress(args)
        agent = _make_agent(
            args,
            ep,
            tools,
            args.protocol,
            progress.on_step,
            on_call=progress.on_call,
            on_retry=progress.on_retry,
        )
        _warn_unused_options(args, agent)
        progress.say(f"model {agent.model} · {ep.where} · protocol {_describe_protocol(agent)}")
        result = _answer(args, ep, agent, progress, question)
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


def _cmd_demo(args: argparse.Namespace) -> int:
    """The weather agent, with every step shown as it happens and the answer checked."""
    tools = _load_tools(args.tools) if args.tools else [get_weather]
    _check_trace(args.trace)
    with _endpoint(args, local_default=True) as ep:
        progress = _Progress(args)
        # The question needs a tool: the first step must call one (then the choice is
        # the model's again). A 135M model given the choice after a result tends to call
        # the same tool again rather than answer, so on the embedded model the demo allows
        # one round of calls and then asks for the answer (--max-steps changes that).
        max_steps = args.max_steps if args.max_steps is not None else (1 if ep.local else 6)
        agent = _make_agent(
            args,
            ep,
            tools,
            args.protocol,
            progress.on_step,
            max_steps=max_steps,
            on_call=progress.on_call,
            on_retry=progress.on_retry,
        )
        _warn_unused_options(args, agent)
        progress.say(f"model {agent.model} · {ep.where} · protocol {_describe_protocol(agent)}")
        progress.say(f"question: {args.question}")
        result = _answer(args, ep, agent, progress, args.question, tool_choice="required")
    ok, why = demo_check(result)
    progress.say(("✓ " if ok else "✗ ") + why)
    if not ok:
        return EXIT_NO_ANSWER
    return 0


# --- chat -------------------------------------------------------------------------------------

_HELP = """\
Commands:
  /help             this help
  /history          the conversation so far: questions, tool calls, answers
  /tools            the tools the agent may call
  /settings         model, endpoint, API key (masked), protocol, limits
  /trace FILE       append each turn's trace to FILE (JSON Lines); /trace off to stop
  /protocol NAME    switch protocol: {protocols} (history kept)
  /exit             leave (Ctrl-D too)
Ctrl-C during an answer interrupts it; the conversation keeps what was done so far."""


class ChatSession:
    """The interactive loop of ``react-engine chat``, with its slash commands.

    Answers and what the slash commands print go to ``out`` (stdout); the steps, the
    ticker, each turn's figures and errors to ``err`` (stderr). Streams and the line
    reader are injectable, so the loop runs in-process in tests.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        endpoint: Endpoint,
        tools: Sequence[Tool],
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        read_line: Callable[[str], str] = input,
    ) -> None:
        self.args = args
        self.endpoint = endpoint
        self.tools = list(tools)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.read_line = read_line
        self.protocol: str = args.protocol
        self.trace_path: str | None = args.trace
        self.progress = _Progress(args, stream=self.err)
        self.conversation = Conversation(
            self._agent(), session=chat_session(getattr(args, "session", None))
        )

    def _agent(self) -> Agent:
        p = self.progress
        return _make_agent(
            self.args,
            self.endpoint,
            self.tools,
            self.protocol,
            p.on_step,
            on_call=p.on_call,
            on_retry=p.on_retry,
        )

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A line on stderr: progress, figures, errors."""
        print(text, file=self.err, flush=True)

    def loop(self) -> int:
        agent = self.conversation.agent
        if not self.args.quiet:
            self.note(
                f"react-engine chat · model {agent.model} · {self.endpoint.where} · "
                f"protocol {_describe_protocol(agent)}\nType a question, or /help."
            )
        while True:
            try:
                line = clean_line(self.read_line("you> "))
            except EOFError:
                self.say("")
                return 0
            except KeyboardInterrupt:
                self.note("\n(Ctrl-C: type /exit or press Ctrl-D to leave)")
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
            self.say(_HELP.format(protocols=", ".join(protocol_names())))
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

    def ask(self, question: str) -> None:
        history = self.conversation.history
        before = len(history)
        options: dict[str, Any] = {"trace": self.trace_path} if self.trace_path else {}
        try:
            with self.progress.ticker:
                result = asyncio.run(self.conversation.aask(question, **options))
        except KeyboardInterrupt:
            steps = [i for i in history[before:] if isinstance(i, Step)]
            self.note(
                f"\n(interrupted: the conversation keeps this question and the {len(steps)} "
                "step(s) done so far)"
            )
            return
        except RunAborted as exc:
            result = exc.result
        except ModelAPIError as exc:
            self.note(
                f"error: {_describe_api_error(exc, self.endpoint, self.conversation.agent.model)}"
            )
            return
        if result.answer is not None:
            self.say(f"assistant> {result.answer}")
        else:
            self.note(
                f"(no answer: {stop_words(result)}{': ' + result.error if result.error else ''})"
            )
        if self.args.quiet:
            return
        u = result.usage
        self.note(
            f"   [{result.protocol} · {u.requests} LLM call(s) · {len(result.tool_calls)} tool "
            f"call(s) · {u.prompt_tokens}+{u.completion_tokens} tokens · {result.duration_s:.1f}s]"
        )
        shown = {notice.message for step in result.steps for notice in step.notices}
        for event in (notice.message for notice in result.notices):
            if event not in shown:  # the run's own events, which no step printed
                self.note(f"   ! {event}")


_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # an escape sequence a key sent (arrows: ESC [ A)
    r"|\x1b[@-_]"  # a two-character escape
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"  # any other control character (tab aside)
)


def clean_line(line: str) -> str:
    """A typed line without control characters or the escape sequences of keys (an arrow
    key without line editing, Ctrl-L), and without spaces around it."""
    return _CONTROL.sub("", line).strip()


def _history_hint() -> str:
    return (
        "$XDG_STATE_HOME/react-engine/chat_history, else ~/.local/state/react-engine/chat_history"
    )


def history_path() -> Path:
    """Where ``chat`` keeps the questions typed on a terminal (the XDG state directory)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "react-engine" / "chat_history"


@contextlib.contextmanager
def _line_editing(args: argparse.Namespace) -> Iterator[None]:
    """On a terminal, ``input()`` gets readline's line editing (arrows, Ctrl-A/E, Ctrl-R)
    and the history of earlier sessions; the history is saved when the chat ends. Off a
    terminal, or where Python has no ``readline`` (Windows), plain ``input()``."""
    if not (_isatty(sys.stdin) and _isatty(sys.stdout)):
        yield
        return
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        yield
        return
    path = None if args.no_history else Path(args.history) if args.history else history_path()
    if path is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
    readline.set_history_length(1000)
    try:
        yield
    finally:
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(path)
            except OSError as exc:
                print(
                    f"warning: cannot save the chat history to {path}: {exc.strerror or exc}",
                    file=sys.stderr,
                )


def _cmd_chat(args: argparse.Namespace) -> int:
    tools = _load_tools(args.tools)
    _check_trace(args.trace)
    with _endpoint(args, local_default=False) as ep:
        session = ChatSession(args, ep, tools)
        _warn_unused_options(args, session.conversation.agent)
        with _line_editing(args):
            return session.loop()


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
    chosen = [p for p in protocol_names()[1:] if p in protocols]
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
        written = write_outputs(report, Path(args.out), plot=not args.no_plot)
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
        if not args.no_plot and not any(p.suffix == ".png" for p in written):
            print(
                "warning: comparison.png skipped: matplotlib is not installed "
                "(pip install 'react-engine[plot]', or --no-plot to say you want none)",
                file=sys.stderr,
            )
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
    p.add_argument(
        "--protocol",
        choices=list(protocol_names()),
        default="auto",
        help="how the model calls tools: native function calling, text ReAct, structured "
        "JSON, or auto (what the model's registry entry says; default: auto)",
    )
    p.add_argument(
        "--template",
        help="text protocol only: its prompt template, classic, json, zh, or a .toml path",
    )
    p.add_argument(
        "--implicit-final-answer",
        action="store_true",
        help="text protocol only: take a reply with no labels as the final answer "
        "(default: an error)",
    )
    p.add_argument(
        "--tools",
        metavar="MODULE",
        help="the @tool functions the agent may call: a .py file (mytools.py, "
        "./dir/mytools.py) or a module importable from here (mytools, pkg.tools); "
        "default: the demo tools",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=6,
        metavar="N",
        help="rounds of tool calls before the model must answer (default: 6)",
    )
    p.add_argument(
        "--trace", metavar="FILE", help="append each run's trace to this JSON Lines file"
    )
    p.add_argument(
        "--temperature",
        type=float,
        help="sampling temperature (default: the server's; 0 for the embedded model)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="sampling seed, where the server takes one (default: none; 42 for the embedded model)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="longest reply per request, in tokens (default: the server's; 256 for the "
        "embedded model)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="the answer only: no steps, progress or summary on stderr (warnings and errors still)",
    )
    scripted = p.add_mutually_exclusive_group()
    scripted.add_argument(
        "--dry-run", action="store_true", help="no server: replay a canned weather transcript"
    )
    scripted.add_argument(
        "--scripted", metavar="FILE", help="no server: replay the replies in FILE (JSON)"
    )


_RUN_DESCRIPTION = """\
Answer one question with a ReAct agent, showing each step as it happens.

The answer alone goes to stdout; the steps, progress and the run's summary go to
stderr (-q leaves them out), so `react-engine run "..." > answer.txt` keeps just the
answer. On a terminal the model's text streams as it is written, a ticker shows how long
the model has been thinking, and network retries are shown as they wait.

Where the model is: --base-url and --model (or OPENAI_BASE_URL, OPENAI_API_KEY and
REACT_ENGINE_MODEL), --local for the embedded model, or --dry-run / --scripted FILE
for no server at all.
"""

_RUN_EXAMPLES = """\
examples:
  react-engine run "What is the weather in Paris?" --local
  react-engine run "What is 6*7?" --base-url http://127.0.0.1:8080/v1 --model qwen2.5-7b
  react-engine run -q "Weather in Tokyo?" --local > answer.txt
  echo "Weather in Oslo, in Fahrenheit?" | react-engine run - --local
  react-engine run "Weather in Rome?" --tools ./mytools.py --protocol text --local
  react-engine run "Weather in Paris?" --dry-run --json --trace run.jsonl

exit codes: 0 answered, 2 configuration, 3 no answer, 4 API error, 130 Ctrl-C
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="react-engine", description="ReAct agents over any OpenAI-compatible chat API."
    )
    parser.add_argument("--version", action="version", version=f"react-engine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="answer one question, showing each step",
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("question", help="the question; - reads it from stdin")
    _add_agent_options(run)
    run.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")

    chat = sub.add_parser(
        "chat",
        help="an interactive multi-turn conversation",
        description="A multi-turn conversation: type a question, or /help for the commands. "
        "Answers go to stdout, steps and progress to stderr. On a terminal, lines can be "
        "edited and earlier questions recalled (arrow keys); they are kept in a history file "
        f"({_history_hint()}).",
    )
    _add_agent_options(chat)
    chat.add_argument(
        "--history",
        metavar="FILE",
        help=f"the file that keeps the questions typed on a terminal (default: {_history_hint()})",
    )
    chat.add_argument(
        "--no-history", action="store_true", help="keep no history file for this session"
    )
    chat.add_argument(
        "--session",
        metavar="NAME",
        help="keep the conversation in this session of the store ($REACT_ENGINE_STORE)",
    )

    demo = sub.add_parser(
        "demo", help="the weather agent (embedded local model unless an endpoint is set)"
    )
    _add_agent_options(demo)
    demo.add_argument(
        "--question",
        default=DEMO_QUESTION,
        help=f"the question to ask (default: {DEMO_QUESTION!r})",
    )
    demo.set_defaults(max_steps=None)
    demo.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")

    compare = sub.add_parser(
        "compare", help="run the task suite under each protocol and compare them side by side"
    )
    _add_endpoint_options(compare, many_models=True)
    compare.add_argument(
        "--protocol",
        action="append",
        choices=list(protocol_names()[1:]),
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
        "--out",
        metavar="DIR",
        help="write comparison.json, .csv, .txt and .png here (the PNG needs matplotlib)",
    )
    compare.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    compare.add_argument(
        "--seed", type=int, default=42, help="sampling seed for every request (default: 42)"
    )
    compare.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature for every request (default: 0)",
    )
    compare.add_argument(
        "--tool-choice",
        choices=["auto", "required"],
        default="auto",
        help="'required': each run's first step must call a tool (then 'auto')",
    )
    compare.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        metavar="N",
        help="longest reply per request, in tokens (default: 256)",
    )
    compare.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")

    add_eval_parser(sub)
    add_probe_parser(sub)
    add_runs_parser(sub)
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
        if args.command == "probe":
            return run_probe_command(args)
        if args.command == "runs":
            return run_runs_command(args)
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
