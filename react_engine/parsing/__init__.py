"""Tolerant parsing of model output: text ReAct replies and broken JSON.

* :func:`parse_react` reads one Thought/Action/Observation reply into a
  :class:`~react_engine.types.ParsedStep`, reporting every tolerance it applied.
* :func:`read_think` reads a reply's reasoning (think blocks), for every protocol.
* :func:`cut_reply` is its first stage: cut where the model started inventing.
* :func:`repair_json` decodes the JSON a model meant, reporting every repair.

All patterns live in :mod:`react_engine.parsing.patterns`.
"""

from .cut import cut_reply
from .json_repair import JSON_REPAIR_CODES, RepairResult, decode_prefix, repair_json
from .react import EXPECTED_STEP, PARSE_REPAIR_CODES, parse_react
from .think import Thinking, read_think

__all__ = [
    "EXPECTED_STEP",
    "JSON_REPAIR_CODES",
    "PARSE_REPAIR_CODES",
    "RepairResult",
    "Thinking",
    "cut_reply",
    "decode_prefix",
    "parse_react",
    "read_think",
    "repair_json",
]
