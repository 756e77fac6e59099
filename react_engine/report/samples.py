"""Sample reports from scripted runs: the pictures in ``docs/reports.md`` and the pages the
browser tests load come from here.

Every sample is a real run of the engine on a scripted model (no server): a weather
question under the text protocol (a call to a tool that does not exist, refused; a call
whose arguments needed lossless repairs; a final answer), the comparison's own task
suite with its scripted transcripts, and BFCL cases replayed from the replies recorded
in ``fixtures/bfcl`` (a source checkout and the BFCL data are needed for that one).

``hostile=True`` adds a reply that tries to run a script (:data:`HOSTILE`): in a report it
must stay text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..compare.run import CompareSettings, Report, Target, run_comparison
from ..compare.suite import ScriptReply, Task, Transcript, load_tasks
from ..eval.bfcl import run_bfcl
from ..eval.bfcl_data import load_cases
from ..eval.bfcl_recording import default_recordings, load_recording
from ..eval.bfcl_report import Report as BfclReport
from ..run.agent import Agent
from ..testing.tools import calculator, get_weather
from ..types import ModelResponse, RunResult, Usage

__all__ = ["HOSTILE", "HOSTILE_ID", "bfcl_report", "comparison_report", "run_result"]

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
        "sample-model", [get_weather, calculator], protocol="text", client=transcript.model()
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
