"""``react-engine eval bfcl`` at scale: ``--concurrency``, ``--ray``, ``--results`` /
``--resume`` and the progress bar (react_engine/harness/runner.py).

The promise under test: however the cases run, the per-case records and the tables are
those of the sequential run, in the same order."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.parts import BFCL, BFCL_HINT, DEV_HINT, require_module

from react_engine.cli import main
from react_engine.errors import ConfigurationError
from react_engine.eval.bfcl_recording import DEFAULT_RECORDINGS
from react_engine.harness.runner import Job, Progress, ResultsFile, run_cases
from react_engine.testing import ScriptedServer, completion

MULTI_TURN = DEFAULT_RECORDINGS / "multi-turn"
THIRTY = ["--limit", "6"]
"""Six cases of each of the five recorded categories: a 30-case evaluation (under each
of the three recorded protocols)."""


@pytest.fixture(scope="module", autouse=True)
def _bfcl_data() -> None:
    require_module("bfcl_eval", BFCL, BFCL_HINT, module_level=False)


def _evaluate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, *args: str
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]], str]:
    """Run the command; its table, the ``--out`` report's per-case results, the
    ``--results`` file's records (in file order), and stderr."""
    out, results = tmp_path / f"{name}.json", tmp_path / f"{name}.jsonl"
    code = main(["eval", "bfcl", *args, "--out", str(out), "--results", str(results)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert set(lines[0]) == {"meta"}
    report = json.loads(out.read_text())
    report["meta"].pop("started_at")
    return captured.out, report["results"], lines[1:], captured.err


def _table(out: str) -> list[str]:
    return out.splitlines()


def _by_key(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["protocol"], r["case"]): r["result"] for r in records}


# --- the same results, however the cases run ------------------------------------------------


@pytest.mark.parametrize("directory", [DEFAULT_RECORDINGS, MULTI_TURN], ids=["ast", "multi-turn"])
def test_concurrent_runs_give_the_sequential_records_and_tables(
    directory: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scripted = ["--scripted", str(directory), *THIRTY, "--quiet"]
    table, results, records, _ = _evaluate(capsys, tmp_path, "seq", *scripted)
    table8, results8, records8, _ = _evaluate(
        capsys, tmp_path, "c8", *scripted, "--concurrency", "8"
    )
    assert len(results) == (90 if directory == DEFAULT_RECORDINGS else 4)
    assert results8 == results  # the same records, in the same order
    assert _table(table8) == _table(table)
    assert _by_key(records8) == _by_key(records)
    assert [r["result"] for r in records] == results  # sequential: the file is in order too


def test_the_concurrency_is_what_was_asked_and_the_order_is_the_jobs() -> None:
    running, peak = 0, 0
    finished: list[int] = []

    async def one(job: Job, client: object) -> tuple[Any, Any]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (20 - job.index))  # later jobs finish first
        running -= 1
        return job.index, None

    def run(jobs: list[Job], **options: Any) -> list[tuple[Any, Any]]:
        return run_cases(jobs, one, result_type=object, meta={}, **options)

    jobs = [Job(i, "text", SimpleNamespace(id=str(i))) for i in range(20)]
    for n in (1, 5):
        peak = 0
        finished.clear()
        out = run(jobs, concurrency=n, on_done=lambda j, *_: finished.append(j.index))
        assert [o[0] for o in out] == list(range(20))
        assert peak == n
        assert (finished == list(range(20))) == (n == 1)
    with pytest.raises(ConfigurationError, match="at least 1"):
        run(jobs, concurrency=0)
    assert run([], ray="", ray_failed=lambda job, why: (None, None)) == []  # no cluster


def test_a_live_concurrent_run_records_what_the_sequential_one_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        question = json.dumps(body["messages"][-1])
        return completion(f"Thought: done\nFinal Answer: {len(question)}", prompt_tokens=100)

    args = ["eval", "bfcl", "--categories", "simple", "multiple", "--limit", "5", "--quiet"]
    args += ["--protocol", "text"]
    tables = []
    with ScriptedServer(default=respond) as server:
        for name, extra in (("seq", []), ("c4", ["--concurrency", "4"])):
            live = [*args, "--base-url", server.base_url, "--model", "m"]
            assert main([*live, *extra, "--record", str(tmp_path / name)]) == 0
            tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1]
    seq = json.loads((tmp_path / "seq" / "text.json").read_text())
    c4 = json.loads((tmp_path / "c4" / "text.json").read_text())
    assert len(seq["replies"]) == 10
    assert list(c4["replies"].items()) == list(seq["replies"].items())  # same order too


# --- resumable ------------------------------------------------------------------------------


