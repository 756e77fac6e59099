"""What the DBOS tests share: the system database on each backend, the worker processes
(tests/support/dbos_worker.py) and the loopback model that calls ``act(1..3)``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import postgres

WORKER = Path(__file__).parents[1] / "support" / "dbos_worker.py"
pg_uri = postgres.pg_uri


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def sysdb(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """DBOS's system database: a SQLite file, or a fresh database on a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dbos.db'}"
    return postgres.fresh_database(request.getfixturevalue("pg_uri"))


def three_calls(body: dict[str, Any]) -> dict[str, Any]:
    from react_engine.testing import completion, tool_calls_completion

    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if len(results) < 3:
        return tool_calls_completion(("act", {"n": len(results) + 1}))
    return completion("; ".join(results))


def three_written_calls(body: dict[str, Any]) -> dict[str, Any]:
    """:func:`three_calls` in the text protocol: the calls written as text, their ids made
    up by the engine."""
    from react_engine.testing import completion

    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if done < 3:
        return completion(
            f'Thought: step {done + 1}\nAction: act\nAction Input: {{"n": {done + 1}}}'
        )
    return completion(f"Final Answer: {done} calls made")


def start(sysdb: str, url: str, tmp: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), sysdb, url, str(tmp / "effects"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any] | None]:
    """The worker's exit code and its result (None when it was killed)."""
    out, err = proc.communicate(timeout=120)
    if proc.returncode not in (0, -9):
        raise AssertionError(err)
    return proc.returncode, json.loads(out) if proc.returncode == 0 else None


def effects(tmp: Path) -> Counter[str]:
    path = tmp / "effects"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def without_ids(transcript: dict[str, Any]) -> dict[str, Any]:
    """The transcript with its call ids left out (the loopback server numbers them)."""
    steps = [{**s, "actions": [a[1:] for a in s["actions"]]} for s in transcript["steps"]]
    return {**transcript, "steps": steps}
