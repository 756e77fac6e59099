"""Import time: what ``import react_engine`` costs beyond ``pydantic``.

Each round starts fresh interpreters (subjects interleaved): one that loads ``pydantic`` as
a library using it does (``BaseModel``, ``Field``, ``TypeAdapter``, its types: the
baseline every pydantic-based library pays), one that loads it and then ``react_engine``,
and one that imports ``openai`` (what the library no longer pays at import: the SDK is
loaded when a client is built). Each interpreter times its own imports with
``time.perf_counter``, so process start-up is left out.

Two settings, because compiling the sources is a large part of the figure:

- *bytecode cached*: what an installed package costs (pip writes the bytecode at install,
  and Python caches it on first import when it may). The interpreters keep their bytecode
  in a temporary ``PYTHONPYCACHEPREFIX``, written by one warm-up round not counted.
- *as run here*: the interpreters inherit this process's environment. Under
  ``PYTHONDONTWRITEBYTECODE=1`` with a checkout that has no ``__pycache__``, every import
  compiles the library's sources again (installed packages such as pydantic still read the
  bytecode pip wrote), which is slower than any installed use.

Reported: medians over the rounds, and the library's own share against the 0.15 s target
(bytecode cached; the other figure is reported beside it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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


def _time(code: str, env: dict[str, str] | None = None) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    return float(out.strip().splitlines()[-1])


def _cached_env(prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def measure_imports(*, quick: bool = False) -> dict[str, Any]:
    rounds = 3 if quick else 15
    times: dict[str, list[float]] = {name: [] for name in _SUBJECTS}
    as_run: list[float] = []
    with tempfile.TemporaryDirectory(prefix="react-engine-pycache-") as prefix:
        env = _cached_env(prefix)
        for code in _SUBJECTS.values():
            _time(code, env)  # warm-up: writes the bytecode
        for _ in range(rounds):
            for name, code in _SUBJECTS.items():
                times[name].append(_time(code, env))
            as_run.append(_time(_SUBJECTS["react_engine"]))
    own = median(times["react_engine"])
    return {
        "rounds": rounds,
        "pydantic_s": median(times["pydantic"]),
        "react_engine_s": own,
        "react_engine_as_run_s": median(as_run),
        "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        "openai_s": median(times["openai"]),
        "target_s": TARGET_S,
        "within_target": own <= TARGET_S,
        "as_run_within_target": median(as_run) <= TARGET_S,
    }
