"""The sample reports, and a real browser to look at them: the browser tests
(``tests/report/``) load these pages, and ``docs/reports.md``'s pictures are taken of them
(``make screenshots``: ``python -m tests.support.reports docs/images``).

Every sample is a real run of the engine on a scripted model (no server): a weather
question under the text protocol (a call to a tool that does not exist, refused; a call
whose arguments needed lossless repairs; a final answer), the comparison's own task
suite with its scripted transcripts, and BFCL cases replayed from the replies recorded
in ``fixtures/bfcl`` (a source checkout and the BFCL data are needed for that one).
``hostile=True`` adds a reply that tries to run a script (:data:`HOSTILE`): in a report it
must stay text.

Headless Chromium is Debian's ``chromium`` (``apt-get install chromium``; ``make test``
installs it when missing). Each call starts it once on a ``file://`` page, with a profile
of its own in a temporary directory and every background service off (no network is
needed or used), and waits for it to exit: ``--dump-dom`` prints the page's DOM as the
browser built it (after any script on it ran), ``--screenshot`` writes a PNG of the window.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from react_engine.compare.run import CompareSettings, Report, Target, run_comparison
from react_engine.compare.suite import ScriptReply, Task, Transcript, load_tasks
from react_engine.errors import ConfigurationError
from react_engine.eval.bfcl import run_bfcl
from react_engine.eval.bfcl_data import load_cases
from react_engine.eval.bfcl_recording import default_recordings, load_recording
from react_engine.eval.bfcl_report import Report as BfclReport
from react_engine.report import bfcl_html, comparison_html
from react_engine.run.agent import Agent
from react_engine.testing import ScriptedModel
from react_engine.testing.tools import calculator, get_weather
from react_engine.types import ModelResponse, RunResult, Usage

HOSTILE_ID = "pwned"
HOSTILE = (
    "<script>document.title = 'pwned'; document.body.insertAdjacentHTML('beforeend', "
    "'<p id=\"pwned\">the script ran</p>');</script><img src=x onerror=\"document.title='pwned'\">"
)
"""A reply that would change the page's title and add an element ``#pwned`` if a report
let it run."""

QUESTION = "What's the weather in Paris, in Fahrenheit?"


def _replies(hostile: bool) -> list[ScriptReply]:
    texts = [
        'Thought: I will search the web for it.\nAction: web_search\nAction Input: {"query": '
        '"weather in Paris"}',
        "Thought: There is no web_search tool; get_weather gives the weather.\n"
        "Action: get_weather\nAction Input: {'location': 'Paris',}",
        'Thought: 14°C in Fahrenheit.\nAction: calculator\nAction Input: {"expression": '
        '"14 * 9 / 5 + 32"}',
        "Thought: I now know the final answer\nFinal Answer: Paris is overcast, 14°C "
        "(57.2°F), humidity 72%." + (f" {HOSTILE}" if hostile else ""),
    ]
    return [ScriptReply(content=t) for t in texts]


def run_result(*, hostile: bool = False) -> RunResult:
    """The weather run: four steps, the first call refused (no such tool)."""
    transcript = Transcript(_replies(hostile), label="the sample run")
    agent = Agent(
        "sample-model", [get_weather, calculator], protocol="text", client=ScriptedModel(transcript)
    )
    return agent.run(QUESTION)


def _hostile_task() -> Task:
    return Task.model_validate(
        {
            "id": "hostile_reply",
            "covers": "a reply that tries to run a script in the report",
            "question": "What's the weather in Paris?",
            "tools": ["get_weather"],
            "check": {"answer_contains": ["14"], "must_call": ["get_weather"], "max_steps": 3},
            "scripted": {
                protocol: [
                    f"Thought: {HOSTILE}\nAction: get_weather\nAction Input: "
                    '{"location": "Paris"}',
                    f"Thought: I now know the final answer\nFinal Answer: {HOSTILE} 14°C",
                ]
                for protocol in ("function_calling", "text")
            },
        }
    )


def comparison_report(
    *, hostile: bool = False, protocols: Sequence[str] = ("function_calling", "text")
) -> Report:
    """The comparison's own suite under ``protocols``, on its scripted transcripts."""
    tasks = load_tasks()
    if hostile:
        tasks.append(_hostile_task())
    targets = [Target("scripted", p, scripted=True) for p in protocols]
    return run_comparison(tasks, targets, CompareSettings(), source="scripted")


