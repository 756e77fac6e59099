"""Runs on a DBOS queue served by two worker processes: each of 20 queued runs runs
exactly once, at most two at a time (one per worker), and the model requests, each put
on a rate-limited queue of their own, never exceed N per second at the loopback server;
on a SQLite system database and on a real PostgreSQL."""

from __future__ import annotations

import bisect
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.parts import require_module

require_module("dbos", "the dbos extra", "pip install -e '.[dbos]'")

from dbos import DBOSClient  # noqa: E402

from integrations.dbos_support import effects, pg_uri, start, sysdb  # noqa: E402
from react_engine.testing import ScriptedServer, completion, tool_calls_completion  # noqa: E402

__all__ = ["pg_uri", "sysdb"]  # the fixtures

pytestmark = pytest.mark.slow  # worker processes

RUNS = 20
LIMIT = 4
"""Model requests per second at the server, at most (the fleet would make 7 or so)."""
PERIOD = 1.5
"""The limiter's window: a second, and a margin for the time a request takes from its
start (which DBOS's limiter counts) to the server, on a busy machine (docs/dbos.md)."""


class Clocked:
    """The loopback model: ``act(1)``, then the answer; it notes when each request came."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.times.append(time.monotonic())
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return tool_calls_completion(("act", {"n": 1}))
        return completion(results[0])


def busiest_second(times: list[float]) -> int:
    """The most requests that came within any one second."""
    times = sorted(times)
    return max(bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times))


def test_two_workers_run_twenty_queued_runs_once_each_within_the_rate_limit(
    tmp_path: Path, sysdb: str
) -> None:
    clock = Clocked()
    workers: list[subprocess.Popen[str]] = []
    client = DBOSClient(system_database_url=sysdb, application_name="react-engine-tests")
    try:
        with ScriptedServer(default=clock) as server:
            for executor in ("w1", "w2"):
                workers.append(
                    start(
                        sysdb,
                        server.base_url,
                        tmp_path,
                        "work",
                        executor,
                        "--limit",
                        str(LIMIT),
                        "--period",
                        str(PERIOD),
                    )
                )
            for proc in workers:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            handles = [
                client.enqueue(
                    {
                        "queue_name": "runs",
                        "workflow_name": "react_engine.test",
                        "workflow_id": f"q{i}",
                        "app_version": "1",
                    },
                    "go",
                    [],
                    {},
                    None,
                )
                for i in range(RUNS)
            ]
            results = [h.get_result() for h in handles]
            runs = client.list_workflows(queue_name="runs")
        assert [r.answer for r in results] == ["done 1"] * RUNS
        assert effects(tmp_path) == {f"q{i}:1": 1 for i in range(RUNS)}  # each run once
        assert len(clock.times) == 2 * RUNS  # each request once
        assert busiest_second(clock.times) <= LIMIT
        took = max(clock.times) - min(clock.times)
        assert took >= (2 * RUNS / LIMIT - 1) * PERIOD  # the limiter held the fleet back
        executors = Counter(w.executor_id for w in runs)
        assert set(executors) == {"w1", "w2"} and sum(executors.values()) == RUNS
    finally:
        client.destroy()
        for proc in workers:
            proc.kill()
            proc.communicate(timeout=30)
