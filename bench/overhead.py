"""Engine overhead against the bare SDK loops: client CPU per LLM call, wall time per run.

The server runs in another process (:class:`bench.server.ServerProcess`), so
``time.process_time()`` of this process is the client's CPU alone: the engine or the bare
loop, the ``openai`` SDK, httpx and the event loop (and, for the sync API, the worker
threads it uses). Subjects run in interleaved rounds, their order rotated every round, and
each round yields one engine/baseline ratio; the figure reported is the median of those
ratios, so a burst of load from other processes hits both sides of a ratio alike.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import json
import pstats
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .stats import best_time, median, quantile
from .subjects import (
    PROTOCOLS,
    Subject,
    capture_requests,
    engine_offline,
    is_expected,
    subjects,
)
from .task import CALLS_PER_RUN, QUESTION

__all__ = ["Sample", "measure_overhead"]

BUDGET_S = 90.0
"""Seconds for the measured rounds of all three modes together (warm-up not included)."""
MIN_ROUNDS = 8
MAX_ROUNDS = 40


@dataclass
class Sample:
    """Per-round figures of one subject in one mode."""

    cpu_us_per_call: list[float] = field(default_factory=list)
    wall_ms_per_run: list[float] = field(default_factory=list)
    failures: int = 0


def _rotate(items: list[Subject], k: int) -> list[Subject]:
    k %= len(items)
    return items[k:] + items[:k]


async def _async_round(subject: Subject, runs: int, concurrency: int, sample: Sample) -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    done = 0
    while done < runs:
        batch = min(concurrency, runs - done)
        if batch == 1:
            results = [await subject.arun()]
        else:
            results = await asyncio.gather(*(subject.arun() for _ in range(batch)))
        sample.failures += sum(1 for r in results if not is_expected(r))
        done += batch
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sample.cpu_us_per_call.append(cpu / (runs * CALLS_PER_RUN) * 1e6)
    # Concurrent rounds report the wall time of one batch of `concurrency` runs.
    batches = -(-runs // concurrency)
    sample.wall_ms_per_run.append(wall / (runs if concurrency == 1 else batches) * 1e3)


def _sync_round(subject: Subject, runs: int, sample: Sample) -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(runs):
        if not is_expected(subject.run()):
            sample.failures += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sample.cpu_us_per_call.append(cpu / (runs * CALLS_PER_RUN) * 1e6)
    sample.wall_ms_per_run.append(wall / runs * 1e3)


def _summary(samples: dict[str, Sample], baseline_names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"subjects": {}, "ratios": {}}
    for key, s in samples.items():
        out["subjects"][key] = {
            "cpu_us_per_call": median(s.cpu_us_per_call),
            "wall_ms": median(s.wall_ms_per_run),
            "failures": s.failures,
            "rounds": len(s.cpu_us_per_call),
        }
    for protocol in PROTOCOLS:
        engine = samples.get(f"engine/{protocol}")
        if engine is None:
            continue
        for base in baseline_names:
            b = samples.get(f"{base}/{protocol}")
            if b is None:
                continue
            cpu = [e / x for e, x in zip(engine.cpu_us_per_call, b.cpu_us_per_call, strict=True)]
            wall = [e / x for e, x in zip(engine.wall_ms_per_run, b.wall_ms_per_run, strict=True)]
            gap = [e - x for e, x in zip(engine.cpu_us_per_call, b.cpu_us_per_call, strict=True)]
            out["ratios"][f"{protocol} vs {base}"] = {
                "cpu": median(cpu),
                "cpu_gap_us": median(gap),
                "cpu_q25": quantile(cpu, 0.25),
                "cpu_q75": quantile(cpu, 0.75),
                "wall": median(wall),
            }
    return out


async def _offline_protocol(protocol: str, runs: int) -> float:
    agent = engine_offline(protocol)
    for _ in range(max(5, runs // 10)):
        await agent.arun(QUESTION)
    times = []
    for _ in range(5):
        cpu0 = time.process_time()
        for _ in range(runs):
            await agent.arun(QUESTION)
        times.append(time.process_time() - cpu0)
    return median(times) / (runs * CALLS_PER_RUN) * 1e6


def _offline_cpu(runs: int) -> dict[str, float]:
    """The engine's own CPU per call, with no SDK and no HTTP (the in-process replay model)."""
    return {p: asyncio.run(_offline_protocol(p, runs)) for p in PROTOCOLS}


async def _profiled(base_url: str, protocol: str, runs: int, profiler: cProfile.Profile) -> None:
    subs = subjects(base_url, (protocol,))
    subject = next(s for s in subs if s.name == "engine")
    for _ in range(5):
        await subject.arun()
    profiler.enable()
    for _ in range(runs):
        await subject.arun()
    profiler.disable()
    await subs.aclose()


