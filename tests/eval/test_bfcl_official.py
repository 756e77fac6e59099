"""Our checker against BFCL's own, on thousands of generated answers.

The official ``ast_checker`` is imported from the pinned ``bfcl-eval`` wheel. Its module
pulls in the model registry (``bfcl_eval.constants.model_config``, which imports every
model SDK); a stand-in for that one module is put in ``sys.modules`` while it loads: the
checker reads it only to ask whether a model's function names had their dots replaced,
and the stand-in answers "no" (we map names back to BFCL's before checking).

The candidates are made from every case of the AST categories (the live ones included) by
mutations that probe each grading rule: accepted values and their alternatives, string
normalisation, ints for floats and floats for ints (top level and array items), items of
the answer's own type, ``[]`` for an optional array, ``any`` values of other types, objects
and lists of objects, missing, extra and unexpected parameters, wrong names, and parallel
calls in every order, those where the pairing decides among them (a call two expected calls
accept, put before the call only the first accepts: BFCL pairs greedily and fails it, a
matching in any order would pass it). Both checkers must give the same verdict on every one.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.parts import BFCL, BFCL_HINT, require_module

from react_engine.eval.bfcl_checker import Call, check_calls, check_one
from react_engine.eval.bfcl_data import CATEGORIES, Case, load_cases

pytestmark = pytest.mark.slow  # thousands of answers through BFCL's own checker

require_module("bfcl_eval", BFCL, BFCL_HINT)

MINIMUM = 5000
"""The differential test compares at least this many candidates."""

PER_CASE = 24
"""Candidates kept per case (a seeded sample of its mutations): about 40,000 in all."""


class _NoDots:
    underscore_to_dot = False


def official_checker() -> Callable[..., dict[str, Any]]:
    """BFCL's ``ast_checker``, loaded with a stand-in for its model registry."""
    stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    stand_in.MODEL_CONFIG_MAPPING = {"stand-in": _NoDots()}  # type: ignore[attr-defined]
    saved = {
        name: sys.modules.get(name)
        for name in (stand_in.__name__, "bfcl_eval.eval_checker.ast_eval.ast_checker")
    }
    sys.modules[stand_in.__name__] = stand_in
    sys.modules.pop("bfcl_eval.eval_checker.ast_eval.ast_checker", None)
    try:
        module = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        language = importlib.import_module("bfcl_eval.constants.enums").Language.PYTHON
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old

    def check(case: Case, calls: list[Call]) -> dict[str, Any]:
        if "irrelevance" in case.category:
            # BFCL's relevance runner: right when the reply decodes to no call.
            return {"valid": not calls}
        output = [{c.name: copy.deepcopy(dict(c.arguments))} for c in calls]
        result: dict[str, Any] = module.ast_checker(
            copy.deepcopy(list(case.functions)),
            output,
            copy.deepcopy(list(case.answers)),
            language,
            CATEGORIES[case.category],
            "stand-in",
        )
        return result

    return check


# --- candidates ------------------------------------------------------------------------------


def _schema(case: Case, function: str) -> dict[str, Any]:
    for f in case.functions:
        if f["name"] == function:
            return dict(f["parameters"].get("properties", {}))
    return {}


def _first_value(values: list[Any]) -> tuple[bool, Any]:
    for v in values:
        if v != "":
            return True, v
    return False, None


def _concrete(value: Any) -> Any:
    """An answer value as a model would write it (objects: the first accepted value of
    each key)."""
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            if isinstance(options, list):
                has, v = _first_value(options)
                if has:
                    out[key] = _concrete(v)
            else:
                out[key] = options
        return out
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _right_call(name: str, accepted: dict[str, list[Any]], rng: random.Random) -> Call:
    args = {}
    for param, values in accepted.items():
        has, v = _first_value(values)
        options = [x for x in values if x != ""]
        if "" in values and (not has or rng.random() < 0.3):
            continue
        if options and rng.random() < 0.4:
            v = rng.choice(options)
        args[param] = _concrete(v)
    return Call(name, args)


def _string_variants(text: str) -> list[Any]:
    return [
        text.upper(),
        text.lower().replace(" ", ""),
        f" {text}.",
        text.replace("'", '"'),
        text.replace("-", " ").replace("_", "."),
        text + "x",
        text[:-1] if len(text) > 1 else "?",
        text.title(),
    ]


