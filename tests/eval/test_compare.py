"""The protocol comparison: task files, the checker, and figures checked against the traces.

The scripted comparison is run through the CLI (``react-engine compare --scripted``), and
every figure it reports (table, JSON, CSV) is recomputed here from the runs' traces, by
code written independently of :func:`react_engine.compare.metrics_from_trace`, and
cross-checked against the scripted transcripts themselves.
"""

from __future__ import annotations

import csv
import io
import json
import re
import runpy
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.parts import PLOT, PLOT_HINT, require_module

from react_engine.cli import main
from react_engine.compare.run import (
    CompareSettings,
    Metrics,
    Target,
    format_report,
    metrics_from_trace,
    run_comparison,
    write_outputs,
)
from react_engine.compare.suite import (
    PROTOCOLS,
    Task,
    Transcript,
    check_result,
    default_tasks_dir,
    estimate_tokens,
    load_task,
    load_tasks,
)
from react_engine.compare.tools import TASK_TOOLS, fetch_build_log, find_user, list_todo_tasks
from react_engine.errors import ConfigurationError
from react_engine.testing import ScriptedServer, completion, tool_calls_completion
from react_engine.types import ActionRecord, RunResult, Step, Usage

ROOT = Path(__file__).resolve().parents[2]
TASK_FILES = sorted((ROOT / "react_engine" / "compare" / "tasks").glob("*.json"))


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "REACT_ENGINE_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


# --- task files --------------------------------------------------------------------------------


def test_the_default_tasks_are_package_data() -> None:
    # Read through importlib.resources, so an installed package finds them (see
    # tests/api/test_packaging.py for the built wheel); from the source tree that is this folder.
    assert default_tasks_dir() == resources.files("react_engine.compare").joinpath("tasks")
    assert Path(str(default_tasks_dir())) == ROOT / "react_engine" / "compare" / "tasks"
    assert [t.id for t in load_tasks()] == [p.stem for p in TASK_FILES]
    assert len(TASK_FILES) >= 12


@pytest.mark.parametrize("path", TASK_FILES, ids=[p.stem for p in TASK_FILES])
def test_every_task_file_loads_and_validates(path: Path) -> None:
    task = load_task(path)
    assert task.id == path.stem
    assert task.covers and task.question
    assert all(name in TASK_TOOLS for name in task.tools)
    # Every task carries a scripted transcript for both protocols, for the tests' run.
    assert set(task.scripted) == set(PROTOCOLS)


def _has_cjk(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


def test_the_suite_covers_what_the_issue_asks_for() -> None:
    tasks = load_tasks()
    assert len(tasks) >= 12

    def fc_calls(t: Task) -> list[int]:
        return [len(r.tool_calls) for r in t.scripted["function_calling"]]

    offered = {t.id: set(t.tools) for t in tasks}
    coverage = {
        "one tool call": [t.id for t in tasks if sum(fc_calls(t)) == 1 and t.check.must_call],
        "two independent calls": [t.id for t in tasks if max(fc_calls(t)) >= 2],
        "chained calls": [t.id for t in tasks if len(t.check.must_call) >= 2],
        "no tool needed": [t.id for t in tasks if set(t.check.must_not_call) >= offered[t.id]],
        "a tool that errors": [t.id for t in tasks if "get_exchange_rate" in t.check.must_call],
        "a tempting unknown tool": [
            t.id for t in tasks if any(n not in TASK_TOOLS for n in t.check.must_not_call)
        ],
        "a question in Chinese": [t.id for t in tasks if _has_cjk(t.question)],
        "a long observation": [t.id for t in tasks if t.check.observation_truncated],
        "ask for a missing argument": [
            t.id
            for t in tasks
            if set(t.check.must_not_call) & offered[t.id]
            and not set(t.check.must_not_call) >= offered[t.id]
        ],
    }
    assert all(coverage.values()), {k: v for k, v in coverage.items() if not v}


def _write(tmp_path: Path, data: dict[str, Any], name: str = "t") -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


GOOD: dict[str, Any] = {
    "id": "t",
    "covers": "x",
    "question": "q?",
    "tools": ["get_weather"],
    "check": {"answer_contains": ["a"], "must_call": ["get_weather"]},
    "scripted": {"text": ["Final Answer: a"]},
}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"tools": ["get_wether"]}, "tools: Value error, unknown tools ['get_wether']"),
        ({"id": "other"}, "it must be 't'"),
        ({"check": {"must_call": ["calculator"]}}, "does not offer: ['calculator']"),
        ({"scripted": {"text": [{"tool_calls": [{"name": "get_weather"}]}]}}, "no tool_calls"),
        ({"scripted": {"fc": ["x"]}}, "scripted.fc"),
        ({"scripted": {"text": []}}, "scripted.text is empty"),
        ({"question": ""}, "question"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"check": {"max_steps": 0}}, "check.max_steps"),
    ],
)
def test_invalid_task_files_say_where(tmp_path: Path, change: dict[str, Any], needle: str) -> None:
    path = _write(tmp_path, {**GOOD, **change})
    with pytest.raises(ConfigurationError) as info:
        load_task(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_load_tasks_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no task directory"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(ConfigurationError, match="no task files"):
        load_tasks(tmp_path)
    _write(tmp_path, GOOD)
    assert [t.id for t in load_tasks(tmp_path, ["t"])] == ["t"]
    with pytest.raises(ConfigurationError, match=r"unknown task ids \['nope'\]"):
        load_tasks(tmp_path, ["nope"])
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="cannot read task file"):
        load_tasks(tmp_path)


