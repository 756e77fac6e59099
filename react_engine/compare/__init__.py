"""The side-by-side protocol comparison (``react-engine compare``).

* :mod:`.suite`: the tasks (JSON files in ``tasks/``), their checker and their scripted
  transcripts;
* :mod:`.tools`: the fixed-data tools a task may name;
* :mod:`.run`: runs the suite against models and protocols and reports the metrics.
"""

from .run import (
    METRICS,
    CompareSettings,
    Metrics,
    Report,
    Target,
    TaskRun,
    Total,
    format_report,
    metrics_from_trace,
    run_comparison,
    write_outputs,
)
from .suite import (
    PROTOCOLS,
    Check,
    ProtocolName,
    ScriptReply,
    Task,
    Transcript,
    check_result,
    default_tasks_dir,
    load_script,
    load_task,
    load_tasks,
    named_protocols,
)
from .tools import TASK_TOOLS

__all__ = [
    "METRICS",
    "PROTOCOLS",
    "TASK_TOOLS",
    "Check",
    "CompareSettings",
    "Metrics",
    "ProtocolName",
    "Report",
    "ScriptReply",
    "Target",
    "Task",
    "TaskRun",
    "Total",
    "Transcript",
    "check_result",
    "default_tasks_dir",
    "format_report",
    "load_script",
    "load_task",
    "load_tasks",
    "metrics_from_trace",
    "named_protocols",
    "run_comparison",
    "write_outputs",
]
