"""``react-engine compare`` at scale: ``--concurrency``, ``--ray``, ``--results`` and
``--resume``, through the harness runner that ``eval bfcl`` uses
(react_engine/harness/runner.py).

The promise under test: however the runs go, the report holds the sequential run's
records in the sequential order, and a resumed comparison runs only what is missing."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from support.parts import DEV_HINT, require_module

from react_engine.cli import main
from react_engine.compare import run as compare_run
from react_engine.compare.run import Target, TaskRun, format_report, run_comparison
from react_engine.compare.suite import load_tasks


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


TARGETS = [
    Target("scripted", "function_calling", scripted=True),
    Target("scripted", "text", scripted=True),
]


def _record(run: TaskRun) -> dict[str, Any]:
    """A run without what varies from one run to the next (wall times, call ids)."""
    return {
        "task": run.task,
        "protocol": run.protocol,
        "success": run.success,
        "failures": run.failures,
        "answer": run.answer,
        "stop_reason": run.stop_reason,
        "metrics": {k: v for k, v in asdict(run.metrics).items() if k != "wall_s"},
        "repairs": run.repairs,
        "unused_replies": run.unused_replies,
    }


def _table(text: str) -> str:
    """The table without the wall times (``0.01`` in the time column and the ratio)."""
    return re.sub(r"\d+\.\d\d\b", "t", re.sub(r"wall time ×\S+", "wall time", text))


class _Counting:
    """Wraps ``arun_task``: counts the runs, the most at once, and makes later runs finish
    first (so an order that followed the finishing would show)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, total: int) -> None:
        self.inner = compare_run.arun_task
        self.total = total
        self.running = self.peak = 0
        self.ran: list[str] = []
        self.started = 0
        monkeypatch.setattr(compare_run, "arun_task", self)

    async def __call__(self, *args: Any) -> TaskRun:
        self.started += 1
        wait = 0.002 * (self.total - self.started)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(wait)
            run: TaskRun = await self.inner(*args)
        finally:
            self.running -= 1
        self.ran.append(f"{run.task}/{run.protocol}")
        return run


def test_concurrent_runs_give_the_sequential_report_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = load_tasks()
    sequential = run_comparison(tasks, TARGETS, source="scripted")
    counting = _Counting(monkeypatch, len(tasks) * len(TARGETS))
    concurrent = run_comparison(tasks, TARGETS, source="scripted", concurrency=4)
    assert counting.peak == 4  # four at once, never more
    assert counting.ran != [
        f"{r.task}/{r.protocol}" for r in concurrent.runs
    ]  # finished out of order
    assert [_record(r) for r in concurrent.runs] == [_record(r) for r in sequential.runs]
    assert [(r.task, r.protocol) for r in concurrent.runs] == [
        (t.id, g.protocol) for t in tasks for g in TARGETS
    ]
    assert _table(format_report(concurrent)) == _table(format_report(sequential))


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", "--scripted", "--quiet", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_runs_concurrently_and_prints_the_same_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, table, err = _compare(capsys)
    assert code == 0, err
    code8, table8, err8 = _compare(capsys, "--concurrency", "8")
    assert code8 == 0, err8
    assert "TOTAL" in table8
    assert _table(table8) == _table(table)


def test_a_killed_comparison_resumes_where_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "runs.jsonl"
    code, table, err = _compare(capsys, "--results", str(results), "--concurrency", "3")
    assert code == 0, err
    lines = results.read_text().splitlines()
    assert set(json.loads(lines[0])) == {"meta"}
    records = [json.loads(line) for line in lines[1:]]
    total = len(records)
    assert total == len(load_tasks()) * 2
    assert {(r["model"], r["protocol"], r["case"]) for r in records} == {
        ("scripted", p, t.id) for t in load_tasks() for p in ("function_calling", "text")
    }
    # Killed after five runs, in the middle of writing the sixth.
    results.write_text("\n".join(lines[:6]) + "\n" + lines[6][:40])
    counting = _Counting(monkeypatch, total)
    code, resumed, err = _compare(capsys, "--results", str(results), "--resume")
    assert code == 0, err
    assert counting.started == total - 5  # only what was missing ran again
    assert _table(resumed) == _table(table)
    again = [json.loads(line) for line in results.read_text().splitlines()[1:]]
    key = lambda r: (r["protocol"], r["case"])  # noqa: E731
    assert sorted(map(key, again)) == sorted(map(key, records))
    for before in records:
        after = next(r for r in again if key(r) == key(before))
        assert after["result"]["metrics"]["llm_calls"] == before["result"]["metrics"]["llm_calls"]
        assert after["result"]["answer"] == before["result"]["answer"]


