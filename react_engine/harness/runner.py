"""How the harness runs its cases (docs/bfcl.md): one after another, as N concurrent async
runs, or as Ray tasks, every :class:`Job`'s outcome given back in the run's order. Each
finished job is appended to a JSON Lines :class:`ResultsFile` that ``--resume`` continues;
:class:`Progress` draws a bar with an ETA on a terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigurationError
from ..runtime import run_coroutine
from ..transport.base import ChatModel
from ..transport.endpoint import connect

__all__ = [
    "RAY_CONNECT_TIMEOUT",
    "Job",
    "Outcome",
    "Progress",
    "RayFailed",
    "ResultsFile",
    "run_cases",
]


@dataclass(frozen=True, slots=True)
class Job:
    """One case under one protocol (and model), at its place in the run."""

    index: int
    protocol: str
    case: Any
    """Anything with an ``id``: a BFCL case, a multi-turn case, a comparison task."""
    replies: Any = None
    """The recorded replies to replay (``--scripted``); ``None`` for a live run."""
    model: str | None = None
    """The model, where the run has several; ``None`` keeps the key to (protocol, case)."""
    target: Any = None
    """What the front end needs besides the case to run it (a comparison's target)."""
    endpoint: tuple[str | None, str | None] | None = None
    """The base URL and API key of a live job's model; ``None``: it runs with no client."""

    @property
    def key(self) -> tuple[str, ...]:
        if self.model is None:
            return (self.protocol, self.case.id)
        return (self.model, self.protocol, self.case.id)


Outcome = tuple[Any, Any]
"""What a job gives: its result record (a dataclass) and the replies it recorded (or
``None``)."""


class ResultsFile:
    """Per-case records, one JSON line each, appended as each case finishes; the first
    line is ``{"meta": ...}``, which a resumed run must share. A last line cut short by a
    kill is dropped on resume."""

    def __init__(self, path: Path, meta: Mapping[str, Any], *, resume: bool) -> None:
        self.path = path
        self.done: dict[tuple[str, ...], dict[str, Any]] = {}
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if text.strip() and not resume:
            raise ConfigurationError(
                f"{path} already holds results: pass --resume to continue that evaluation, "
                "or another file"
            )
        lines = text.splitlines(keepends=True)
        kept: list[str] = []
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except ValueError:
                if number == len(lines):  # cut short by a kill: that case runs again
                    break
                raise ConfigurationError(f"{path}:{number}: not a results record") from None
            if number == 1:
                if record.get("meta") != json.loads(json.dumps(meta)):
                    raise ConfigurationError(
                        f"{path} holds an evaluation with other settings "
                        f"({record.get('meta')}): --resume continues the same one"
                    )
            else:
                try:
                    key = (record["protocol"], record["case"])
                    self.done[(record["model"], *key) if "model" in record else key] = record
                except (KeyError, TypeError):
                    raise ConfigurationError(f"{path}:{number}: not a results record") from None
            kept.append(line if line.endswith("\n") else line + "\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not kept:
            kept = [json.dumps({"meta": meta}, ensure_ascii=False) + "\n"]
        path.write_text("".join(kept), encoding="utf-8")
        self._file: TextIO = path.open("a", encoding="utf-8")

    def append(self, job: Job, result: Any, replies: Any) -> None:
        record = {
            **({} if job.model is None else {"model": job.model}),
            "protocol": job.protocol,
            "case": job.case.id,
            "result": asdict(result),
            "replies": replies,
        }
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _from_dict(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """``data`` as ``cls`` (a dataclass; fields it no longer has are left out, dataclass
    fields rebuilt from their dicts)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        kind, value = hints.get(f.name), data[f.name]
        if isinstance(kind, type) and is_dataclass(kind) and isinstance(value, Mapping):
            value = _from_dict(kind, value)
        values[f.name] = value
    return cls(**values)


class Progress:
    """``[#####.....] 12/30  40% · 3.2 s · ETA 4.8 s`` on one line of ``stream``, redrawn as
    jobs finish, when ``stream`` is a terminal; per-case lines (``say``) print above it."""

    WIDTH = 24

    def __init__(
        self, total: int, stream: TextIO, *, done: int = 0, live: bool | None = None
    ) -> None:
        self.total, self.done, self.stream = total, done, stream
        self.skipped = done  # resumed jobs: not counted in the rate
        if live is None:
            try:
                live = stream.isatty()
            except (AttributeError, ValueError):  # no such method, or a closed stream
                live = False
        self.live = live
        self.since = time.perf_counter()
        self._shown = False

    def line(self, now: float | None = None) -> str:
        elapsed = (time.perf_counter() if now is None else now) - self.since
        share = self.done / self.total if self.total else 1.0
        filled = round(self.WIDTH * share)
        ran = self.done - self.skipped
        if ran and self.done < self.total:
            eta = f"ETA {elapsed / ran * (self.total - self.done):.1f} s"
        elif self.done >= self.total:
            eta = "done"
        else:
            eta = "ETA …"
        return (
            f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
            f"{100 * share:3.0f}% · {elapsed:.1f} s · {eta}"
        )

    def advance(self, message: str | None = None) -> None:
        self.done += 1
        self.say(message)

    def say(self, message: str | None) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
        if message is not None:
            self.stream.write(message + "\n")
        if self.live:
            self.stream.write(self.line())
            self._shown = True
        self.stream.flush()

    def close(self) -> None:
        if self.live and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


RunOne = Callable[[Job, ChatModel | None], Coroutine[Any, Any, Outcome]]
"""A job's run, given an async model at its :attr:`Job.endpoint` (``None`` without one)."""

RayFailed = Callable[[Job, str], Outcome]
"""The outcome of a job whose Ray worker died, given why (one line): a failed case."""


async def _run_async(
    jobs: Sequence[Job],
    run_one: Callable[[Job], Awaitable[Outcome]],
    concurrency: int,
    done: Callable[[Job, Outcome], None],
) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Job) -> None:
        async with gate:
            outcome = await run_one(job)
        done(job, outcome)

    tasks = [asyncio.ensure_future(one(job)) for job in jobs]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


OnDone = Callable[[Job, Outcome, int, int], str | None]
"""Told of each finished job with how many are done (this one included) of how many; may
return a line to print above the progress bar."""


def run_cases(
    jobs: Sequence[Job],
    run_one: RunOne,
    *,
    result_type: type[Any],
    meta: Mapping[str, Any],
    results: Path | None = None,
    resume: bool = False,
    concurrency: int = 1,
    ray: str | None = None,
    ray_failed: RayFailed | None = None,
    progress: Progress | None = None,
    on_done: OnDone | None = None,
) -> list[Outcome]:
    """Run ``jobs`` (``run_one`` each, here or as a Ray task when ``ray`` is an address or
    ``""``; ``ray_failed`` gives the outcome of a job whose worker died), recording each
    in the ``results`` file; with ``resume``, the jobs recorded there are read back as
    ``result_type`` instead of run. ``on_done`` sees each as it finishes, in
    finishing order; ``progress`` prints what it returns above its bar. The outcomes come
    back in the jobs' order."""
    if concurrency < 1:
        raise ConfigurationError("--concurrency must be at least 1")
    if resume and results is None:
        raise ConfigurationError("--resume continues the evaluation in --results FILE")
    # One client per endpoint, closed with the shared event loop (not one per run, left to the GC).
    endpoints = {job.endpoint for job in jobs if job.endpoint is not None and ray is None}
    clients = {e: connect(*e, asynchronous=True) for e in endpoints}
    store = ResultsFile(results, meta, resume=resume) if results is not None else None
    saved = store.done if store is not None else {}
    outcomes = {
        job.key: (_from_dict(result_type, saved[job.key]["result"]), saved[job.key].get("replies"))
        for job in jobs
        if job.key in saved
    }
    todo = [job for job in jobs if job.key not in outcomes]
    if progress is not None:
        progress.done = progress.skipped = len(outcomes)

    def finished(job: Job, outcome: Outcome) -> None:
        outcomes[job.key] = outcome
        if store is not None:
            store.append(job, *outcome)
        line = on_done(job, outcome, len(outcomes), len(jobs)) if on_done is not None else None
        if progress is not None:
            progress.advance(line)

    def run_here(job: Job) -> Awaitable[Outcome]:
        return run_one(job, None if job.endpoint is None else clients[job.endpoint])

    try:
        if todo and ray is not None:  # (a resumed run with nothing left starts no cluster)
            assert ray_failed is not None
            _run_on_ray(todo, run_one, ray_failed, ray, concurrency, finished)
        elif todo:
            run_coroutine(_run_async(todo, run_here, concurrency, finished))
    finally:
        if progress is not None:
            progress.close()
        if store is not None:
            store.close()
    return [outcomes[job.key] for job in jobs]


LOCAL_RAY_CPUS = 2
"""CPUs a local Ray cluster gets at most (``--ray`` without an address)."""

RAY_CONNECT_TIMEOUT = 20.0
"""Seconds to reach a Ray cluster at an address (its port, then Ray's connection) before
a :class:`ConfigurationError` (Ray would retry for minutes)."""


def _connect(address: str, concurrency: int) -> tuple[Any, bool]:
    """Ray, connected, and whether this connection started the cluster."""
    # No usage report leaves the machine unless the user asked for one.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise ConfigurationError(
            "--ray needs Ray: pip install 'react-engine[ray]' (or 'ray>=2.9')"
        ) from None
    if ray.is_initialized():
        return ray, False
    if address:
        _reach(address)
        _within_timeout(lambda: ray.init(address=address, log_to_driver=False), address)
    else:
        ray.init(
            address="local",  # a cluster of its own, even where `ray start` left one
            num_cpus=max(1, min(LOCAL_RAY_CPUS, os.cpu_count() or 1, concurrency)),
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
    return ray, True


def _reach(address: str) -> None:
    """Open and close a connection to the cluster's port, so that a dead address fails
    at once (an address Ray finds itself, ``auto``, is left to Ray)."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not (colon and host and port.isdigit()):
        return
    import socket

    try:
        socket.create_connection((host.strip("[]"), int(port)), RAY_CONNECT_TIMEOUT).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise ConfigurationError(
            f"cannot reach the Ray cluster at {address}: {why}; is it running? "
            "(--ray without an address starts a local one)"
        ) from None


def _within_timeout(connect: Callable[[], object], address: str) -> None:
    """``connect()`` (``ray.init``) on a daemon thread, given up (and left behind) after
    :data:`RAY_CONNECT_TIMEOUT`: a port that is no Ray cluster keeps Ray retrying."""
    import threading

    failure: list[Exception] = []

    def attempt() -> None:
        try:
            connect()
        except Exception as exc:  # raised below, in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=attempt, name="react-engine-ray-connect", daemon=True)
    thread.start()
    thread.join(RAY_CONNECT_TIMEOUT)
    if thread.is_alive():
        raise ConfigurationError(
            f"the Ray cluster at {address} did not answer within {RAY_CONNECT_TIMEOUT:g} s: "
            "is it the address of a cluster's head (its GCS port, 6379 by default)?"
        )
    if failure:
        why = " ".join(str(failure[0]).split())[:300] or type(failure[0]).__name__
        raise ConfigurationError(f"cannot connect to the Ray cluster at {address}: {why}")


def _in_worker(run_one: RunOne, job: Job) -> Outcome:
    """The Ray task: ``run_one`` (any picklable callable) on one job, on the worker's own
    event loop with its own client."""
    client = None if job.endpoint is None else connect(*job.endpoint, asynchronous=True)
    return asyncio.run(run_one(job, client))


def _result(ray: Any, ref: Any, job: Job, failed: RayFailed) -> Outcome:
    """A task's outcome, its error raised as itself (not Ray's ``RayTaskError``); a task
    whose worker died has ``failed``'s outcome."""
    try:
        outcome: Outcome = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise
    except ray.exceptions.RayError as exc:
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        return failed(job, f"its Ray worker failed ({type(exc).__name__}): {why}")
    return outcome


def _run_on_ray(
    jobs: Sequence[Job],
    run_one: RunOne,
    failed: RayFailed,
    address: str,
    concurrency: int,
    done: Callable[[Job, Outcome], None],
) -> None:
    ray, started = _connect(address, concurrency)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(_in_worker)
        shared = ray.put(run_one)
        pending = {task.remote(shared, job): job for job in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                done(job, _result(ray, ref, job, failed))
    finally:
        if started:
            ray.shutdown()
