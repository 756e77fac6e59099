"""Garbage collections per batch of concurrent async runs: the deterministic side of scale.

``python -m bench.gccount [N] [BATCHES] [SUBJECT...]`` starts the mock server
(:class:`bench.server.ServerProcess`) and, for each subject, a child process that sets
up as :mod:`bench.scale` does, then runs BATCHES batches of N concurrent runs with a
``gc.callbacks`` hook counting the collections of each generation and the time they
take. The counts repeat to the unit from one batch to the next (they depend on what is
allocated and freed, in which order, not on the clock), so they are the measure to drive
when the runs/s figure moves by ±30% with the machine's load.

Two controls besides the scale subjects: ``bare-thread/text`` and
``bare-dict-thread/function_calling``, the bare loops with their tool run by
``asyncio.to_thread`` (as the engine runs a sync tool, off the event loop) instead of
inline. ``python -m bench.gccount --segments KEY [N]`` gives, instead, the net change of
live container objects in each step of a run's task (from one suspension to the next),
by where the task resumed and where it suspended: the counter of generation 0 is
allocations minus deallocations, clamped at zero, so steps whose net changes are large and
of one sign, run back to back by the event loop, are what sets collections off (see
docs/performance.md, "what a run holds across an await").
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import baselines
from .scale import RUNS_PER_CLIENT, SCALE_SUBJECTS
from .server import ServerProcess, raise_fd_limit
from .subjects import QUESTION, Subject, is_expected, subjects
from .task import CALLS_PER_RUN

__all__ = ["CONTROLS", "count_collections"]

CONTROLS = ("bare-dict-thread/function_calling", "bare-thread/text")

ROOT = Path(__file__).resolve().parent.parent


class _Counter:
    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.time = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.time += time.perf_counter() - self._start


async def _batch(shards: list[Subject], n: int) -> int:
    runs = (shards[i % len(shards)].arun() for i in range(n))
    results = await asyncio.gather(*runs, return_exceptions=True)
    return sum(1 for r in results if not is_expected(r))


def _shards(key: str, n: int, base_url: str) -> tuple[list[Any], list[Subject]]:
    sets = [subjects(base_url) for _ in range(-(-n // RUNS_PER_CLIENT))]
    if key not in CONTROLS:
        return sets, [next(s for s in subs if s.key == key) for subs in sets]
    name, protocol = key.split("/")
    run = (
        functools.partial(baselines.abare_fc, as_dict=True, off_loop=True)
        if protocol == "function_calling"
        else functools.partial(baselines.abare_text, off_loop=True)
    )
    return sets, [
        Subject(name, protocol, functools.partial(run, subs.async_client, QUESTION), lambda: None)
        for subs in sets
    ]


async def _child(key: str, n: int, batches: int, base_url: str) -> dict[str, Any]:
    sets, shards = _shards(key, n, base_url)
    for _ in range(5):
        await shards[0].arun()
    await _batch(shards, min(n, 20))
    rows = []
    for _ in range(batches):
        gc.collect()
        counter = _Counter()
        gc.callbacks.append(counter)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        failures = await _batch(shards, n)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        gc.callbacks.remove(counter)
        calls = n * CALLS_PER_RUN
        rows.append(
            {
                "collections": counter.counts,
                "gc_us_per_call": counter.time / calls * 1e6,
                "cpu_us_per_call": cpu / calls * 1e6,
                "runs_per_s": n / wall,
                "failures": failures,
            }
        )
    for subs in sets:
        await subs.aclose()
    return {"subject": key, "runs": n, "batches": rows}


def _suspended_at(task: asyncio.Task[Any]) -> str:
    """The innermost frame of the library or the bench where ``task`` waits."""
    coro: Any = task.get_coro()
    last = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        name = frame.f_code.co_filename
        if "react_engine" in name or "bench" in name:
            last = f"{frame.f_code.co_name}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return last


async def _segments(key: str, n: int, base_url: str) -> list[tuple[str, str, int, int]]:
    """(resumed at, suspended at, steps, net containers) for every kind of task step."""
    import asyncio.events

    sets, shards = _shards(key, n, base_url)
    for _ in range(5):
        await shards[0].arun()
    await _batch(shards, min(n, 20))
    stats: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    where: dict[asyncio.Task[Any], str] = {}
    run = asyncio.events.Handle._run

    def counted(handle: asyncio.Handle) -> None:
        task = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
        if not isinstance(task, asyncio.Task):
            return run(handle)
        before = gc.get_count()[0]
        run(handle)
        after = "done" if task.done() else _suspended_at(task)
        row = stats[(where.get(task, "start"), after)]
        row[0] += 1
        row[1] += gc.get_count()[0] - before
        where[task] = after
        return None

    gc.collect()
    gc.disable()
    floor = [[] for _ in range(1_000_000)]  # the counter never reaches its floor of zero
    asyncio.events.Handle._run = counted  # type: ignore[method-assign]
    try:
        await _batch(shards, n)
    finally:
        asyncio.events.Handle._run = run  # type: ignore[method-assign]
        del floor
        gc.enable()
    for subs in sets:
        await subs.aclose()
    return [(a, b, steps, net) for (a, b), (steps, net) in stats.items()]


def _run_child(key: str, n: int, batches: int, base_url: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "bench.gccount", "--child", key, str(n), str(batches), base_url]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=True
    )
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def count_collections(
    base_url: str, n: int = 1000, batches: int = 2, keys: tuple[str, ...] = SCALE_SUBJECTS
) -> list[dict[str, Any]]:
    """One child process per subject, ``batches`` batches of ``n`` runs each."""
    return [_run_child(key, n, batches, base_url) for key in keys]


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--segments":
        key, n = argv[1], int(argv[2]) if len(argv) > 2 else 1000
        raise_fd_limit()
        with ServerProcess() as base_url:
            rows = asyncio.run(_segments(key, n, base_url))
        for a, b, steps, net in sorted(rows, key=lambda r: -abs(r[3])):
            if steps >= n // 2:
                print(f"{steps / n:5.2f} per run  {net / steps:+7.1f} each  {a} -> {b}")
        return
    if argv and argv[0] == "--child":
        key, n, batches, base_url = argv[1], int(argv[2]), int(argv[3]), argv[4]
        raise_fd_limit()
        print(json.dumps(asyncio.run(_child(key, n, batches, base_url))))
        return
    n = int(argv[0]) if argv else 1000
    batches = int(argv[1]) if len(argv) > 1 else 2
    keys = tuple(argv[2:]) or SCALE_SUBJECTS
    with ServerProcess() as base_url:
        for row in count_collections(base_url, n, batches, keys):
            for b in row["batches"]:
                g0, g1, g2 = b["collections"]
                print(
                    f"{row['subject']:28} {g0:5} /{g1:4} /{g2:3}  "
                    f"gc {b['gc_us_per_call']:6.0f} µs/call  cpu {b['cpu_us_per_call']:6.0f} "
                    f"µs/call  {b['runs_per_s']:6.1f} runs/s  fail {b['failures']}",
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv[1:])
