"""Each kind of report (a run, a comparison, a BFCL evaluation) loaded in headless
Chromium from a fixture run, photographed, and checked through the DOM the browser built:
the steps and cases are all there, a refused call is shown as refused, and a reply that
tries to run a script (it would retitle the page and add ``#pwned``) stays text.

Chromium is Debian's ``chromium`` (``make test`` installs it); without it these tests are
skipped naming it (failed under ``REACT_ENGINE_REQUIRE_ALL=1``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from react_engine.report import bfcl_html, comparison_html
from react_engine.report.run import STATUS
from tests.support import parts, reports
from tests.support.dom import Element, parse
from tests.support.reports import (
    HOSTILE,
    HOSTILE_ID,
    bfcl_report,
    comparison_report,
    dump_dom,
    find_chromium,
    run_result,
    screenshot,
)

pytestmark = pytest.mark.slow  # Chromium runs as a subprocess

REFUSED = {status for status, (cls, _) in STATUS.items() if cls == "refused"}


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    if find_chromium() is None:
        parts.missing(parts.CHROMIUM, f"no chromium on PATH: {parts.CHROMIUM_HINT}")


def _load(page: str, path: Path) -> tuple[Element, str]:
    """The page in the browser: the DOM it built (scripts, if any, have run), and a
    screenshot checked to be a PNG of the window's size."""
    path.write_text(page, encoding="utf-8")
    dom = dump_dom(path)
    shot = screenshot(path, path.with_suffix(".png"), width=1000, height=800)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1000, 800)
    assert len(data) > 20_000  # a drawn page, not an empty window
    return parse(dom), dom


def _script_did_not_run(tree: Element, dom: str, title: str) -> None:
    assert tree.by_id(HOSTILE_ID) is None
    titles = tree.find_all("head")[0].find_all("title")  # the page's (SVG has its own)
    assert [t.text() for t in titles] == [title]
    assert not tree.find_all("script") and not tree.find_all("img")
    assert "the script ran" not in tree.text().replace(HOSTILE, "")
    assert any(HOSTILE in pre.text() for pre in tree.find_all("pre"))  # shown as text


def test_a_run_report_in_the_browser(tmp_path: Path) -> None:
    result = run_result(hostile=True)
    tree, dom = _load(result.to_html(), tmp_path / "run.html")
    _script_did_not_run(tree, dom, f"react-engine run: {result.question}")
    steps = tree.find_all("li", cls="step")
    assert len(steps) == len(result.steps)
    refused = [a for a in result.tool_calls if a.status in REFUSED]
    shown = tree.find_all("div", cls="call-refused")
    assert refused and len(shown) == len(refused)
    for action, call in zip(refused, shown, strict=True):
        assert call.attrs["data-tool"] == action.tool
        badge = call.find_all("span", cls="badge")[0].text()
        assert badge.startswith("refused")
        assert action.observation in call.text()


def test_a_comparison_report_in_the_browser(tmp_path: Path) -> None:
    report = comparison_report(hostile=True)
    tree, dom = _load(comparison_html(report), tmp_path / "comparison.html")
    title = tree.find_all("h1")[0].text()
    _script_did_not_run(tree, dom, title)
    sections = tree.find_all("section", cls="run-report")
    assert len(sections) == len(report.runs)
    any_refused = False
    for run, section in zip(report.runs, sections, strict=True):
        steps = [r for r in run.trace if r.get("type") == "step"]
        assert len(section.find_all("li", cls="step")) == len(steps)
        refused = [a for s in steps for a in s["actions"] if a["status"] in REFUSED]
        shown = section.find_all("div", cls="call-refused")
        assert [c.attrs["data-tool"] for c in shown] == [a["tool"] for a in refused]
        any_refused = any_refused or bool(refused)
        cell = tree.find_all("td", data_task=run.task, data_protocol=run.protocol)[0]
        assert cell.find_all("a")[0].attrs["href"] == "#" + section.attrs["id"]
        assert cell.find_all("a")[0].text() == ("solved" if run.success else "FAILED")
    assert any_refused


def test_a_bfcl_report_in_the_browser(tmp_path: Path) -> None:
    parts.require_module("bfcl_eval", parts.BFCL, parts.BFCL_HINT, module_level=False)
    report = bfcl_report(hostile=True)
    tree, dom = _load(bfcl_html(report), tmp_path / "bfcl.html")
    _script_did_not_run(tree, dom, tree.find_all("h1")[0].text())
    cases = list(dict.fromkeys(r.case for r in report.results))
    assert len(tree.find_all("tr", cls="case-row")) == len(cases)
    details = tree.find_all("section", cls="case")
    assert len(details) == len(report.results)
    for result in report.results:
        cell = tree.find_all("td", data_case=result.case, data_protocol=result.protocol)[0]
        expected = "pass" if result.correct else ("decode" if result.decode_failure else "fail")
        assert expected in cell.classes
        section = tree.by_id(cell.find_all("a")[0].attrs["href"][1:])
        assert section is not None and result.reason in section.text()
        for call in result.calls:
            assert call["name"] in section.text()
        if result.reply:  # what the model wrote, as the protocol kept it
            assert result.reply in section.text()
    assert any(r.correct for r in report.results) and not all(r.correct for r in report.results)
    assert any(r.reply for r in report.results)


def test_the_docs_pictures_are_made_by_the_sample_pages(tmp_path: Path) -> None:
    parts.require_module("bfcl_eval", parts.BFCL, parts.BFCL_HINT, module_level=False)
    assert reports.main([str(tmp_path)]) == 0
    docs = Path(__file__).resolve().parents[2] / "docs" / "images"
    for kind in reports.KINDS:
        made = (tmp_path / f"report-{kind}.png").read_bytes()
        kept = (docs / f"report-{kind}.png").read_bytes()
        # The same window as the picture kept in docs/ (its pixels change with the date
        # the page prints and the fonts installed, so they are not compared).
        assert made[:8] == kept[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", made[16:24]) == struct.unpack(">II", kept[16:24])
