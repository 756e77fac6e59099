"""Benchmarks run through the engine: ``react-engine eval bfcl`` (:mod:`.bfcl`)."""

from .bfcl import PROTOCOLS, Report, format_report, run_bfcl
from .bfcl_checker import Call, Verdict, check_calls
from .bfcl_data import CATEGORIES, Case, case_tools, load_cases, to_json_schema

__all__ = [
    "CATEGORIES",
    "PROTOCOLS",
    "Call",
    "Case",
    "Report",
    "Verdict",
    "case_tools",
    "check_calls",
    "format_report",
    "load_cases",
    "run_bfcl",
    "to_json_schema",
]