def bfcl_report(
    *,
    hostile: bool = False,
    categories: Sequence[str] = ("simple", "multiple", "irrelevance"),
    limit: int = 4,
    directory: Path | None = None,
) -> BfclReport:
    """The first ``limit`` cases of ``categories``, replayed from the recorded replies of
    every protocol recorded in ``directory`` (default: ``fixtures/bfcl``)."""
    where = directory or default_recordings("the sample BFCL report")
    protocols = ["function_calling", "text", "structured"]
    recorded = {}
    meta: dict[str, object] = {}
    for protocol in protocols:
        meta, recorded[protocol] = load_recording(where, protocol)
    cases = load_cases(list(categories), limit=limit)
    if hostile:  # the first case's text reply tries to run a script
        usage = Usage(100, 20, 120, 0, 1)
        recorded["text"][cases[0].id] = ModelResponse(
            content=f"Thought: {HOSTILE}\nFinal Answer: {HOSTILE}", usage=usage
        )
    return run_bfcl(
        cases,
        protocols,
        recorded=recorded,
        model=str(meta.get("model", "scripted")),
        source=f"recorded replies in {where}",
    )


# --- the browser ---

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""The names headless Chromium goes by on ``PATH``, in the order they are tried
(``$REACT_ENGINE_CHROMIUM`` names one first)."""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def find_chromium() -> str | None:
    """The Chromium executable (``$REACT_ENGINE_CHROMIUM`` first), or ``None``."""
    given = os.environ.get("REACT_ENGINE_CHROMIUM", "").strip()
    for name in (given, *NAMES) if given else NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(page: Path, *args: str, timeout: float) -> str:
    exe = find_chromium()
    if exe is None:
        raise ConfigurationError(
            "headless Chromium is not installed (apt-get install chromium, or name it in "
            "$REACT_ENGINE_CHROMIUM)"
        )
    with tempfile.TemporaryDirectory(prefix="react-engine-chromium-") as profile:
        command = [exe, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ConfigurationError(f"{exe} exited with {done.returncode} on {page}:\n{tail}")
    return done.stdout


def dump_dom(page: Path, *, timeout: float = 120.0) -> str:
    """The DOM Chromium built from the HTML file ``page``, serialised."""
    return _run(page, "--dump-dom", timeout=timeout)


def screenshot(
    page: Path, out: Path, *, width: int = 1200, height: int = 1400, timeout: float = 120.0
) -> Path:
    """A PNG of ``page`` in a ``width`` × ``height`` window, written to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(page, f"--screenshot={out.resolve()}", f"--window-size={width},{height}", timeout=timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise ConfigurationError(f"Chromium wrote no screenshot of {page}")
    return out


# --- the pictures ---

KINDS: dict[str, Callable[[bool], str]] = {
    "run": lambda hostile: run_result(hostile=hostile).to_html(),
    "comparison": lambda hostile: comparison_html(comparison_report(hostile=hostile)),
    "bfcl": lambda hostile: bfcl_html(bfcl_report(hostile=hostile)),
}
"""Each kind of report, as the HTML of its sample (``hostile``: with :data:`HOSTILE` in a
reply)."""


def sample_page(kind: str, directory: Path, *, hostile: bool = False) -> Path:
    """Write the sample report of ``kind`` to ``directory/report-<kind>.html``."""
    path = directory / f"report-{kind}.html"
    path.write_text(KINDS[kind](hostile), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0] if args else "docs/images")
    with tempfile.TemporaryDirectory(prefix="react-engine-reports-") as tmp:
        for kind in KINDS:
            page = sample_page(kind, Path(tmp))
            shot = screenshot(page, out / f"report-{kind}.png", width=1200, height=1300)
            print(f"wrote {shot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
