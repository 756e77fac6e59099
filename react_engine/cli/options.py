"""The options commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..protocols.registry import protocol_names

__all__ = [
    "add_agent_options",
    "add_endpoint_options",
    "add_evaluation_options",
    "batch_options",
]


def add_endpoint_options(
    p: argparse.ArgumentParser, *, many_models: bool = False, retries: bool = True
) -> None:
    """Where the model is, the same for every command (read by :mod:`.endpoint`)."""
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
    if retries:
        p.add_argument(
            "--max-retries",
            type=int,
            default=3,
            metavar="N",
            help="network retries of transient failures per request (default: 3)",
        )


def add_agent_options(p: argparse.ArgumentParser) -> None:
    """The options of a command that runs one agent (run, chat, demo, runs resume)."""
    add_endpoint_options(p)
    p.add_argument(
        "--protocol",
        choices=list(protocol_names()),
        default="auto",
        help="how the model calls tools: native function calling, text ReAct, structured "
        "JSON, minimal CALL/ANSWER lines, or auto (what the model's registry entry says; "
        "default: auto)",
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


def add_evaluation_options(p: argparse.ArgumentParser, *, tool_choice_help: str) -> None:
    """What ``compare`` and ``eval bfcl`` share: the sampling and how the cases run."""
    p.add_argument(
        "--seed", type=int, default=42, help="sampling seed for every request (default: 42)"
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature for every request (default: 0)",
    )
    p.add_argument(
        "--tool-choice", choices=["auto", "required"], default="auto", help=tool_choice_help
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        metavar="N",
        help="longest reply per request, in tokens (default: 256)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="cases run at once, as concurrent async runs in this process (default: 1); "
        "the results are the same, in the same order",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the cases as tasks on the Ray cluster at ADDRESS (without one: a local "
        "cluster on 127.0.0.1 of --concurrency CPUs, 2 at most); the results are the same, "
        "in the same order; needs react-engine[ray]",
    )
    p.add_argument(
        "--results",
        metavar="FILE",
        help="append each case's record to FILE (JSON lines) as it finishes",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the evaluation in --results FILE: the cases recorded there are not "
        "run again",
    )


def batch_options(args: argparse.Namespace) -> dict[str, Any]:
    """How the cases run (:func:`add_evaluation_options`; ``run_cases`` checks them)."""
    results = Path(args.results) if args.results else None
    return dict(concurrency=args.concurrency, ray=args.ray, results=results, resume=args.resume)
