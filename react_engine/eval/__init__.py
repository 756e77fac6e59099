"""Benchmarks run through the engine: ``react-engine eval bfcl`` (:mod:`.bfcl`)."""

from .bfcl import DEFAULT_PROTOCOLS, eval_protocols, run_bfcl
from .bfcl_checker import Call, Verdict, check_calls
from .bfcl_data import CATEGORIES, Case, case_tools, load_cases, to_json_schema
from .bfcl_multi_turn import MULTI_TURN_CATEGORIES, MultiTurnCase, load_multi_turn_cases
from .bfcl_prompt import BfclPromptProtocol
from .bfcl_report import Report, bfcl_summary, format_report

__all__ = [
    "CATEGORIES",
    "DEFAULT_PROTOCOLS",
    "MULTI_TURN_CATEGORIES",
    "BfclPromptProtocol",
    "Call",
    "Case",
    "MultiTurnCase",
    "Report",
    "Verdict",
    "bfcl_summary",
    "case_tools",
    "check_calls",
    "eval_protocols",
    "format_report",
    "load_cases",
    "load_multi_turn_cases",
    "run_bfcl",
    "to_json_schema",
]
