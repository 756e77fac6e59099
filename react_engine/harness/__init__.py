"""The harness ``react-engine compare`` and ``react-engine eval bfcl`` both run on:
:mod:`.runner` (jobs run in order, concurrently or on Ray, resumable), :mod:`.metrics`
(figures that add up), :mod:`.report` (grid, JSON, CSV) and :mod:`.settings` (the agent
options every case runs with)."""

from .metrics import Figures, pct, per
from .report import csv_text, grid, json_text, write_text
from .runner import Job, Progress, ResultsFile, run_cases, run_jobs
from .settings import RunSettings, agent_options

__all__ = [
    "Figures",
    "Job",
    "Progress",
    "ResultsFile",
    "RunSettings",
    "agent_options",
    "csv_text",
    "grid",
    "json_text",
    "pct",
    "per",
    "run_cases",
    "run_jobs",
    "write_text",
]
