"""BFCL's multi-turn categories: a conversation with stateful backends, graded by BFCL.

Each turn runs through the agent loop; the wheel's executor runs each call on the case's
own instances, under a model name of our own (removed when the case ends). Arguments reach
the backends only as Python literals under identifier names; any other call is refused.
"""

from __future__ import annotations

import copy
import keyword
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

from ..tools import Tool
from .bfcl_data import BfclDataMissing, case_tools, read_categories, read_lines, wheel

__all__ = [
    "MULTI_TURN_CATEGORIES",
    "Backends",
    "MultiTurnCase",
    "call_string",
    "grade",
    "load_multi_turn_cases",
    "turn_tools",
]

MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
"""BFCL's multi-turn categories (200 cases each), by BFCL's names."""

_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval"
_PROMPTS = "bfcl_eval.constants.default_prompts"


def step_limit() -> int:
    """BFCL's limit on the steps of one turn (``MAXIMUM_STEP_LIMIT``)."""
    return int(wheel(_PROMPTS).MAXIMUM_STEP_LIMIT)


def added_functions_prompt() -> str:
    """What BFCL says as the user when a turn brings the functions held out until then."""
    return str(wheel(_PROMPTS).DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)


@dataclass(frozen=True, slots=True)
class MultiTurnCase:
    """One BFCL multi-turn case."""

    id: str
    category: str
    turns: tuple[str, ...]
    """The user's message of each turn (``""``: a turn that only brings held-out functions)."""
    functions: tuple[Mapping[str, Any], ...]
    """The functions offered from the first turn (BFCL's documents, as shipped)."""
    added: Mapping[int, tuple[Mapping[str, Any], ...]]
    """Functions held out until a turn (``miss_func``), by turn index."""
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    ground_truth: tuple[tuple[str, ...], ...]
    """BFCL's accepted calls of each turn, as Python call strings."""

    def functions_at(self, turn: int) -> list[Mapping[str, Any]]:
        """The functions offered during ``turn``."""
        held = sorted(self.added.items())
        return [*self.functions, *(f for index, fs in held if index <= turn for f in fs)]


def load_multi_turn_cases(
    categories: Sequence[str] = MULTI_TURN_CATEGORIES,
    *,
    limit: int | None = None,
    only: Sequence[str] = (),
) -> list[MultiTurnCase]:
    """The cases of ``categories``: the first ``limit`` of each, or those named in ``only``."""
    docs: dict[str, list[dict[str, Any]]] = {}
    files = {c: c for c in MULTI_TURN_CATEGORIES}
    read = read_categories(categories, files, limit, only)
    return [_case(base, e, category, truth, docs) for category, base, es, truth in read for e in es]


def _case(
    root: Traversable,
    entry: Mapping[str, Any],
    category: str,
    truth: Mapping[str, Any],
    docs: dict[str, list[dict[str, Any]]],
) -> MultiTurnCase:
    case_id = entry["id"]
    if case_id not in truth:
        raise BfclDataMissing(f"BFCL case {case_id} has no ground truth")
    classes = tuple(entry["involved_classes"])
    functions = []
    stems = wheel("bfcl_eval.constants.executable_backend_config").MULTI_TURN_FUNC_DOC_FILE_MAPPING
    for name in classes:
        if name not in stems:
            raise BfclDataMissing(f"BFCL has no function documents for {name}")
        if name not in docs:
            docs[name] = read_lines(root / "multi_turn_func_doc" / stems[name])
        functions += copy.deepcopy(docs[name])
    added: dict[int, tuple[Mapping[str, Any], ...]] = {}
    for index, names in (entry.get("missed_function") or {}).items():
        held = [f for f in functions if f["name"] in names]
        functions = [f for f in functions if f["name"] not in names]
        added[int(index)] = tuple(held)
    if any(m.get("role") != "user" for messages in entry["question"] for m in messages):
        raise BfclDataMissing(f"BFCL case {case_id} has a turn that is not the user's")
    turns = ["\n\n".join(str(m["content"]) for m in messages) for messages in entry["question"]]
    return MultiTurnCase(
        id=case_id,
        category=category,
        turns=tuple(turns),
        functions=tuple(functions),
        added=added,
        initial_config=entry.get("initial_config") or {},
        involved_classes=classes,
        ground_truth=tuple(tuple(t) for t in truth[case_id]),
    )


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def call_string(name: str, arguments: Mapping[str, Any]) -> str | None:
    """``name(key=literal, ...)`` for BFCL's executor; ``None`` for a name no identifier."""
    names = [name, *arguments]
    if not all(_IDENTIFIER.match(n) and not keyword.iskeyword(n) for n in names):
        return None
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


