"""``react-engine probe``: one tiny request to learn what an endpoint does with tools."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from dataclasses import asdict
from typing import Any

from ..errors import ConfigurationError
from ..transport.probe import PROBE_TIMEOUT, aprobe
from .endpoint import endpoint
from .options import add_endpoint_options

__all__ = ["add_probe_parser", "run_probe_command"]


def add_probe_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="send one tiny request: does the endpoint return native tool calls, honour stop?",
    )
    add_endpoint_options(p, retries=False)
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
    from ..transport.endpoint import connect
    from ..transport.learned import default_cache

    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigurationError(
            f"--timeout must be a positive number of seconds, not {args.timeout:g}"
        )
    with endpoint(args, alternatives=", or --local") as ep:
        chat_model = connect(ep.base_url, ep.api_key, asynchronous=True)
        result = asyncio.run(aprobe(chat_model, ep.model, timeout=args.timeout))
    cache = None if args.no_record or ep.local else default_cache()
    if cache is not None:
        cache.remember(result.base_url, result.model, **result.overrides())
    if args.json:
        payload = {
            "model": result.model,
            "base_url": result.base_url,
            "tools": result.tools,
            "native_calls": result.tools == "native",
            **asdict(result),  # the fields not named above, in their order
            "recorded": None if cache is None else result.overrides(),
            "cache": None if cache is None or cache.path is None else str(cache.path),
        }
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        print(result.summary())
        if cache is not None:
            where = f"in {cache.path}" if cache.path else "in memory only (the cache is off)"
            print(f"recorded:     {result.overrides()} {where}")
        elif ep.local:
            print("recorded:     nothing (the embedded server takes a new port at each start)")
    return 0
