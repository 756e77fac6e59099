"""How many objects the garbage collector tracks at once while some code runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def tracked_peak() -> Iterator[list[int]]:
    """The most objects the collector tracks at once beyond those alive before, sampled at
    each collection's start (a collection runs every 700 new objects): ``peak[0]`` once
    the block ends. The collector is on inside the block, as it was after it."""
    collecting = gc.isenabled()
    gc.enable()
    gc.collect()
    base = len(gc.get_objects())
    peak = [0]

    def sample(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            peak[0] = max(peak[0], len(gc.get_objects()) - base)

    gc.callbacks.append(sample)
    try:
        yield peak
    finally:
        gc.callbacks.remove(sample)
        if not collecting:
            gc.disable()