def test_a_killed_evaluation_resumes_where_it_stopped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scripted = ["--scripted", *THIRTY]
    table, results, records, _ = _evaluate(capsys, tmp_path, "full", *scripted, "--quiet")
    full = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    # Killed after 40 cases, in the middle of writing the 41st.
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(full[:41]) + full[41][:50])
    out = tmp_path / "cut.json"
    args = ["eval", "bfcl", *scripted, "--results", str(cut), "--out", str(out)]
    assert main([*args, "--concurrency", "3"]) == 2  # not over it without --resume
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume", "--concurrency", "3"]) == 0
    resumed = capsys.readouterr()
    progress = [line for line in resumed.err.splitlines() if line.startswith("[")]
    assert len(progress) == 50  # only the cases not recorded ran
    assert all(f"/{len(results)}]" in line for line in progress)
    assert resumed.out.splitlines()[1:] == table.splitlines()[1:]
    assert json.loads(out.read_text())["results"] == results
    lines = [json.loads(line) for line in cut.read_text().splitlines()]
    assert _by_key(lines[1:]) == _by_key(records)
    # Once complete, a resume runs nothing and reports the same.
    assert main([*args, "--resume", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == table.splitlines()[1:]
    assert len(cut.read_text().splitlines()) == 91


def test_a_resume_refuses_another_evaluations_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = tmp_path / "r.jsonl"
    base = ["eval", "bfcl", "--scripted", "--limit", "1", "--quiet", "--results", str(results)]
    assert main(base) == 0
    other = ["--scripted", str(DEFAULT_RECORDINGS / "required")]
    assert main([*base, "--resume", *other]) == 2  # the last --scripted wins: other settings
    assert "other settings" in capsys.readouterr().err
    assert main(["eval", "bfcl", "--scripted", "--resume"]) == 2
    assert "--results FILE" in capsys.readouterr().err
    assert main(["eval", "bfcl", "--scripted", "--concurrency", "0"]) == 2
    meta = json.loads(results.read_text().splitlines()[0])["meta"]
    results.write_text(results.read_text().replace('"case"', '"cas"', 1) + "{}\n")
    with pytest.raises(ConfigurationError, match=r"r\.jsonl:2: not a results record"):
        ResultsFile(results, meta, resume=True)


# --- the progress bar -----------------------------------------------------------------------


def test_the_progress_bar_shows_the_eta_on_a_terminal_only() -> None:
    stream = io.StringIO()
    bar = Progress(10, stream, done=2, live=True)
    assert "ETA …" in bar.line()  # nothing ran yet: no rate to go by
    bar.since -= 4.0
    bar.advance("[   3/10] text simple_python_2 ok")
    bar.advance(None)
    # 2 cases ran in ~4 s, 6 to go: about 12 s.
    assert (
        bar.line(now=bar.since + 4.0) == "[##########..............] 4/10  40% · 4.0 s · ETA 12.0 s"
    )
    written = stream.getvalue()
    assert "[   3/10] text simple_python_2 ok\n" in written and "ETA" in written
    bar.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    plain = io.StringIO()  # not a terminal: the lines only
    quiet = Progress(2, plain)
    quiet.advance("one")
    quiet.advance("two")
    quiet.close()
    assert plain.getvalue() == "one\ntwo\n"


def test_the_command_draws_no_bar_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["eval", "bfcl", "--scripted", "--limit", "1", "--concurrency", "2"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "ETA" not in err
    assert len([line for line in err.splitlines() if line.startswith("[")]) == 15


# --- Ray --------------------------------------------------------------------------------------


@pytest.mark.slow  # starts a real local Ray instance
def test_a_local_ray_cluster_gives_the_sequential_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real local Ray instance (loopback, no dashboard, no usage report): a 30-case
    evaluation under three protocols, and a multi-turn one, as Ray tasks."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    ray = require_module("ray", "Ray", DEV_HINT, module_level=False)  # the dev extra has it

    scripted = ["--scripted", *THIRTY, "--quiet"]
    table, results, records, _ = _evaluate(capsys, tmp_path, "seq", *scripted)
    c8 = _evaluate(capsys, tmp_path, "c8", *scripted, "--concurrency", "8")
    on_ray = _evaluate(capsys, tmp_path, "ray", *scripted, "--ray")
    assert not ray.is_initialized()  # the cluster it started is gone
    for other_table, other_results, other_records, _ in (c8, on_ray):
        assert other_results == results
        assert _table(other_table) == _table(table)
        assert _by_key(other_records) == _by_key(records)
    multi = ["--scripted", str(MULTI_TURN), "--quiet"]
    mt_table, mt_results, _, _ = _evaluate(capsys, tmp_path, "mt", *multi)
    mt_ray = _evaluate(capsys, tmp_path, "mt-ray", *multi, "--ray")
    assert mt_ray[1] == mt_results and _table(mt_ray[0]) == _table(mt_table)