def test_compare_runs_a_tasks_directory_of_ones_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, GOOD, name="t")
    args = ["compare", "--scripted", "--tasks", str(tmp_path), "--protocol", "text", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "1 tasks" in out and re.search(r"^\s*t\b", out, re.M), out


# --- the task tools ----------------------------------------------------------------------------


def test_task_tools() -> None:
    assert find_user("李四")["id"] == "user_2"
    assert find_user("li  si")["id"] == "user_2"
    with pytest.raises(LookupError, match="no user named"):
        find_user("Nobody")
    assert [t["task_id"] for t in list_todo_tasks("user_2")] == ["T-1042", "T-1077"]
    assert list_todo_tasks("user_3") == []
    with pytest.raises(LookupError):
        list_todo_tasks("user_99")
    log = fetch_build_log("build-2291")
    assert len(log) > 20_000 and log.endswith("test_refresh)")
    assert (
        TASK_TOOLS["submit_leave_request"]
        .function("user_1", 2, "sick", "user_2")
        .startswith("submitted")
    )
    with pytest.raises(ConnectionError):
        TASK_TOOLS["get_exchange_rate"].function("USD", "EUR")


# --- the checker -------------------------------------------------------------------------------


def _result(
    answer: str | None,
    actions: Sequence[tuple[str, Any]] = (),
    *,
    stop: Any = "final_answer",
    steps: int = 2,
    observation: str = "ok",
) -> RunResult:
    recs = [
        ActionRecord(
            id=f"c{i}", tool=t, arguments={}, raw_arguments="{}", observation=observation, status=s
        )
        for i, (t, s) in enumerate(actions)
    ]
    all_steps = [Step(index=0, kind="action", protocol="text", actions=recs)]
    all_steps += [Step(index=i, kind="action", protocol="text") for i in range(1, steps)]
    return RunResult("q", answer, all_steps, Usage(), "text", "explicit", stop, "m")


def _task(**check: Any) -> Task:
    return Task.model_validate(
        {**GOOD, "tools": ["get_weather", "calculator"], "check": check, "scripted": {}}
    )


def test_checker_passes_and_fails_each_rule() -> None:
    task = _task(
        answer_contains=["24", ["sunny", "晴"]],
        must_call=["get_weather"],
        must_not_call=["web_search"],
        max_steps=3,
    )
    assert check_result(task, _result("Beijing: SUNNY, 24°C", [("get_weather", "ok")])) == []
    assert check_result(task, _result("北京 晴 24", [("get_weather", "error")])) == []
    assert check_result(task, _result("Beijing: 24°C", [("get_weather", "ok")])) == [
        "the answer lacks 'sunny' or '晴'"
    ]
    assert check_result(task, _result("sunny", [("get_weather", "ok")])) == [
        "the answer lacks '24'"
    ]
    # Asking for a tool with invalid arguments is not running it.
    assert check_result(task, _result("sunny 24", [("get_weather", "invalid_arguments")])) == [
        "get_weather never ran"
    ]
    assert check_result(
        task, _result("sunny 24", [("web_search", "unknown_tool"), ("get_weather", "ok")])
    ) == ["called web_search, which it must not"]
    assert check_result(task, _result("sunny 24", [("get_weather", "ok")], steps=4)) == [
        "4 steps (at most 3)"
    ]
    assert check_result(task, _result("sunny 24", [("get_weather", "ok")], stop="max_steps")) == [
        "no final answer (stop reason: max_steps)"
    ]
    assert len(check_result(task, _result(None, stop="error_budget"))) == 4

    truncated = _task(observation_truncated=True)
    assert check_result(truncated, _result("x", [("get_weather", "ok")])) == [
        "no observation was truncated"
    ]
    assert (
        check_result(
            truncated,
            _result(
                "x", [("get_weather", "ok")], observation="a\n…[truncated 9 of 20 characters]…\nb"
            ),
        )
        == []
    )


# --- figures from traces ------------------------------------------------------------------------


def _step(
    kind: str,
    actions: Sequence[dict[str, Any]] = (),
    repairs: Sequence[str] = (),
    p: int = 10,
    c: int = 2,
) -> dict[str, Any]:
    return {
        "type": "step",
        "kind": kind,
        "actions": list(actions),
        "repairs": list(repairs),
        "usage": {"prompt_tokens": p, "completion_tokens": c},
    }


def _action(status: str = "ok", salvaged: bool = False) -> dict[str, Any]:
    return {"status": status, "salvaged": salvaged}


def test_metrics_from_a_hand_written_trace() -> None:
    trace = [
        {"type": "run"},
        _step("action", [_action("unknown_tool")]),  # a model mistake: the next call is a retry
        _step("format_error", p=20),  # another: the next call is a retry
        _step("action", [_action("error"), _action("ok", salvaged=True)]),  # salvaged: repaired
        _step("action", [_action("invalid_arguments"), _action("ok")], ["json:missing_comma"]),
        _step("format_error"),  # last: no call follows, so no retry
        {"type": "result", "duration_s": 1.5},
    ]
    assert metrics_from_trace(trace) == Metrics(
        llm_calls=5,
        tool_calls=5,
        format_errors=2,
        repaired=2,
        retries=2,
        prompt_tokens=60,
        completion_tokens=10,
        wall_s=1.5,
    )


def _recompute(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one run, recomputed from its trace without the library's helper."""
    out = dict.fromkeys(
        (
            "llm_calls",
            "tool_calls",
            "format_errors",
            "repaired",
            "retries",
            "prompt_tokens",
            "completion_tokens",
        ),
        0,
    )
    previous_was_mistake = False
    for record in trace:
        if record["type"] != "step":
            continue
        out["llm_calls"] += 1
        if previous_was_mistake:
            out["retries"] += 1
        statuses = [a["status"] for a in record["actions"]]
        out["tool_calls"] += len(statuses)
        out["format_errors"] += record["kind"] == "format_error"
        salvaged = any(a["salvaged"] for a in record["actions"])
        out["repaired"] += record["kind"] != "format_error" and bool(record["repairs"] or salvaged)
        out["prompt_tokens"] += record["usage"]["prompt_tokens"]
        out["completion_tokens"] += record["usage"]["completion_tokens"]
        previous_was_mistake = record["kind"] == "format_error" or (
            bool(statuses) and set(statuses) <= {"unknown_tool", "invalid_arguments"}
        )
    out["wall_s"] = trace[-1]["duration_s"]
    return out


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("compare")
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        code = main(["compare", "--scripted", "--out", str(out)])
    finally:
        sys.stdout, sys.stderr = saved
    assert code == 0, stderr.getvalue()
    return {
        "out": out,
        "table": stdout.getvalue(),
        "progress": stderr.getvalue(),
        "json": json.loads((out / "comparison.json").read_text(encoding="utf-8")),
        "csv": list(csv.DictReader(io.StringIO((out / "comparison.csv").read_text("utf-8")))),
    }


def test_reported_figures_are_the_traces_figures(scripted_run: dict[str, Any]) -> None:
    data = scripted_run["json"]
    tasks = {t.id: t for t in load_tasks()}
    assert len(data["runs"]) == len(tasks) * 2
    for run in data["runs"]:
        assert run["metrics"] == _recompute(run["trace"]), (run["task"], run["protocol"])
        # Cross-check with the transcript itself: each scripted reply was one LLM call.
        assert run["unused_replies"] == 0
        assert run["metrics"]["llm_calls"] == len(tasks[run["task"]].scripted[run["protocol"]])
        assert run["success"] == (run["failures"] == [])
        header = run["trace"][0]
        assert (header["type"], header["protocol"]) == ("run", run["protocol"])
    for total in data["totals"]:
        mine = [r for r in data["runs"] if r["protocol"] == total["protocol"]]
        assert total["runs"] == len(mine)
        assert total["successes"] == sum(r["success"] for r in mine)
        for name, value in total["metrics"].items():
            assert value == pytest.approx(sum(r["metrics"][name] for r in mine)), name


def test_the_scripted_comparison_shows_the_trade_offs(scripted_run: dict[str, Any]) -> None:
    runs = {(r["task"], r["protocol"]): r for r in scripted_run["json"]["runs"]}
    failed = sorted(k for k, r in runs.items() if not r["success"])
    assert failed == [("missing_city", "function_calling"), ("unknown_tool_web_search", "text")]
    assert runs["unknown_tool_web_search", "text"]["failures"] == [
        "called web_search, which it must not"
    ]
    totals = {t["protocol"]: t["metrics"] for t in scripted_run["json"]["totals"]}
    fc, text = totals["function_calling"], totals["text"]
    # The two bare-thought replies of the text transcripts are its format errors.
    bare = sum(
        1
        for t in load_tasks()
        for r in t.scripted["text"]
        if "Action" not in (r.content or "") and "Final Answer" not in (r.content or "")
    )
    assert text["format_errors"] == bare == 2 and fc["format_errors"] == 0
    assert text["repaired"] > fc["repaired"] >= 1  # the Hermes tag salvaged under FC
    assert text["prompt_tokens"] > fc["prompt_tokens"]
    assert text["llm_calls"] > fc["llm_calls"]
    repairs = {k: r["repairs"] for k, r in runs.items()}
    assert repairs["weather_single", "text"] == {"markdown_label": 1}
    assert repairs["chinese_weather", "text"] == {"fullwidth_colon": 2}
    assert repairs["weather_two_cities", "text"] == {"json:extra_closing_bracket": 1}
    assert repairs["warmer_city", "text"] == {"cut_observation": 1}
    assert repairs["calculator_single", "function_calling"] == {"salvaged:hermes": 1}
    # Two calls in one step under both protocols: parallel calls, a multi-action step.
    for protocol in PROTOCOLS:
        first = runs["weather_two_cities", protocol]["trace"][1]
        assert [a["arguments"]["location"] for a in first["actions"]] == ["Beijing", "Guangzhou"]


def test_csv_agrees_with_json(scripted_run: dict[str, Any]) -> None:
    data, rows = scripted_run["json"], scripted_run["csv"]
    runs = [r for r in rows if r["task"] != "TOTAL"]
    assert len(runs) == len(data["runs"])
    for row, run in zip(runs, data["runs"], strict=True):
        assert (row["task"], row["protocol"]) == (run["task"], run["protocol"])
        assert int(row["successes"]) == run["success"]
        for name, value in run["metrics"].items():
            assert float(row[name]) == pytest.approx(value), name
    totals = [r for r in rows if r["task"] == "TOTAL"]
    for row, total in zip(totals, data["totals"], strict=True):
        assert int(row["successes"]) == total["successes"]
        assert int(row["runs"]) == total["runs"]
        for name, value in total["metrics"].items():
            assert float(row[name]) == pytest.approx(value), name


def _table_rows(table: str) -> dict[tuple[str, str], list[str]]:
    rows: dict[tuple[str, str], list[str]] = {}
    task = ""
    for line in table.splitlines():
        cells = line.split()
        if len(cells) == 11:
            task = cells[0]
            cells = cells[1:]
        if len(cells) == 10 and cells[0] in PROTOCOLS:
            rows[task, cells[0]] = cells[1:]
    return rows


def test_printed_table_shows_the_same_figures(scripted_run: dict[str, Any]) -> None:
    table = scripted_run["table"]
    assert table == (scripted_run["out"] / "comparison.txt").read_text("utf-8").rstrip("\n") + "\n"
    rows = _table_rows(table)
    order = ["llm_calls", "tool_calls", "format_errors", "repaired", "retries"]
    order += ["prompt_tokens", "completion_tokens"]
    for run in scripted_run["json"]["runs"]:
        cells = rows[run["task"], run["protocol"]]
        assert cells[0] == ("yes" if run["success"] else "NO")
        shown = [int(c.replace(",", "")) for c in cells[1:8]]
        assert shown == [run["metrics"][n] for n in order]
    for total in scripted_run["json"]["totals"]:
        cells = rows["TOTAL", total["protocol"]]
        assert cells[0] == f"{total['successes']}/{total['runs']}"
        assert [int(c.replace(",", "")) for c in cells[1:8]] == [total["metrics"][n] for n in order]
    assert "Trade-offs:" in table and "text vs function_calling: prompt tokens ×" in table
    assert "Failed runs:" in table
    # One progress line per run on stderr.
    assert len(re.findall(r"^\[\s*\d+/26\]", scripted_run["progress"], re.M)) == 26


def test_png_chart(scripted_run: dict[str, Any]) -> None:
    require_module("matplotlib", PLOT, PLOT_HINT, module_level=False)
    png = scripted_run["out"] / "comparison.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_no_png_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    tasks = load_tasks(only=["weather_single"])
    report = run_comparison(tasks, [Target("scripted", "text", scripted=True)], source="scripted")
    written = write_outputs(report, tmp_path)
    assert sorted(p.name for p in written) == [
        "comparison.csv",
        "comparison.json",
        "comparison.txt",
    ]


def test_scripted_runs_repeat_exactly() -> None:
    tasks = load_tasks(only=["chained_fahrenheit", "missing_approver"])
    targets = [Target("scripted", p, scripted=True) for p in PROTOCOLS]

    def figures() -> list[tuple[Any, ...]]:
        report = run_comparison(tasks, targets, CompareSettings(), source="scripted")
        return [
            (r.task, r.protocol, r.success, r.metrics.llm_calls, r.metrics.prompt_tokens, r.repairs)
            for r in report.runs
        ]

    assert figures() == figures()


def test_script_too_short_is_a_configuration_error(tmp_path: Path) -> None:
    data = {**GOOD, "scripted": {"text": ["Thought: x\nAction: get_weather\nAction Input: {}"]}}
    task = load_task(_write(tmp_path, data))
    with pytest.raises(ConfigurationError, match=r"task t \(text\): .* no reply left"):
        run_comparison([task], [Target("scripted", "text", scripted=True)])
    with pytest.raises(ConfigurationError, match="no scripted function_calling replies"):
        run_comparison([task], [Target("scripted", "function_calling", scripted=True)])


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("the cat") == 2
    assert estimate_tokens("weather") == 2  # seven letters: two tokens
    assert estimate_tokens("1234567") == 3  # digits in threes
    assert estimate_tokens("北京天气") == 4  # one per CJK character
    assert estimate_tokens('{"a": 1}') == 7


# --- against an endpoint ------------------------------------------------------------------------


def _responder(body: dict[str, Any]) -> dict[str, Any]:
    """Function calling when the request has tools; the text protocol otherwise."""
    messages = body["messages"]
    if body.get("tools"):
        if any(m["role"] == "tool" for m in messages):
            return completion("Paris: overcast, 14°C.", model=body["model"])
        return tool_calls_completion(("get_weather", {"location": "Paris"}), model=body["model"])
    if any("<observation>" in (m.get("content") or "") for m in messages[1:]):
        return completion("Thought: done\nFinal Answer: Paris is 14°C.", model=body["model"])
    return completion(
        'Thought: look it up\nAction: get_weather\nAction Input: {"location": "Paris"}',
        completion_tokens=9,
        model=body["model"],
    )


def test_compare_against_an_endpoint_with_two_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_KEY", "sk-mock-0123456789")
    with ScriptedServer(default=_responder) as server:
        code = main(
            [
                "compare",
                "--base-url",
                server.base_url,
                "--api-key-env",
                "MOCK_KEY",
                "--model",
                "model-a",
                "--model",
                "model-b",
                "--task",
                "weather_single",
                "--seed",
                "7",
                "--out",
                str(tmp_path),
                "--no-plot",
            ]
        )
        sent = list(server.requests)
    out = capsys.readouterr().out
    assert code == 0
    assert "model-a" in out and "model-b" in out
    assert {r["model"] for r in sent} == {"model-a", "model-b"}
    assert {r["seed"] for r in sent} == {7} and {r["temperature"] for r in sent} == {0.0}
    assert {r["max_tokens"] for r in sent} == {256}
    assert sum(1 for r in sent if r.get("tools")) == 4  # two per model under function calling
    data = json.loads((tmp_path / "comparison.json").read_text("utf-8"))
    assert not (tmp_path / "comparison.png").exists()
    for run in data["runs"]:
        assert run["success"], run["failures"]
        # The server's own usage (10 prompt tokens a reply; 5 or 9 completion tokens).
        assert run["metrics"]["prompt_tokens"] == 10 * run["metrics"]["llm_calls"]
        expected = 5 + 5 if run["protocol"] == "function_calling" else 9 + 5
        assert run["metrics"]["completion_tokens"] == expected


def test_compare_reports_a_bad_key_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from react_engine.testing import MockResponse

    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-0123456789")

    def deny(body: dict[str, Any]) -> MockResponse:
        return MockResponse(401, {"error": {"message": "Incorrect API key provided"}})

    with ScriptedServer(default=deny) as server:
        code = main(["compare", "--base-url", server.base_url, "--model", "m", "--quiet"])
    err = capsys.readouterr().err
    assert code == 4
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "rejected the API key" in err and "sk-...6789" in err
    assert "sk-wrong-0123456789" not in err
    assert "(task calculator_single, m · function_calling)" in err


def test_scripts_compare_protocols_calls_the_same_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        sys,
        "argv",
        ["compare_protocols.py", "--scripted", "--task", "no_tool_capital", "--quiet"],
    )
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "scripts" / "compare_protocols.py"), run_name="__main__")
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "no_tool_capital" in out and "TOTAL" in out


def test_format_report_with_several_models() -> None:
    tasks = load_tasks(only=["no_tool_capital"])
    report = run_comparison(
        tasks,
        [Target("a", "text", scripted=True), Target("b", "function_calling", scripted=True)],
        source="scripted",
    )
    table = format_report(report)
    assert re.search(r"^no_tool_capital\s+a\s+text\s+yes", table, re.M)
    assert re.search(r"^\s+b\s+function_calling\s+yes", table, re.M)
    assert "  a:" in table and "  b:" in table


def test_compare_can_require_a_first_tool_call(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    replay = Transcript.__call__

    def recording(self: Transcript, request: Any) -> Any:
        seen.append(request.tool_choice)
        return replay(self, request)

    monkeypatch.setattr(Transcript, "__call__", recording)
    tasks = [t for t in load_tasks() if t.id == "weather_single"]
    report = run_comparison(
        tasks,
        [Target("gpt-4o-mini", "function_calling", scripted=True)],  # takes "required"
        CompareSettings(tool_choice="required"),
    )
    assert seen == ["required", "auto"]  # reset once the tool ran
    assert report.runs[0].success
    assert "tool_choice required" in format_report(report)
