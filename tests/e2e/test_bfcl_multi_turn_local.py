"""A BFCL multi-turn case on the real embedded model, under every protocol.

The verdict is not asserted (a 135M model rarely passes, and the replies depend on the
CPU's kernels): the case must run through every turn against BFCL's backends and get
BFCL's verdict, and replaying the recorded replies must give the same records.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from react_engine.eval.bfcl import (
    EvalSettings,
    Recorded,
    eval_protocols,
    run_bfcl,
)
from react_engine.eval.bfcl_multi_turn import load_multi_turn_cases
from react_engine.local import LocalEndpoint

pytestmark = pytest.mark.e2e

CASE = "multi_turn_base_100"
"""Two turns on one backend (the trading bot): the smallest prompt of the category."""


def test_a_multi_turn_case_runs_live_under_every_protocol(
    local_endpoint: LocalEndpoint,
) -> None:
    cases = load_multi_turn_cases(["multi_turn_base"], only=[CASE])
    settings = EvalSettings(max_turn_steps=2, max_tokens=128)
    protocols = eval_protocols()  # every registered protocol, and BFCL's Prompt mode
    assert {"function_calling", "text", "structured", "minimal", "bfcl-prompt"} <= set(protocols)
    record: dict[str, dict[str, Recorded]] = {}
    live = run_bfcl(
        cases,
        protocols,
        endpoint=(local_endpoint.base_url, local_endpoint.api_key),
        model=local_endpoint.model,
        source="embedded",
        settings=settings,
        record=record,
    )
    assert [r.protocol for r in live.results] == list(protocols)
    for result in live.results:
        assert result.error is None, (result.protocol, result.error)
        assert result.requests >= len(cases[0].turns), result.protocol
        assert result.prompt_tokens > 0 and result.completion_tokens > 0
        # Graded: a verdict, with BFCL's reason when it failed.
        assert result.correct == (result.reason == ""), (result.protocol, result.reason)
    replayed = run_bfcl(
        cases,
        protocols,
        recorded=record,
        model=live.model,
        settings=settings,
    )
    assert [asdict(r) for r in replayed.results] == [asdict(r) for r in live.results]
