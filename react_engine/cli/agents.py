"""What the commands that run one agent share: the tools, the agent, the result shown."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, ModelAPIError, RunAborted
from ..run.agent import Agent
from ..run.tracefile import TRACE_FAILED
from ..testing.tools import calculator, get_weather
from ..tools import Tool
from ..transport.learned import CapabilityCache
from ..transport.retries import RetryPolicy
from ..types import ModelSettings, RunResult, to_jsonable
from .endpoint import Endpoint, describe_api_error
from .exits import EXIT_API, EXIT_CONFIG, EXIT_NO_ANSWER, Exit, one_line
from .render import RunProgress, format_result, use_color

__all__ = [
    "DEMO_TOOLS",
    "answer",
    "check_trace",
    "describe_protocol",
    "load_tools",
    "make_agent",
    "sampling_settings",
    "show_result",
    "warn_unused_options",
]


DEMO_TOOLS: list[Tool] = [get_weather, calculator]
"""The tools the demo, ``run`` and ``chat`` offer when no ``--tools`` module is named."""


def load_tools(spec: str | None) -> list[Tool]:
    """The ``@tool`` functions of ``--tools``: a ``.py`` file, or a module importable from here."""
    if not spec:
        return list(DEMO_TOOLS)
    path = Path(spec) if spec.endswith(".py") or os.sep in spec or "/" in spec else None
    if path is not None and not path.is_file():
        raise ConfigurationError(f"--tools {spec}: no such file")
    try:
        if path is None and os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # what `python -m` does; the console script does not
        module = importlib.import_module(spec) if path is None else _import_file(path.resolve())
    except ConfigurationError:
        raise
    except Exception as exc:  # any import failure is the user's to fix
        if isinstance(exc, ModuleNotFoundError) and exc.name == spec.partition(".")[0]:
            raise ConfigurationError(
                f"--tools {spec}: no module {exc.name!r} in {os.getcwd()} or on the Python "
                "path; name a file to load it from elsewhere (--tools ./dir/mytools.py)"
            ) from None
        raise ConfigurationError(
            f"cannot import tools module {spec!r}: {type(exc).__name__}: {one_line(str(exc))}"
        ) from None
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise ConfigurationError(f"module {spec!r} defines no @tool")
    return found


def _import_file(path: Path) -> Any:
    """Import a ``.py`` file as a module, its folder on ``sys.path`` (as ``python FILE``)."""
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


def sampling_settings(args: argparse.Namespace, ep: Endpoint) -> ModelSettings:
    """Sampling settings: the flags, with repeatable defaults for the local model."""
    local = ep.local
    return ModelSettings(
        temperature=args.temperature if args.temperature is not None else (0.0 if local else None),
        seed=args.seed if args.seed is not None else (42 if local else None),
        max_tokens=args.max_tokens if args.max_tokens is not None else (256 if local else None),
    )


def make_agent(
    args: argparse.Namespace,
    ep: Endpoint,
    tools: Sequence[Tool],
    protocol: str,
    progress: RunProgress | None,
    **options: Any,
) -> Agent:
    """The agent a command runs: the endpoint, the flags, and ``options`` over them; each
    step, call and retry shown by ``progress``."""
    if ep.replies is not None:
        ep.replies.protocol = protocol
    on_retry = None if progress is None else progress.on_retry
    shown = {} if progress is None else {"on_step": progress.on_step, "on_call": progress.on_call}
    chosen: dict[str, Any] = {
        "max_steps": args.max_steps,
        "settings": sampling_settings(args, ep),
        "retry": RetryPolicy(max_attempts=args.max_retries + 1, on_retry=on_retry),
        **shown,
        **options,
    }
    if ep.local:  # the engine started this server on a new port: nothing to learn for later
        chosen = {"probe": False, "capability_cache": CapabilityCache(), **chosen}
    return Agent(
        ep.model,
        tools,
        protocol=protocol,
        client=ep.client,
        base_url=ep.base_url,
        api_key=ep.api_key,
        template=args.template,
        implicit_final_answer=args.implicit_final_answer,
        **chosen,
    )


def describe_protocol(agent: Agent) -> str:
    protocol, reason, _ = agent.choose_protocol()
    return f"{protocol.name} ({reason})"


def check_trace(path: str | None) -> None:
    """Fail before the run, not after it, when the trace file cannot be written."""
    if not path:
        return
    try:
        open(path, "a", encoding="utf-8").close()
    except OSError as exc:
        raise ConfigurationError(
            f"--trace {path}: cannot write it: {exc.strerror or exc}"
        ) from None


def show_result(result: RunResult, args: argparse.Namespace) -> None:
    """The answer alone on stdout (or JSON); the rest on stderr, unless ``--quiet``."""
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
        summary = format_result(result, color=use_color(sys.stderr))
        print(summary, file=sys.stderr, flush=True)
    if result.answer is not None:
        print(result.answer, flush=True)


def warn_unused_options(args: argparse.Namespace, agent: Agent) -> None:
    """Say on stderr which options the chosen protocol does not read."""
    protocol, _, _ = agent.choose_protocol()
    if protocol.name == "text":
        return
    maybe = " unless the run falls back to text" if args.protocol == "auto" else ""
    for flag, given in (
        ("--template", args.template),
        ("--implicit-final-answer", args.implicit_final_answer),
    ):
        if given:
            print(
                f"warning: {flag} does nothing under the {protocol.name} protocol{maybe}: "
                "only the text protocol reads it",
                file=sys.stderr,
            )


def answer(
    args: argparse.Namespace,
    ep: Endpoint,
    agent: Agent,
    progress: RunProgress,
    question: str,
    **options: Any,
) -> RunResult:
    """Run ``agent`` on ``question``; print the result, or raise the error as an :class:`Exit`."""
    try:
        result = progress.run(agent, question, trace=args.trace or None, **options)
    except RunAborted as exc:
        show_result(exc.result, args)
        raise Exit(
            f"the run stopped without an answer: {one_line(str(exc))}", EXIT_NO_ANSWER
        ) from None
    except ModelAPIError as exc:
        raise Exit(describe_api_error(exc, ep, agent.model), EXIT_API) from None
    show_result(result, args)
    failed = next((n.message for n in result.notices if n.message.startswith(TRACE_FAILED)), None)
    if failed is not None:  # the answer is out; the exit code says the trace is not whole
        raise Exit(failed, EXIT_CONFIG)
    return result
