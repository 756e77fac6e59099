"""``python -m bench [--quick] [--only NAME ...] [--out PATH] [--json PATH]``: run the benchmarks,
write the report.

``make bench`` runs it in full (a few minutes on two cores) and writes bench/results.md;
``--quick`` runs every section on small numbers (a smoke run: its figures are not worth
quoting); ``--only durable`` runs that section alone (repeatable). The exit status is 0
when every section ran, whatever the figures say.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .machine import machine_info
from .report import render

HERE = Path(__file__).resolve().parent
_ONLY: list[str] = []


SECTIONS = ("overhead", "scale", "durable", "parsing", "tokens", "streaming", "imports")


def _section(
    name: str, fn: Callable[[], dict[str, Any]], results: dict[str, Any], log: Callable[[str], None]
) -> None:
    if _ONLY and name not in _ONLY:
        return
    log(f"[bench] {name}...")
    started = time.perf_counter()
    try:
        results[name] = fn()
    except Exception as exc:  # one broken section must not hide the others
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    elapsed = time.perf_counter() - started
    results.setdefault("timings", {})[name] = elapsed
    log(f"[bench] {name}: {elapsed:.1f} s")


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run, small numbers")
    parser.add_argument("--out", type=Path, default=HERE / "results.md", help="the report")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures")
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        metavar="NAME",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )
    args = parser.parse_args(argv)
    _ONLY[:] = args.only or []

    from .durable import measure_durable
    from .imports import measure_imports
    from .overhead import measure_overhead
    from .parsing import measure_parsing
    from .scale import measure_scale
    from .server import ServerProcess, raise_fd_limit
    from .stall import measure_stall
    from .streaming import measure_streaming
    from .tokens import measure_tokens

    def log(line: str) -> None:
        print(line, flush=True)

    raise_fd_limit()
    started = time.perf_counter()
    command = "python -m bench" + (" --quick" if args.quick else "")
    command += "".join(f" --only {name}" for name in _ONLY)
    results: dict[str, Any] = {"quick": args.quick, "command": command}
    results["machine"] = machine_info()
    with ServerProcess() as base_url:
        _section("overhead", lambda: measure_overhead(base_url, quick=args.quick), results, log)
        _section("scale", lambda: measure_scale(base_url, quick=args.quick), results, log)
        _section("durable", lambda: measure_durable(base_url, quick=args.quick), results, log)
    _section("parsing", lambda: measure_parsing(quick=args.quick), results, log)
    _section("stall", lambda: measure_stall(quick=args.quick), results, log)
    _section("tokens", measure_tokens, results, log)
    _section("streaming", lambda: measure_streaming(quick=args.quick), results, log)
    _section("imports", lambda: measure_imports(quick=args.quick), results, log)
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - started

    args.out.write_text(render(results), encoding="utf-8")
    log(f"[bench] wrote {args.out} in {results['total_s']:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(_clean(results), indent=1, ensure_ascii=False) + "\n")
    errors = [k for k, v in results.items() if isinstance(v, dict) and "error" in v]
    if errors:
        log(f"[bench] sections that failed: {', '.join(errors)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
