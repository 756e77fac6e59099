"""Import time: what ``import react_engine`` costs beyond ``pydantic``.

Each round starts three fresh interpreters (subjects interleaved): one that loads
``pydantic`` as a library using it does (``BaseModel``, ``Field``, ``TypeAdapter``, its
types: the baseline every pydantic-based library pays), one that loads it and then
``react_engine``, and one that imports ``openai`` (what the library
no longer pays at import: the SDK is loaded when a client is built). Each interpreter
times its own imports with ``time.perf_counter``, so process start-up is left out.
Reported: medians over the rounds, and the library's own share against the 0.15 s target.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from .stats import median

__all__ = ["measure_imports"]

TARGET_S = 0.15

_BASE = (
    "import time; t = time.perf_counter(); "
    "from pydantic import BaseModel, Field, TypeAdapter, ValidationError, types; "
)
_SUBJECTS = {
    "pydantic": _BASE + "print(time.perf_counter() - t)",
    "react_engine": _BASE
    + "u = time.perf_counter(); import react_engine; "
    + "print(time.perf_counter() - u)",
    "openai": "import time; t = time.perf_counter(); import openai; "
    + "print(time.perf_counter() - t)",
}


def _time(code: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return float(out.strip().splitlines()[-1])


def measure_imports(*, quick: bool = False) -> dict[str, Any]:
    rounds = 3 if quick else 15
    times: dict[str, list[float]] = {name: [] for name in _SUBJECTS}
    for _ in range(rounds):
        for name, code in _SUBJECTS.items():
            times[name].append(_time(code))
    own = median(times["react_engine"])
    return {
        "rounds": rounds,
        "pydantic_s": median(times["pydantic"]),
        "react_engine_s": own,
        "openai_s": median(times["openai"]),
        "target_s": TARGET_S,
        "within_target": own <= TARGET_S,
    }
