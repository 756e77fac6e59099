"""``react-engine probe``: what an endpoint does with tools, learned once per endpoint.

Sends :mod:`react_engine.transport.probe`'s one tiny request, prints what came back, and records it
in the capability cache (``--no-record`` to only look), so that ``protocol="auto"`` picks
the text protocol for a server that ignores or rejects tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from typing import Any

from ..errors import ConfigurationError
from ..transport.probe import PROBE_TIMEOUT, aprobe
from .endpoint import required_endpoint
from .options import add_endpoint_options

__all__ = ["add_probe_parser", "run_probe_command"]


def add_probe_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="send one tiny request: does the endpoint return native tool calls, honour stop?",
    )
    add_endpoint_options(p, local=False, retries=False)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--no-record", action="store_true", help="do not write the result to the capability cache"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=PROBE_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on a server that does not answer within this (default: {PROBE_TIMEOUT:g})",
    )
    p.set_defaults(handler=run_probe_command)


def run_probe_command(args: argparse.Namespace) -> int:
    from ..transport.learned import default_cache
    from ..transport.openai_model import OpenAIChatModel

    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigurationError(
            f"--timeout must be a positive number of seconds, not {args.timeout:g}"
        )
    ep = required_endpoint(args, [args.model] if args.model else [])
    chat_model = OpenAIChatModel.connect(
        ep.base_url, ep.api_key or "sk-no-key-required", asynchronous=True
    )
    result = asyncio.run(aprobe(chat_model, ep.model, timeout=args.timeout))
    if not args.no_record:
        result.remember(default_cache())
    if args.json:
        payload = {
            "model": result.model,
            "base_url": result.base_url,
            "tools": result.tools,
            "native_calls": result.native_calls,
            "stop": result.stop,
            "constrained": result.constrained,
            "call_format": result.call_format,
            "requests": result.requests,
            "notes": result.notes,
            "recorded": None if args.no_record else result.overrides(),
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        print(result.summary())
        if not args.no_record:
            print(f"recorded:     {result.overrides()}")
    return 0
