"""Deprecated: the batch runner is :mod:`react_engine.harness.runner`, shared by
``eval bfcl`` and ``compare``. Importing this module warns; its names still work."""

from __future__ import annotations

import warnings

from ..harness.runner import (
    LOCAL_RAY_CPUS,
    Job,
    Outcome,
    Progress,
    ResultsFile,
    result_from_record,
    run_jobs,
)

__all__ = [
    "LOCAL_RAY_CPUS",
    "Job",
    "Outcome",
    "Progress",
    "ResultsFile",
    "result_from_record",
    "run_jobs",
]

warnings.warn(
    "react_engine.eval.batch is deprecated: import from react_engine.harness.runner",
    DeprecationWarning,
    stacklevel=2,
)
