"""The side-by-side protocol comparison (``react-engine compare``)."""

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
