"""Cost checks that hold on a loaded machine: how the cost grows with the input, measured
in the same test, never against a fixed number of seconds.

A reader that is linear in its input takes about ``k`` times as long on an input ``k``
times as big; a quadratic one ``k * k`` times. :func:`growth` measures the ratio in CPU
time of this process (what the machine's other processes take does not count), the
best of a few tries, so a pause on one try does not decide it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def cpu_seconds(work: Callable[[], object], tries: int = 3) -> float:
    """The least CPU time ``work`` took over ``tries`` runs."""
    best = float("inf")
    for _ in range(tries):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def growth(small: Callable[[], object], large: Callable[[], object]) -> float:
    """How many times longer ``large`` takes than ``small`` (CPU time; the best of two tries
    of ``large``, of five of ``small``, which is short and so more easily disturbed)."""
    large_s = cpu_seconds(large, 2)
    small_s = cpu_seconds(small, 5)
    return large_s / max(small_s, 1e-3)


def assert_linear(make: Callable[[int], Callable[[], object]], size: int, factor: int = 8) -> None:
    """``make(n)`` is the work on an input of size ``n``: ``size`` costs at most ``3 *
    factor`` times ``size // factor`` (linear: ``factor``; quadratic: ``factor**2``)."""
    ratio = growth(make(size // factor), make(size))
    assert ratio < 3 * factor, f"{factor}x the input cost {ratio:.1f}x the time"