def test_a_finished_results_file_is_refused_without_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "runs.jsonl"
    args = ["--task", "no_tool_capital", "--results", str(results)]
    assert _compare(capsys, *args)[0] == 0
    code, _, err = _compare(capsys, *args)
    assert code == 2 and "already holds results" in err
    code, _, err = _compare(capsys, *args, "--resume", "--seed", "7")
    assert code == 2 and "other settings" in err  # another comparison's file


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--resume"], "--resume continues the evaluation in --results FILE"),
    ],
)
def test_the_batch_options_are_checked_before_anything_runs(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _compare(capsys, *args)
    assert code == 2 and message in err and out == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_with_its_eta_is_drawn_on_a_terminal_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = load_tasks(only=["no_tool_capital", "weather_single"])
    screen = _Terminal()
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", screen)
        run_comparison(tasks, TARGETS, source="scripted", quiet=False)
    drawn = screen.getvalue()
    assert "[  1/4] no_tool_capital · scripted · function_calling: ok" in drawn
    assert "[  4/4] weather_single · scripted · text: ok" in drawn
    assert re.search(r"\] 3/4 +75% · [0-9.]+ s · ETA [0-9.]+ s", drawn)
    assert drawn.endswith("\r\x1b[K")  # the bar is wiped at the end
    assert main(["compare", "--scripted", "--task", "no_tool_capital"]) == 0
    err = capsys.readouterr().err  # not a terminal: the lines, and no bar
    assert "[  2/2] no_tool_capital · scripted · text: ok" in err
    assert "\x1b" not in err and "ETA" not in err


# --- Ray --------------------------------------------------------------------------------------

THREE = ["--protocol", "function_calling", "--protocol", "text", "--protocol", "structured"]
"""The suite's 13 tasks under three protocols: 39 runs."""


def _same_everywhere(value: Any) -> Any:
    """A results record without what differs between two runs of the same comparison:
    times (``*_s``, ``*_at``) and the call ids the engine makes up."""
    if isinstance(value, dict):
        return {k: _same_everywhere(v) for k, v in value.items() if not k.endswith(("_s", "_at"))}
    if isinstance(value, list):
        return [_same_everywhere(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\bcall_[0-9a-f]{24}\b", "call_*", value)
    return value


def _records(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], Any]]:
    """A results file's first line (the comparison) and its records by run."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    records = {(r["model"], r["protocol"], r["case"]): _same_everywhere(r) for r in lines[1:]}
    assert len(records) == len(lines) - 1  # one record per run
    return lines[0], records


@pytest.mark.slow  # starts a real local Ray instance, twice
def test_a_local_ray_cluster_gives_the_sequential_comparison(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare --ray`` on a real local Ray instance (loopback, no dashboard, no usage
    report): 39 runs as Ray tasks, against the sequential run and ``--concurrency 8``."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray = require_module("ray", "Ray", DEV_HINT, module_level=False)  # the dev extra has it

    runs: dict[str, tuple[str, dict[str, Any], dict[tuple[str, ...], Any]]] = {}
    for name, extra in (
        ("seq", []),
        ("c8", ["--concurrency", "8"]),
        ("ray", ["--ray", "--concurrency", "2"]),
    ):
        results = tmp_path / f"{name}.jsonl"
        code, table, err = _compare(capsys, *THREE, "--results", str(results), *extra)
        assert code == 0, err
        runs[name] = (table, *_records(results))
    assert not ray.is_initialized()  # the cluster it started is gone

    table, meta, records = runs["seq"]
    assert len(records) == 39 and all(r["result"]["trace"] for r in records.values())
    for other in ("c8", "ray"):
        other_table, other_meta, other_records = runs[other]
        assert other_meta == meta  # one results format: the same comparison
        assert other_records == records  # every field of every run, its trace included
        assert _table(other_table) == _table(table)

    # A run that cannot reach its server stops the comparison with the same message as in
    # this process, not with the Ray worker's traceback.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    live = ["--base-url", url, "--model", "m", "--max-retries", "0", "--task", "no_tool_capital"]
    code, _, err = _live_compare(capsys, *live)
    assert code == 4 and "cannot reach" in err, err
    code_ray, _, err_ray = _live_compare(capsys, *live, "--ray")
    assert code_ray == 4, err_ray
    assert err_ray.splitlines()[-1] == err.splitlines()[-1]  # Ray's own log lines above it
    assert not ray.is_initialized()


def _live_compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", "--quiet", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


ROOT = Path(__file__).resolve().parents[2]


def _compare_process(*args: str, timeout: float = 120, prelude: str = "") -> tuple[int, str]:
    """``react-engine compare --scripted --quiet ARGS`` in a process of its own (Ray's
    state stays out of this one), after ``prelude``; its exit code and stderr. ``timeout``
    only catches a process that hangs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAY_ADDRESS"))}
    env |= {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    code = (
        f"import sys\n{prelude}\nfrom react_engine.cli import main\n"
        f"sys.exit(main(['compare', '--scripted', '--quiet', *{list(args)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stderr


def test_compare_at_a_dead_ray_address_fails_at_once_in_one_line() -> None:
    """It hung past 240 s: Ray retries a dead address for minutes."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"
    started = time.monotonic()
    code, err = _compare_process("--task", "no_tool_capital", "--ray", address, timeout=60)
    assert time.monotonic() - started < 30
    assert code == 2
    assert err.startswith(f"error: cannot reach the Ray cluster at {address}: ")
    assert err.endswith("(--ray without an address starts a local one)\n")
    assert err.count("\n") == 1, err


@pytest.mark.slow  # Ray retries for RAY_CONNECT_TIMEOUT (shortened here to 3 s)
def test_compare_at_a_port_that_is_no_ray_cluster_gives_up() -> None:
    """A port that takes the connection and never answers (the dashboard's, another
    server's): the connection is given up after the timeout, and the process ends."""
    require_module("ray", "Ray", DEV_HINT, module_level=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel accepts; nothing is ever read or written
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        prelude = "from react_engine.harness import runner\nrunner.RAY_CONNECT_TIMEOUT = 3"
        started = time.monotonic()
        code, err = _compare_process(
            "--task", "no_tool_capital", "--ray", address, prelude=prelude, timeout=90
        )
    assert time.monotonic() - started < 60
    assert code == 2, err
    last = err.splitlines()[-1]  # Ray's own log lines above it
    assert last == (
        f"error: the Ray cluster at {address} did not answer within 3 s: is it the address "
        "of a cluster's head (its GCS port, 6379 by default)?"
    )


@pytest.mark.slow  # starts a real local Ray instance
def test_a_killed_ray_worker_fails_its_run_and_the_others_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One worker is killed (SIGKILL, as the OOM killer does) in the middle of its run:
    that run is reported failed, saying so; every other run finishes as in this process.
    It aborted the whole comparison with Ray's ``WorkerCrashedError``."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray = require_module("ray", "Ray", DEV_HINT, module_level=False)
    original = compare_run._run_job
    victim = ("weather_single", "text")

    async def dies_on_one(settings: Any, job: Any, client: Any) -> Any:  # run in the worker
        if (job.case.id, job.target.protocol) == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return await original(settings, job, client)

    tasks = load_tasks(only=["no_tool_capital", "weather_single", "calculator_single"])
    expected = run_comparison(tasks, TARGETS, source="scripted")
    monkeypatch.setattr(compare_run, "_run_job", dies_on_one)
    report = run_comparison(tasks, TARGETS, source="scripted", ray="", concurrency=2)
    assert not ray.is_initialized()  # the cluster it started is gone

    assert [(r.task, r.protocol) for r in report.runs] == [
        (r.task, r.protocol) for r in expected.runs
    ]
    for run, alone in zip(report.runs, expected.runs, strict=True):
        if (run.task, run.protocol) == victim:
            assert not run.success and run.stop_reason == "error" and run.trace == []
            assert run.error is not None and run.failures == [run.error]
            assert run.error.startswith("its Ray worker failed (WorkerCrashedError): ")
        else:
            assert _record(run) == _record(alone)
    killed = next(t for t in report.totals() if t.protocol == "text")
    assert killed.runs == 3 and killed.successes == 2