def _value_variants(value: Any, schema: dict[str, Any], values: list[Any]) -> list[Any]:
    """Mutations of one argument, each aimed at a grading rule."""
    kind = schema.get("type")
    out: list[Any] = []
    if type(value) is str:
        out += _string_variants(value)
        out += [1, True, [value]]
    elif type(value) is bool:
        out += [not value, int(value), str(value).lower()]
    elif type(value) is int:
        out += [float(value), value + 1, str(value), bool(value), [value]]
    elif type(value) is float:
        out += [int(value), value + 0.5, str(value), round(value)]
        if value.is_integer():
            out.append(int(value))
    elif type(value) is list:
        out += [[], value[::-1], value[:-1], [*value, value[-1]] if value else [1]]
        out.append([float(v) if type(v) is int else v for v in value])
        out.append([int(v) if type(v) is float else v for v in value])
        out.append([str(v) for v in value])
        out.append([v.upper() if type(v) is str else v for v in value])
        out.append(["" if isinstance(v, dict) else v for v in value])
        out.append([{**v, "extra": 1} if isinstance(v, dict) else v for v in value])
        out.append(",".join(str(v) for v in value))
    elif isinstance(value, dict):
        out += [{}, {**value, "extra": "x"}, "a string"]
        for key in value:
            out.append({k: v for k, v in value.items() if k != key})
            v = value[key]
            if type(v) is str:
                out.append({**value, key: v.upper()})
                out.append({**value, key: v + "x"})
            elif type(v) in (int, float):
                out.append({**value, key: v + 1})
                out.append({**value, key: float(v) if type(v) is int else int(v)})
    if kind in ("array", "tuple") and "" in values:
        out.append([])
    if kind == "any":
        out += [0, 1.5, None, ["x"], {"x": 1}, "Any Value"]
    if kind == "float":
        out += [1, 2.5]
    for option in values:
        if option != "" and option is not value:
            out.append(_concrete(option))
    return out


def _candidates(case: Case, rng: random.Random) -> Iterator[list[Call]]:
    if "irrelevance" in case.category:
        yield []
        yield [Call(case.functions[0]["name"] if case.functions else "any_function", {})]
        return
    right = [
        _right_call(name, accepted, rng)
        for answer in case.answers
        for name, accepted in answer.items()
    ]
    yield right
    yield [_right_call(n, a, rng) for answer in case.answers for n, a in answer.items()]
    yield []
    yield [*right, right[0]]
    if len(right) > 1:
        yield right[::-1]
        yield right[:-1]
        yield [right[0], *right[:-1]]
        for order in itertools.islice(itertools.permutations(right), 6):
            yield list(order)
    names = [f["name"] for f in case.functions]
    for i, call in enumerate(right):
        accepted = next(iter(case.answers[i].values()))
        props = _schema(case, call.name)

        def replaced(new: Call, at: int = i) -> list[Call]:
            return [new if j == at else c for j, c in enumerate(right)]

        for other in names:
            if other != call.name:
                yield replaced(Call(other, call.arguments))
        yield replaced(Call(call.name.replace(".", "_") + "", call.arguments))
        for param in list(call.arguments):
            yield replaced(Call(call.name, {k: v for k, v in call.arguments.items() if k != param}))
        for param in props:
            if param not in call.arguments:
                filler = _concrete(_first_value(accepted.get(param, [""]))[1]) or "x"
                yield replaced(Call(call.name, {**call.arguments, param: filler}))
        yield replaced(Call(call.name, {**call.arguments, "unexpected_param": 1}))
        for param, value in call.arguments.items():
            schema = props.get(param, {})
            for variant in _value_variants(value, schema, list(accepted.get(param, []))):
                yield replaced(Call(call.name, {**call.arguments, param: variant}))


def _docs(case: Case) -> dict[str, Any]:
    return {f["name"]: f for f in case.functions}


def _fits_both(case: Case, i: int, j: int) -> Call | None:
    """A call that expected calls ``i`` and ``j`` both accept, if their answers share a
    value for every parameter one of them needs (None otherwise)."""
    ((name, first),) = case.answers[i].items()
    ((other, second),) = case.answers[j].items()
    if name != other:
        return None
    args = {}
    for param in {**first, **second}:
        mine, theirs = first.get(param, [""]), second.get(param, [""])
        if "" in mine and "" in theirs:
            continue
        shared = [v for v in mine if v != "" and v in theirs]
        if not shared:
            return None
        args[param] = _concrete(shared[0])
    call, docs = Call(name, args), _docs(case)
    both = check_one(docs, call, case.answers[i]).ok and check_one(docs, call, case.answers[j]).ok
    return call if both else None


