"""The side-by-side protocol comparison (``react-engine compare``).

* :mod:`.suite`: the tasks (JSON files in ``tasks/``), their checker and their scripted
  transcripts;
* :mod:`.tools`: the fixed-data tools a task may name;
* :mod:`.run`: runs the suite against models and protocols and reports the metrics.
"""

from .run import (
    CompareSettings,
    Metrics,
    Target,
    TaskRun,
    format_report,
    metrics_from_trace,
    run_comparison,
    write_outputs,
)
from .suite import load_tasks

__all__ = [
    "CompareSettings",
    "Metrics",
    "Target",
    "TaskRun",
    "format_report",
    "load_tasks",
    "metrics_from_trace",
    "run_comparison",
    "write_outputs",
]
