"""Tolerant parsing of model output: text ReAct replies (:func:`parse_react`, its first
stage :func:`cut_reply`), reasoning (:func:`read_think`) and broken JSON (:func:`repair_json`),
each reporting every tolerance it applied."""

from .cut import cut_reply
from .json_repair import RepairResult, decode_prefix, repair_json
from .react import EXPECTED_STEP, parse_react
from .think import Thinking, read_think

__all__ = [
    "EXPECTED_STEP",
    "RepairResult",
    "Thinking",
    "cut_reply",
    "decode_prefix",
    "parse_react",
    "read_think",
    "repair_json",
]
