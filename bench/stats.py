"""Small statistics and timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["best_time", "median", "per_call_us", "quantile"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile, ``q`` in [0, 1]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))])


def best_time(fn: Callable[[], Any], *, budget_s: float = 0.02, repeat: int = 5) -> float:
    """Seconds per call of ``fn``: the best of ``repeat`` timings of a loop sized to
    take about ``budget_s`` (timeit's method; the minimum is the least noisy estimate on
    a busy machine)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    loops = max(1, min(100_000, int(budget_s / once)))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - start) / loops)
    return best


def per_call_us(seconds: float, calls: int) -> float:
    return seconds / max(calls, 1) * 1e6