class Backends:
    """A case's backend instances, run by the wheel's executor under a name of our own."""

    def __init__(self, case: MultiTurnCase) -> None:
        self.case = case
        self.model_name = f"react_engine_{uuid.uuid4().hex}"
        self._utils = wheel(f"{_PREFIX}.multi_turn_utils")

    def execute(self, calls: Sequence[str]) -> list[str]:
        results, _ = self._utils.execute_multi_turn_func_call(
            list(calls),
            copy.deepcopy(dict(self.case.initial_config)),
            list(self.case.involved_classes),
            self.model_name,
            self.case.id,
            long_context="long_context" in self.case.category,
            is_evaL_run=False,
        )
        return [str(r) for r in results]

    def close(self) -> None:
        """Drop every instance made under this run's name (the runs' and the grader's)."""
        table = vars(self._utils)
        prefix = re.sub(r"[-./:]", "_", self.model_name)
        for key in [k for k in table if k.startswith(prefix)]:
            del table[key]


def turn_tools(
    functions: Sequence[Mapping[str, Any]], backends: Backends
) -> tuple[list[Tool], dict[str, str]]:
    """The functions as tools that run on ``backends``, and each tool's name back to BFCL's."""

    def runner(name: str) -> Callable[[dict[str, Any]], str]:
        def run(arguments: dict[str, Any]) -> str:
            call = call_string(name, arguments)
            if call is None:
                return "Error during execution: a parameter name is not an identifier"
            (result,) = backends.execute([call])
            return result

        return run

    return case_tools(functions, runner)


def grade(
    case: MultiTurnCase, decoded: Sequence[Sequence[Sequence[str]]], backends: Backends
) -> tuple[bool, str]:
    """BFCL's verdict on the call strings of each step of each turn, and why it failed."""
    if len(decoded) != len(case.ground_truth):
        return False, (
            f"force-terminated: {len(decoded)} turn(s) of {len(case.ground_truth)} completed"
        )
    checker = wheel(f"{_PREFIX}.multi_turn_checker")
    entry = {
        "id": case.id,
        "initial_config": copy.deepcopy(dict(case.initial_config)),
        "involved_classes": list(case.involved_classes),
    }
    try:
        result = checker.multi_turn_checker(
            [[list(step) for step in turn] for turn in decoded],
            [list(turn) for turn in case.ground_truth],
            entry,
            case.category,
            backends.model_name,
        )
    except Exception as exc:  # the grader replays the model's calls: never crash the eval
        return False, f"the grader failed: {type(exc).__name__}: {exc}"
    if result.get("valid"):
        return True, ""
    message = str(result.get("error_message") or result.get("error_type") or "wrong")
    return False, message if len(message) <= 300 else message[:297] + "..."


def calls_json(decoded: Sequence[Sequence[Sequence[str]]]) -> list[dict[str, Any]]:
    """The calls of a multi-turn run for the report: turn, step and call string."""
    return [
        {"name": call.split("(", 1)[0], "arguments": {"turn": t, "step": s, "call": call}}
        for t, turn in enumerate(decoded)
        for s, step in enumerate(turn)
        for call in step
    ]
