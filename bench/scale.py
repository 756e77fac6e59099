"""Scale: 1,000 concurrent async runs in one process against the mock server.

Each subject runs in a fresh child process (``python -m bench.scale KEY N URL TRACED``),
so one subject's heap does not flatter or burden the next. The child warms up, resets
the kernel's peak-RSS mark (``/proc/self/clear_refs``), starts N runs at once with
``asyncio.gather`` over one client per 100 runs (see ``RUNS_PER_CLIENT``), twice
(``BATCHES``), and reports runs per second and client CPU per LLM call over both batches,
and the first batch's peak RSS above the pre-batch RSS divided by N. A smaller batch of
TRACED runs under ``tracemalloc`` (it slows Python down about twofold) gives the
Python-heap peak per run: allocations only, no allocator slack.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from .server import raise_fd_limit
from .subjects import Subject, is_expected, subjects
from .task import CALLS_PER_RUN

__all__ = ["measure_scale"]

ROOT = Path(__file__).resolve().parent.parent
RUNS_PER_CLIENT = 100
"""Runs sharing one client. httpcore's connection pool does O(pool size) work per request
(``_assign_requests_to_connections`` scans every connection and queued request), so one
client carrying 1,000 concurrent requests spends most of the client's CPU there, engine or
not (measured while building this bench: 24 ms of CPU per call at 600 concurrent runs on
one client, against 5 ms at 50). Ten clients of 100 keep the figures about the runs."""
BATCHES = 2
"""Batches of N runs per child, timed one after another: the first batch after the warm-up
sets off more collections than the ones after it (the heap is still settling), and one
batch's runs/s moves by tens of percent on a shared machine; speed is over both."""
SCALE_SUBJECTS = (
    "engine/function_calling",
    "bare-dict/function_calling",
    "engine/text",
    "bare/text",
)


def _status_kb(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


async def _batch(shards: list[Subject], n: int) -> int:
    runs = (shards[i % len(shards)].arun() for i in range(n))
    results = await asyncio.gather(*runs, return_exceptions=True)
    return sum(1 for r in results if not is_expected(r))


async def _child(key: str, n: int, base_url: str, traced: int) -> dict[str, Any]:
    sets = [subjects(base_url) for _ in range(-(-n // RUNS_PER_CLIENT))]
    shards = [next(s for s in subs if s.key == key) for subs in sets]
    for _ in range(5):
        await shards[0].arun()
    await _batch(shards, min(n, 20))  # open connections, warm every path
    gc.collect()
    out: dict[str, Any] = {"subject": key, "runs": n}
    rss0 = _status_kb("VmRSS")
    reset = _reset_peak_rss()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    out["failures"] = await _batch(shards, n)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    hwm = _status_kb("VmHWM")
    if reset and rss0 is not None and hwm is not None:
        out["rss_peak_kb_per_run"] = max(0, hwm - rss0) / n
    walls = [wall]
    for _ in range(BATCHES - 1):
        gc.collect()
        cpu1, wall1 = time.process_time(), time.perf_counter()
        out["failures"] += await _batch(shards, n)
        walls.append(time.perf_counter() - wall1)
        cpu += time.process_time() - cpu1
    out["runs_per_s_batches"] = [n / w for w in walls]
    out["runs_per_s"] = n * len(walls) / sum(walls)
    out["wall_s"] = sum(walls) / len(walls)
    out["cpu_us_per_call"] = cpu / (n * len(walls) * CALLS_PER_RUN) * 1e6
    if traced:
        gc.collect()
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out["failures"] += await _batch(shards[: -(-traced // RUNS_PER_CLIENT)], traced)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["heap_peak_kb_per_run"] = (peak - base) / 1024 / traced
        out["traced_runs"] = traced
    for subs in sets:
        await subs.aclose()
    out["clients"] = len(sets)
    return out


def _run_child(key: str, n: int, base_url: str, traced: int, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.scale", key, str(n), base_url, str(traced)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env, check=True
        )
        row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        row = {"subject": key, "runs": n, "error": f"{exc} {detail[-300:]}"}
    return row


def measure_scale(base_url: str, *, quick: bool = False) -> dict[str, Any]:
    """Two passes over the subjects, the second in reverse order (ABBA), so that a change
    of load during the section weighs on engine and baseline alike; speed is the mean of
    the two passes, memory comes from the first (the only one traced)."""
    n = 20 if quick else 1000
    traced = 5 if quick else 100
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    first = {key: _run_child(key, n, base_url, traced, env) for key in SCALE_SUBJECTS}
    if quick:  # one pass is enough to see that it works
        second = first
    else:
        second = {key: _run_child(key, n, base_url, 0, env) for key in reversed(SCALE_SUBJECTS)}
    rows = []
    for key in SCALE_SUBJECTS:
        a, b = first[key], second[key]
        row = dict(a)
        if "error" not in a and "error" not in b:
            row["runs_per_s_passes"] = [a["runs_per_s"], b["runs_per_s"]]
            row["runs_per_s"] = (a["runs_per_s"] + b["runs_per_s"]) / 2
            row["wall_s"] = (a["wall_s"] + b["wall_s"]) / 2
            row["cpu_us_per_call"] = (a["cpu_us_per_call"] + b["cpu_us_per_call"]) / 2
            row["failures"] = a["failures"] + b["failures"]
        elif "error" in b:
            row = dict(b)
        rows.append(row)
    return {"runs": n, "traced_runs": traced, "passes": 1 if quick else 2, "rows": rows}


def main(argv: list[str]) -> None:
    key, n, base_url = argv[0], int(argv[1]), argv[2]
    traced = int(argv[3]) if len(argv) > 3 else 0
    raise_fd_limit()
    print(json.dumps(asyncio.run(_child(key, n, base_url, traced))))


if __name__ == "__main__":
    main(sys.argv[1:])