def _pairing_candidates(case: Case, rng: random.Random) -> Iterator[list[Call]]:
    """Right answers in which expected call ``j`` is answered by a call ``i`` accepts too,
    placed where call ``i``'s own answer was (and that one moved to ``j``'s place)."""
    if "parallel" not in case.category:
        return
    right = [_right_call(n, a, rng) for answer in case.answers for n, a in answer.items()]
    for i, j in itertools.combinations(range(len(right)), 2):
        shared = _fits_both(case, i, j)
        if shared is not None:
            calls = list(right)
            calls[i], calls[j] = shared, right[i]
            yield calls


def _pairs_in_any_order(case: Case, calls: list[Call]) -> bool:
    """Whether the calls answer a parallel case when paired in any order (not BFCL's rule)."""
    if len(calls) != len(case.answers):
        return False
    docs = _docs(case)
    fits = [[check_one(docs, call, answer).ok for call in calls] for answer in case.answers]
    if not all(any(row) for row in fits):
        return False
    return any(
        all(row[k] for row, k in zip(fits, order, strict=True))
        for order in itertools.permutations(range(len(calls)))
    )


def all_candidates() -> Iterator[tuple[Case, list[Call]]]:
    rng = random.Random(2503)
    for case in load_cases(list(CATEGORIES)):
        every = list(_candidates(case, rng))
        kept = every[:1] + rng.sample(every[1:], min(PER_CASE - 1, len(every) - 1))
        kept += _pairing_candidates(case, rng)  # few, and all kept
        for calls in kept:
            yield case, calls


def test_our_checker_agrees_with_bfcls_on_every_generated_answer() -> None:
    official = official_checker()
    compared = raised = 0
    verdicts: dict[str, list[int]] = {}
    rules_hit: set[str] = set()
    paired_greedily = 0  # answers BFCL fails that a pairing in any order would pass
    disagreements: list[str] = []
    for case, calls in all_candidates():
        try:
            theirs = official(case, calls)
        except Exception:  # BFCL's checker raises on a few malformed inputs: not comparable
            raised += 1
            continue
        ours = check_calls(case.category, case.functions, calls, case.answers)
        compared += 1
        tally = verdicts.setdefault(case.category, [0, 0])
        tally[bool(theirs["valid"])] += 1
        if not theirs["valid"]:
            rules_hit.add(str(theirs.get("error_type", "irrelevance")))
            if "parallel" in case.category and _pairs_in_any_order(case, calls):
                paired_greedily += 1
        if ours.ok != bool(theirs["valid"]):
            disagreements.append(
                f"{case.id}: ours {ours.ok} ({ours.reason}), BFCL {theirs['valid']} "
                f"({theirs.get('error')}) on {[(c.name, dict(c.arguments)) for c in calls]}"
            )
    assert not disagreements, f"{len(disagreements)} of {compared}:\n" + "\n".join(
        disagreements[:20]
    )
    assert compared >= MINIMUM
    assert raised < compared // 100, f"BFCL's checker raised on {raised} candidates"
    # Every category produced accepted and rejected answers...
    assert set(verdicts) == set(CATEGORIES)
    for category, (rejected, accepted) in verdicts.items():
        assert accepted and (rejected or "irrelevance" in category), (category, verdicts)
    # ...and the rejected ones went through every kind of failure BFCL reports.
    wanted = {
        "simple_function_checker:wrong_func_name",
        "simple_function_checker:missing_required",
        "simple_function_checker:unexpected_param",
        "simple_function_checker:missing_optional",
        "type_error:simple",
        "type_error:nested",
        "value_error:string",
        "value_error:list/tuple",
        "value_error:dict_key",
        "value_error:dict_value",
        "value_error:list_dict_count",
        "value_error:others",
        "parallel_function_checker_no_order:cannot_find_match",
        "parallel_function_checker_no_order:wrong_count",
        "multiple_function_checker:wrong_count",
        "simple_function_checker:wrong_count",
    }
    assert wanted <= rules_hit, sorted(wanted - rules_hit)
    assert paired_greedily >= 5, paired_greedily  # the pairing rule was put to the test (10)


def test_the_official_checker_is_loaded_without_its_model_registry() -> None:
    official_checker()
    assert "bfcl_eval.constants.model_config" not in sys.modules
