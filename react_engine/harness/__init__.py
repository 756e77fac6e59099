"""The harness ``react-engine compare`` and ``react-engine eval bfcl`` both run on.

* :mod:`.runner`: every (protocol, case) is a job, run one after another, as concurrent
  async runs, or on Ray, and given back in the run's order; each finished job is appended
  to a results file (JSON lines) that a stopped run resumes from; a progress bar with an
  ETA on a terminal;
* :mod:`.metrics`: figures that add up, field by field, into a table's rows;
* :mod:`.report`: the text grid, JSON and CSV a report is written as;
* :mod:`.settings`: the agent options every case runs with (sampling, network attempts,
  tool choice, a capability cache of its own).

The front ends keep what is theirs: :mod:`react_engine.compare` its tasks, checker and
trace metrics, :mod:`react_engine.eval` its cases, grading and recordings; the
commands are :mod:`react_engine.cli.compare` and :mod:`react_engine.cli.eval`.
"""

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
