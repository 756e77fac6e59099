"""The ``react-engine`` command line: ``run``, ``demo`` (and more), as ``main(argv) -> int``.

Errors a user can cause (no endpoint, a bad key, an unknown model, an unreachable server, a
tools module that does not import) print one clear line and return a non-zero code.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .agent import Agent
from .errors import (
    ConfigurationError,
    ModelAPIError,
    ReactEngineError,
    RunAborted,
    UserError,
)
from .render import StepPrinter, format_result
from .tools import Tool
from .types import ModelSettings, RunResult, to_jsonable

__all__ = ["main"]

DEMO_QUESTION = "What's the weather like in Beijing and Guangzhou today?"


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str | None
    api_key: str | None
    model: str
    local: bool = False


def _configured_endpoint(args: argparse.Namespace) -> Endpoint | None:
    """The endpoint the user configured (flags, then environment), or None."""
    base_url = getattr(args, "base_url", None) or os.environ.get("OPENAI_BASE_URL")
    key_env = getattr(args, "api_key_env", None) or "OPENAI_API_KEY"
    api_key = os.environ.get(key_env)
    model = (
        getattr(args, "model", None)
        or os.environ.get("REACT_ENGINE_MODEL")
        or os.environ.get("OPENAI_MODEL")
    )
    if not (base_url or api_key):
        return None
    if not model:
        raise ConfigurationError(
            "an endpoint is configured but no model name: pass --model or set REACT_ENGINE_MODEL"
        )
    return Endpoint(base_url, api_key, model)


@contextlib.contextmanager
def _endpoint(args: argparse.Namespace, *, allow_local: bool) -> Iterator[Endpoint]:
    configured = None if getattr(args, "local", False) else _configured_endpoint(args)
    if configured is not None:
        yield configured
        return
    if not allow_local:
        raise ConfigurationError(
            "no endpoint: set OPENAI_BASE_URL / OPENAI_API_KEY and --model, or use --local"
        )
    from .local import local_server

    print(
        ">> No endpoint configured: starting the embedded SmolLM2-135M model on 127.0.0.1",
        file=sys.stderr,
        flush=True,
    )
    with local_server() as local:
        print(
            f">> local server ready at {local.base_url} (log: {local.log_path})",
            file=sys.stderr,
            flush=True,
        )
        yield Endpoint(local.base_url, local.api_key, local.model, local=True)


def _load_tools(spec: str | None) -> list[Tool]:
    if not spec:
        from .demo_tools import DEMO_TOOLS

        return list(DEMO_TOOLS)
    try:
        module = importlib.import_module(spec)
    except Exception as exc:  # any import failure is the user's to fix
        raise ConfigurationError(
            f"cannot import tools module {spec!r}: {type(exc).__name__}: {exc}"
        ) from None
    found = [v for v in vars(module).values() if isinstance(v, Tool)]
    if not found:
        raise ConfigurationError(f"module {spec!r} defines no @tool")
    return found


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model name (default: $REACT_ENGINE_MODEL / $OPENAI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    p.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key"
    )
    p.add_argument("--protocol", choices=["auto", "function_calling", "text"], default="auto")
    p.add_argument("--template", help="text template name (classic, json, zh) or a .toml path")
    p.add_argument(
        "--tools", help="a module whose @tool functions the agent may call (default: demo tools)"
    )
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--trace", help="append the run's trace to this JSON Lines file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--local",
        action="store_true",
        help="use the embedded local model even if an endpoint is set",
    )


def _print_result(result: RunResult, args: argparse.Namespace) -> None:
    if args.trace:
        result.write_trace(args.trace)
    if args.json:
        payload = {
            "answer": result.answer,
            "stop_reason": result.stop_reason,
            "protocol": result.protocol,
            "protocol_reason": result.protocol_reason,
            "usage": to_jsonable(result.usage),
            "steps": to_jsonable(result.steps),
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print(format_result(result, color=sys.stdout.isatty()))


def _run(args: argparse.Namespace, question: str) -> int:
    tools = _load_tools(args.tools)
    with _endpoint(args, allow_local=True) as ep:
        agent = Agent(
            ep.model,
            tools,
            protocol=args.protocol,
            base_url=ep.base_url,
            api_key=ep.api_key,
            template=args.template,
            max_steps=args.max_steps,
            on_step=None if args.json else StepPrinter(),
            settings=_settings(ep),
        )
        print(
            f">> model {ep.model} at {agent.base_url}; protocol: {agent.choose_protocol()[1]}",
            file=sys.stderr,
            flush=True,
        )
        try:
            result = agent.run(question)
        except RunAborted as exc:
            _print_result(exc.result, args)
            raise
        _print_result(result, args)
    return 0 if result.answer is not None else 3


def _settings(ep: Endpoint) -> ModelSettings:
    if ep.local:
        return ModelSettings(temperature=0.0, seed=42, max_tokens=256)
    return ModelSettings()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="react-engine", description="ReAct agents over any OpenAI-compatible API."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="answer one question with tools")
    run.add_argument("question")
    _add_run_options(run)
    demo = sub.add_parser(
        "demo", help="the weather agent (embedded local model unless an endpoint is set)"
    )
    _add_run_options(demo)
    demo.add_argument("--question", default=DEMO_QUESTION)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        if args.command in ("run", "demo"):
            question = args.question
            return _run(args, question)
        parser.error(f"unknown command {args.command}")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunAborted as exc:
        print(f"error: the run stopped: {exc}", file=sys.stderr)
        return 3
    except ModelAPIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    except ReactEngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