def _profile(base_url: str, runs: int) -> dict[str, Any]:
    """Where the engine's client CPU goes, per protocol (cProfile; shares, not times)."""
    out: dict[str, Any] = {}
    for protocol in PROTOCOLS:
        profiler = cProfile.Profile()
        asyncio.run(_profiled(base_url, protocol, runs, profiler))
        st = pstats.Stats(profiler)
        raw: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
        total = sum(tt for (_, _, tt, _, _) in raw.values())
        sdk = 0.0
        own: dict[str, float] = defaultdict(float)
        for (path, line, name), (_, _, tt, ct, _) in raw.items():
            if name == "create" and "openai/resources/chat" in path:
                sdk = max(sdk, ct)
            if "/react_engine/" in path:
                own[f"{path.split('/react_engine/')[1]}:{line}({name})"] += tt
        top = sorted(own.items(), key=lambda kv: -kv[1])[:8]
        out[protocol] = {
            "total_s": total,
            "sdk_share": sdk / total if total else float("nan"),
            "engine_own_share": sum(own.values()) / total if total else float("nan"),
            "top_engine": [(k, v / total) for k, v in top],
        }
    return out


def _sdk_request_cost(budget: float) -> dict[str, Any]:
    """What the ``openai`` SDK spends turning each subject's request into JSON.

    ``chat.completions.create`` runs every request through the SDK's type-driven
    ``transform`` before sending it; its cost grows with the number of messages (each is
    checked against every message type). Timed on the exact bodies sent, averaged over the
    run's three requests. A private SDK function: skipped if it moved.
    """
    try:
        from openai._utils._transform import maybe_transform
        from openai.types.chat.completion_create_params import (
            CompletionCreateParamsNonStreaming,
        )
    except ImportError as exc:  # pragma: no cover - depends on the SDK version
        return {"skipped": str(exc)}
    out: dict[str, Any] = {}
    for key, bodies in capture_requests().items():
        costs = [
            best_time(
                lambda b=b: maybe_transform(b, CompletionCreateParamsNonStreaming),
                budget_s=budget,
            )
            for b in bodies
        ]
        out[key] = {
            "transform_us_per_call": sum(costs) / len(costs) * 1e6,
            "messages_last_request": len(bodies[-1]["messages"]),
            "bytes_last_request": len(json.dumps(bodies[-1], ensure_ascii=False).encode()),
        }
    return out


def measure_overhead(base_url: str, *, quick: bool = False) -> dict[str, Any]:
    """Every overhead figure; see the module docstring.

    Each mode runs rounds until its time budget is spent (at least ``MIN_ROUNDS``, at most
    ``MAX_ROUNDS``), so a busy machine gets fewer rounds instead of a longer bench.
    """
    min_rounds = 2 if quick else MIN_ROUNDS
    max_rounds = 2 if quick else MAX_ROUNDS
    seq_runs = 1 if quick else 5
    concurrency = 10 if quick else 50
    warmup = 2 if quick else 5
    budget = 0.0 if quick else BUDGET_S
    baselines = ("bare", "bare-dict", "bare-chat")
    result: dict[str, Any] = {"runs_per_round": seq_runs, "concurrency": concurrency}
    gc.collect()

    def more(r: int, started: float, share: float) -> bool:
        if r < min_rounds:
            return True
        return r < max_rounds and time.perf_counter() - started < budget * share

    seq: dict[str, Sample] = {}
    conc: dict[str, Sample] = {}

    async def run_async() -> None:
        subs = subjects(base_url)
        for s in subs:
            for _ in range(warmup):
                await s.arun()
            await asyncio.gather(*(s.arun() for _ in range(concurrency)))
        r, started = 0, time.perf_counter()
        while more(r, started, 0.30):
            for s in _rotate(subs, r):
                await _async_round(s, seq_runs, 1, seq.setdefault(s.key, Sample()))
            r += 1
        result["rounds"] = r
        r, started = 0, time.perf_counter()
        while more(r, started, 0.45):
            for s in _rotate(subs, r):
                await _async_round(s, concurrency, concurrency, conc.setdefault(s.key, Sample()))
            r += 1
        result["concurrent_rounds"] = r
        await subs.aclose()

    asyncio.run(run_async())
    result["async_sequential"] = _summary(seq, baselines)
    result["async_concurrent"] = _summary(conc, baselines)

    # The sync API (Agent.run) against the sync bare loops.
    sync: dict[str, Sample] = {}
    subs = subjects(base_url)
    for s in subs:
        for _ in range(warmup):
            s.run()
    r, started = 0, time.perf_counter()
    while more(r, started, 0.25):
        for s in _rotate(subs, r):
            _sync_round(s, seq_runs, sync.setdefault(s.key, Sample()))
        r += 1
    result["sync_rounds"] = r
    subs.close()
    result["sync_sequential"] = _summary(sync, baselines)

    result["engine_offline_cpu_us"] = _offline_cpu(10 if quick else 100)
    result["profile"] = _profile(base_url, 3 if quick else 20)
    result["sdk_request"] = _sdk_request_cost(0.002 if quick else 0.02)
    return result
