"""Parser and JSON-repair speed, each beside ``json.loads`` on valid JSON of the same size.

* The golden corpora (``fixtures/parser/*.txt`` and ``fixtures/json_repair/*.txt``, read
  when the bench runs): per file, the best-of-5 time of one call, then the median over the
  corpus of the times and of the per-file ratios to ``json.loads`` on a valid JSON
  document of the same length.
* The repair's fast path: ``repair_json`` on valid JSON against ``json.loads`` on the same
  text, at a few sizes.
* Adversarial replies of 1 MB, parsed in a child process with a time limit, so a
  super-linear case shows up as a figure instead of hanging the bench.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from react_engine.errors import JSONRepairError, ReActParseError
from react_engine.parsing import parse_react, repair_json

from .stats import best_time, median, quantile

__all__ = ["ADVERSARIAL", "measure_parsing", "valid_json_of_size"]

ROOT = Path(__file__).resolve().parent.parent
PARSER_FIXTURES = ROOT / "fixtures" / "parser"
REPAIR_FIXTURES = ROOT / "fixtures" / "json_repair"
MB = 1_000_000
_FILLER = "the weather in Beijing is sunny and warm today "


def valid_json_of_size(n: int) -> str:
    """A realistic valid JSON document (an action blob) of exactly ``n`` characters."""
    base: dict[str, Any] = {
        "thought": "",
        "action": "get_weather",
        "action_input": {"location": "Beijing", "unit": "celsius"},
    }
    empty = json.dumps(base)
    if n <= len(empty):
        return '"' + "x" * max(0, n - 2) + '"' if n >= 2 else "0"
    pad = n - len(empty)
    base["thought"] = (_FILLER * (pad // len(_FILLER) + 1))[:pad]
    text = json.dumps(base)
    assert len(text) == n
    return text


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _parse_call(path: Path) -> Callable[[], Any]:
    text = _read(path)
    args_path = path.with_suffix(".args.json")
    kwargs = json.loads(args_path.read_text("utf-8")) if args_path.exists() else {}

    def call() -> Any:
        try:
            return parse_react(text, **kwargs)
        except ReActParseError:
            return None

    return call


def _repair_call(text: str) -> Callable[[], Any]:
    def call() -> Any:
        try:
            return repair_json(text)
        except JSONRepairError:
            return None

    return call


def _corpus(
    paths: list[Path], make: Callable[[Path], Callable[[], Any]], budget: float
) -> dict[str, Any]:
    times, ratios, sizes = [], [], []
    worst = ("", 0.0)
    for path in paths:
        text = _read(path)
        valid = valid_json_of_size(len(text))
        t = best_time(make(path), budget_s=budget)
        base = best_time(lambda valid=valid: json.loads(valid), budget_s=budget)
        times.append(t * 1e6)
        ratios.append(t / base)
        sizes.append(len(text))
        if t * 1e6 > worst[1]:
            worst = (path.stem, t * 1e6)
    return {
        "files": len(paths),
        "median_chars": median(sizes),
        "max_chars": max(sizes) if sizes else 0,
        "median_us": median(times),
        "p90_us": quantile(times, 0.9),
        "max_us": worst[1],
        "max_case": worst[0],
        "json_loads_median_us": median(
            [t / r for t, r in zip(times, ratios, strict=True)] if times else []
        ),
        "median_ratio": median(ratios),
        "p90_ratio": quantile(ratios, 0.9),
    }


def _fast_path(sizes: tuple[int, ...], budget: float) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        text = valid_json_of_size(n)
        repair_json(text)  # warm
        ratios = []
        loads_t = repair_t = 0.0
        for _ in range(3):  # alternate, keep the median ratio
            loads_t = best_time(lambda text=text: json.loads(text), budget_s=budget)
            repair_t = best_time(lambda text=text: repair_json(text), budget_s=budget)
            ratios.append(repair_t / loads_t)
        out.append(
            {
                "chars": n,
                "json_loads_us": loads_t * 1e6,
                "repair_json_us": repair_t * 1e6,
                "ratio": median(ratios),
            }
        )
    return out


# --- adversarial replies ---------------------------------------------------------------------

ADVERSARIAL: dict[str, tuple[str, Callable[[int], str]]] = {
    "long_thought": (
        "one Thought of 1 MB, no action",
        lambda n: "Thought: " + ("a" * (n - 9)),
    ),
    "open_braces": (
        "Action Input of 1 MB of '{'",
        lambda n: "Thought: t\nAction: get_weather\nAction Input: " + "{" * (n - 48),
    ),
    "many_labels": (
        "100,000 'Action: x' lines",
        lambda n: "Thought: t\n" + "Action: get_weather\n" * ((n - 11) // 20),
    ),
    "many_fences": (
        "1 MB of code fences",
        lambda n: "Thought: t\nAction:\n" + "```\n" * ((n - 20) // 4),
    ),
    "many_observations": (
        "an Observation line repeated to 1 MB",
        lambda n: "Thought: t\n" + "Observation: x\n" * ((n - 11) // 15),
    ),
    "unclosed_string_blob": (
        "a JSON blob whose string never closes",
        lambda n: (
            'Action:\n```json\n{"action": "get_weather", "action_input": {"location": "'
            + "b" * (n - 75)
        ),
    ),
    "backslashes_and_quotes": (
        "1 MB of backslashes and quotes in an Action Input",
        lambda n: "Action: get_weather\nAction Input: {" + '\\"' * ((n - 35) // 2),
    ),
    "valid_huge_input": (
        "a valid Action Input with a 1 MB string",
        lambda n: (
            'Thought: t\nAction: get_weather\nAction Input: {"location": "' + "c" * (n - 64) + '"}'
        ),
    ),
    "repair_json_1mb_broken": (
        "repair_json on 1 MB of broken JSON",
        lambda n: "{'a': [1, 2," * (n // 12),
    ),
}


def _adversarial_child(names: list[str]) -> None:
    """Child process: build each 1 MB case, time one call, print one JSON line per case."""
    for name in names:
        _, build = ADVERSARIAL[name]
        text = build(MB)
        start = time.perf_counter()
        if name.startswith("repair_json"):
            with contextlib.suppress(JSONRepairError):
                repair_json(text)
        else:
            with contextlib.suppress(ReActParseError):
                parse_react(text)
        seconds = time.perf_counter() - start
        print(json.dumps({"case": name, "seconds": seconds, "chars": len(text)}), flush=True)


def _adversarial(timeout: float, names: list[str]) -> list[dict[str, Any]]:
    """All cases in one child process, with one time limit for all of them: a case that
    does not finish shows as timed out, and the ones after it as not run."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    timed_out = False
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.parsing", *names],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env=env,
        )
        stdout = proc.stdout
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        stdout = raw.decode() if isinstance(raw, bytes) else raw
        timed_out = True
    done: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            done[row["case"]] = row
    out = []
    first_missing = True
    for name in names:
        row = {"case": name, "what": ADVERSARIAL[name][0]}
        if name in done:
            row.update(done[name])
        elif timed_out and first_missing:
            row.update({"seconds": None, "timeout": timeout})
            first_missing = False
        else:
            row.update({"seconds": None, "error": "not run" if timed_out else "crashed"})
        out.append(row)
    return out


def measure_parsing(*, quick: bool = False) -> dict[str, Any]:
    parser_paths = sorted(PARSER_FIXTURES.glob("*.txt"))
    repair_paths = sorted(REPAIR_FIXTURES.glob("*.txt"))
    budget = 0.0005 if quick else 0.002
    if quick:
        parser_paths = parser_paths[::20]
        repair_paths = repair_paths[::20]
    valid_repairs = []
    broken_repairs = []
    for p in repair_paths:
        try:
            json.loads(_read(p))
            valid_repairs.append(p)
        except (ValueError, RecursionError):
            broken_repairs.append(p)
    return {
        "parser": _corpus(parser_paths, _parse_call, budget),
        "repair_broken": _corpus(broken_repairs, lambda p: _repair_call(_read(p)), budget),
        "repair_valid_fixtures": len(valid_repairs),
        "fast_path": _fast_path(
            (64, 1_000) if quick else (64, 256, 1_000, 16_000, 256_000), budget
        ),
        "adversarial": _adversarial(
            timeout=60 if quick else 180,
            names=list(ADVERSARIAL)[:2] if quick else list(ADVERSARIAL),
        ),
    }


if __name__ == "__main__":
    _adversarial_child(sys.argv[1:])
