"""``python -m bench --quick`` runs every benchmark section and writes a complete report.

The bench measures ratios against baselines in the same run; this test asserts only the
shape of what it writes (no timing is asserted anywhere). It runs the real entry point in
a child process, as ``make bench`` does, against the loopback mock server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the whole quick bench in a child process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object], str]:
    out = tmp_path_factory.mktemp("bench")
    md, js = out / "results.md", out / "results.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(md), "--json", str(js)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return md.read_text("utf-8"), json.loads(js.read_text("utf-8")), proc.stdout


def test_report_has_every_section(quick_run: tuple[str, dict[str, object], str]) -> None:
    md, _, stdout = quick_run
    for heading in (
        "# react-engine benchmarks",
        "## Headline",
        "## 1. Overhead",
        "## 2. Parser and JSON repair",
        "## 3. Scale",
        "## 4. Prompt tokens and prefix stability",
        "## 5. Streaming: time to first token, live stop detection",
        "## 7. Durable state: what a store costs per LLM call",
        "## 8. Event-loop stall: hostile replies at 1 MB and at the read limit",
    ):
        assert heading in md
    for fact in ("**Date**", "**Command**", "**Machine**", "**Python**", "**Load average**"):
        assert fact in md
    assert "wrote" in stdout


def test_figures_have_the_expected_shape(
    quick_run: tuple[str, dict[str, object], str],
) -> None:
    _, results, _ = quick_run
    overhead = results["overhead"]
    assert isinstance(overhead, dict)
    for mode in ("async_sequential", "async_concurrent", "sync_sequential"):
        subjects = overhead[mode]["subjects"]
        assert set(subjects) == {
            "engine/function_calling",
            "bare/function_calling",
            "bare-dict/function_calling",
            "engine/text",
            "bare/text",
            "bare-chat/text",
        }
        assert all(s["failures"] == 0 and s["cpu_us_per_call"] > 0 for s in subjects.values())
        assert set(overhead[mode]["ratios"]) == {
            "function_calling vs bare",
            "function_calling vs bare-dict",
            "text vs bare",
            "text vs bare-chat",
        }
    assert set(overhead["engine_offline_cpu_us"]) == {"function_calling", "text"}

    parsing = results["parsing"]
    assert isinstance(parsing, dict)
    assert parsing["parser"]["files"] > 0 and parsing["repair_broken"]["files"] > 0
    assert all(row["ratio"] > 0 for row in parsing["fast_path"])
    assert all(row["seconds"] is not None for row in parsing["adversarial"])

    stall = results["stall"]
    assert isinstance(stall, dict)
    assert stall["cases"] and all(c["loop_cpu_ms"] > 0 for c in stall["cases"].values())

    scale = results["scale"]
    assert isinstance(scale, dict)
    assert {row["subject"] for row in scale["rows"]} >= {"engine/function_calling", "engine/text"}
    assert all(row["failures"] == 0 and row["runs_per_s"] > 0 for row in scale["rows"])

    tokens = results["tokens"]
    assert isinstance(tokens, dict)
    if "skipped" not in tokens:  # no llama_cpp or no local model: reported, not measured
        series = tokens["series"]
        assert "engine: text (ChatML)" in series
        assert "engine: fc (llama.cpp chatml-function-calling)" in series
        for rows in series.values():
            assert [r["step"] for r in rows] == [1, 2, 3]
            assert all(0 <= r["cache_share"] <= 1 for r in rows[1:])

    streaming = results["streaming"]
    assert isinstance(streaming, dict)
    assert streaming["ttft_ratio"] > 0 and streaming["streamed_total_ratio"] > 0
    stop = streaming["live_stop"]
    assert stop["cut_text_is_the_action"] is True
    assert stop["chunks_sent_with"] < stop["tokens_without"]
