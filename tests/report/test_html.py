"""The HTML reports as files: self-contained, every model text escaped, long texts
folded, the figures and links right; and the ``--html`` options that write them.
(tests/report/test_browser.py loads the same pages in headless Chromium.)"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from react_engine import Agent
from react_engine.cli import main
from react_engine.compare.run import METRICS
from react_engine.report import comparison_html, run_html
from react_engine.report.page import FOLD_CHARS
from react_engine.report.run import STATUS
from react_engine.store import open_store
from react_engine.testing import ScriptedModel
from react_engine.testing.tools import get_weather
from react_engine.types import ModelResponse
from react_engine.wording import Notice, NoticeCode
from tests.support import parts
from tests.support.dom import Element, parse
from tests.support.reports import HOSTILE, comparison_report, run_result

REFUSED = {status for status, (cls, _) in STATUS.items() if cls == "refused"}


def _self_contained(page: str) -> None:
    tree = parse(page)
    assert not tree.find_all("script")  # the reports carry no script at all
    assert not tree.find_all("link") and not tree.find_all("iframe")
    for element in tree.walk():  # nothing is fetched: no URL but the page's own anchors
        for name in ("src", "href", "action", "data"):
            value = element.attrs.get(name)
            assert value is None or value.startswith("#"), (element.tag, name, value)
    policy = tree.find_all("meta", http_equiv="Content-Security-Policy")
    assert policy and "default-src 'none'" in policy[0].attrs["content"]


def _hostile_stays_text(page: str, tree: Element) -> None:
    assert HOSTILE not in page  # never written as markup...
    assert html.escape(HOSTILE, quote=True) in page
    assert any(HOSTILE in e.text() for e in tree.find_all("pre"))  # ...but shown as text
    assert not tree.find_all("img") and tree.by_id("pwned") is None


def test_a_run_page_shows_each_step_call_refusal_and_repair() -> None:
    result = run_result(hostile=True)
    page = result.to_html()
    assert page == run_html(result.trace())
    _self_contained(page)
    tree = parse(page)
    _hostile_stays_text(page, tree)
    steps = tree.find_all("li", cls="step")
    assert len(steps) == len(result.steps)
    for step, shown in zip(result.steps, steps, strict=True):
        assert shown.attrs["data-kind"] == step.kind
        assert f"{step.usage.prompt_tokens:,} prompt" in shown.text()
        calls = shown.find_all("div", cls="call")
        assert [c.attrs["data-tool"] for c in calls] == [a.tool for a in step.actions]
        for action, call in zip(step.actions, calls, strict=True):
            assert action.observation in call.text()  # the engine's wording, word for word
            assert ("call-refused" in call.classes) == (action.status in REFUSED)
            for code in action.repairs:
                assert code in call.text()
    refused = [a for a in result.tool_calls if a.status in REFUSED]
    assert refused  # the sample has a refused call: the check above is not vacuous
    head = tree.find_all("dl", cls="facts")[0].text()
    assert result.protocol in head and result.protocol_reason in head


def test_a_long_observation_folds_and_a_short_one_does_not() -> None:
    long_text = "line of the build log\n" * (FOLD_CHARS // 10)
    model = ScriptedModel(
        [
            ('Action: get_weather\nAction Input: {"location": "Paris"}'),
            "Final Answer: " + long_text,
        ]
    )
    result = Agent("m", [get_weather], protocol="text", client=model).run("weather?")
    tree = parse(result.to_html())
    folded = tree.find_all("details", cls="fold")
    assert any(long_text.strip() in d.text() for d in folded)
    observation = result.steps[0].actions[0].observation
    assert len(observation) < FOLD_CHARS
    assert not any(observation in d.text() for d in folded)
    assert any(observation in p.text() for p in tree.find_all("pre", cls="observation"))


def test_a_comparison_page_links_each_cell_to_its_run_and_draws_the_totals() -> None:
    report = comparison_report(hostile=True)
    page = comparison_html(report)
    _self_contained(page)
    tree = parse(page)
    _hostile_stays_text(page, tree)
    cells = [c for c in tree.find_all("td") if "data-task" in c.attrs]
    assert len(cells) == len(report.runs) == len(report.tasks) * len(report.targets)
    runs = {(r.task, r.protocol): r for r in report.runs}
    for cell in cells:
        run = runs[cell.attrs["data-task"], cell.attrs["data-protocol"]]
        assert ("pass" in cell.classes) == run.success
        target = tree.by_id(cell.find_all("a")[0].attrs["href"][1:])
        assert target is not None
        steps = [r for r in run.trace if r.get("type") == "step"]
        assert len(target.find_all("li", cls="step")) == len(steps)
        for failure in run.failures:
            assert failure in target.text()
    charts = tree.find_all("svg")
    assert len(charts) >= 1 + len(METRICS)
    solved = [float(b.attrs["data-value"]) for b in charts[0].find_all("rect", cls="bar")]
    assert solved == [float(t.successes) for t in report.totals()]


def test_compare_writes_the_page_with_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "comparison.html"
    args = ["compare", "--scripted", "--task", "unknown_tool_web_search", "--task", "chained_todos"]
    assert main([*args, "--quiet", "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    tree = parse(out.read_text(encoding="utf-8"))
    rows = tree.find_all("tr", cls="task-row")
    shown = sorted(r.find_all("th")[0].text() for r in rows)
    assert shown == ["chained_todos", "unknown_tool_web_search"]
    refused = tree.find_all("div", cls="call-refused")
    assert any(c.attrs["data-tool"] == "web_search" for c in refused)


def test_runs_show_writes_a_stored_run_as_a_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    model = ScriptedModel(
        [
            'Action: get_forecast\nAction Input: {"location": "Paris"}',
            'Action: get_weather\nAction Input: {"location": "Paris"}',
            f"Final Answer: 14°C {HOSTILE}",
        ]
    )
    agent = Agent("m", [get_weather], protocol="text", client=model, store=open_store(str(db)))
    result = agent.run("weather in Paris?")
    assert result.run_id is not None
    out = tmp_path / "run.html"
    assert main(["runs", "show", result.run_id, "--store", str(db), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    _self_contained(page)
    tree = parse(page)
    _hostile_stays_text(page, tree)
    assert len(tree.find_all("li", cls="step")) == len(result.steps) == 3
    refused = tree.find_all("div", cls="call-refused")
    assert [c.attrs["data-tool"] for c in refused] == ["get_forecast"]
    assert result.steps[0].actions[0].observation in refused[0].text()
    assert re.search(r"stop reason.*final answer", tree.text(), re.S)


def test_eval_bfcl_writes_the_page_with_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts.require_module("bfcl_eval", parts.BFCL, parts.BFCL_HINT, module_level=False)
    out, data = tmp_path / "bfcl.html", tmp_path / "bfcl.json"
    args = ["eval", "bfcl", "--scripted", "--categories", "simple", "irrelevance", "--limit", "2"]
    assert main([*args, "--quiet", "--out", str(data), "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    _self_contained(page)
    tree = parse(page)
    results = json.loads(data.read_text(encoding="utf-8"))["results"]
    cells = [c for c in tree.find_all("td") if "data-case" in c.attrs]
    assert len(cells) == len(results) == 2 * 2 * 3
    verdicts = {(r["case"], r["protocol"]): r["correct"] for r in results}
    for cell in cells:
        assert ("pass" in cell.classes) == verdicts[
            cell.attrs["data-case"], cell.attrs["data-protocol"]
        ]


def test_the_python_example_of_docs_reports_md_writes_a_run_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "reports.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(doc), "exec"), {})
    tree = parse((tmp_path / "run.html").read_text(encoding="utf-8"))
    steps = tree.find_all("li", cls="step")
    assert [s.attrs["data-kind"] for s in steps] == ["action", "final"]
    assert "14°C, overcast." in steps[1].text()


def test_a_step_notice_and_the_protocol_reason_are_on_the_page() -> None:
    odd = Notice(NoticeCode.USAGE_NOT_OBJECT, value="<b>not</b> a count")
    notice = odd.text()
    model = ScriptedModel([ModelResponse(content="The answer.", events=[odd])])
    result = Agent("m", [get_weather], client=model).run("q")  # protocol="auto"
    assert [n.message for n in result.steps[0].notices] == [notice]
    tree = parse(result.to_html())
    step = tree.find_all("li", cls="step")[0]
    assert [n.text() for n in step.find_all("div", cls="notice")] == [notice]
    assert not step.find_all("b")
    head = tree.find_all("dl", cls="facts")[0].text()
    assert f"{result.protocol} (why: {result.protocol_reason})" in head


def test_an_unusable_reply_and_a_call_read_with_a_guess_show_what_the_engine_said() -> None:
    guessed = 'Thought: x\nAction: get_weather\nAction Input: {location: Paris is nice, "x": 1}'
    model = ScriptedModel(["Thought: let me think", guessed, "Final Answer: ok"])
    result = Agent("m", [get_weather], protocol="text", client=model).run("q")
    unusable, refused, _ = result.steps
    assert unusable.kind == "format_error" and refused.actions[0].lossy
    tree = parse(result.to_html())
    first, second, _ = tree.find_all("li", cls="step")
    assert first.attrs["data-kind"] == "format_error"
    assert any(p.text() == unusable.feedback for p in first.find_all("pre", cls="feedback"))
    assert any(p.text() == unusable.text for p in first.find_all("pre", cls="reply"))
    [call] = second.find_all("div", cls="call")
    assert "call-refused" in call.classes and call.attrs["data-status"] == "invalid_arguments"
    action = refused.actions[0]
    assert [p.text() for p in call.find_all("pre", cls="observation")] == [action.observation]
    assert [p.text() for p in call.find_all("pre", cls="raw-arguments")] == [action.raw_arguments]
    repairs = [li.text() for li in call.find_all("li") if li.find_all("code")]
    assert [r.split(" ")[0] for r in repairs] == action.repairs
    for code, line in zip(action.repairs, repairs, strict=True):
        assert ("lossy" in line) == (code in action.lossy)
