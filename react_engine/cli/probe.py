"""``react-engine probe``: what an endpoint does with tools, learned once per endpoint.

Sends :mod:`react_engine.transport.probe`'s one tiny request, prints what came back, and records it
in the capability cache (``--no-record`` to only look), so that ``protocol="auto"`` picks
the text protocol for a server that ignores or rejects tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

__all__ = ["add_probe_parser", "run_probe_command"]


def add_probe_parser(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="send one tiny request: does the endpoint return native tool calls, honour stop?",
    )
    p.add_argument("--model", help="model name (default: $REACT_ENGINE_MODEL / $OPENAI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the API key (default: OPENAI_API_KEY)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--no-record", action="store_true", help="do not write the result to the capability cache"
    )


def run_probe_command(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError
    from ..transport.learned import default_cache
    from ..transport.openai_model import OpenAIChatModel
    from ..transport.probe import aprobe

    model = args.model or os.environ.get("REACT_ENGINE_MODEL") or os.environ.get("OPENAI_MODEL")
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    env = args.api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(env)
    if args.api_key_env and not key:
        raise ConfigurationError(f"--api-key-env {env}: the environment variable is not set")
    if not model:
        raise ConfigurationError("no model name: pass --model or set REACT_ENGINE_MODEL")
    if not base_url and not key:
        raise ConfigurationError("no endpoint: pass --base-url or set OPENAI_BASE_URL")
    chat_model = OpenAIChatModel.connect(base_url, key or "sk-no-key-required", asynchronous=True)
    result = asyncio.run(aprobe(chat_model, model))
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
