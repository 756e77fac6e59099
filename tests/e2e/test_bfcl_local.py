"""``react-engine eval bfcl`` against the real embedded model: the live path, end to end.

The scores are not asserted (they depend on the CPU's kernels); the recorded set in
``fixtures/bfcl`` pins them for the scripted run (tests/eval/test_bfcl.py). Here: every case gets
one real request under each protocol, the replies are recorded, and replaying the recording
gives the same table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from react_engine.cli import main
from react_engine.local import LocalEndpoint

pytestmark = pytest.mark.e2e


def test_eval_bfcl_runs_live_and_replays_the_same(
    local_endpoint: LocalEndpoint,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", local_endpoint.api_key)
    args = ["eval", "bfcl", "--categories", "simple", "irrelevance", "--limit", "1", "--quiet"]
    live_args = ["--base-url", local_endpoint.base_url, "--model", local_endpoint.model]
    code = main([*args, *live_args, "--record", str(tmp_path), "--out", str(tmp_path / "r.json")])
    live = capsys.readouterr().out
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["results"]) == 6
    for result in report["results"]:
        assert result["error"] is None
        assert result["prompt_tokens"] > 0 and result["completion_tokens"] > 0
    code = main([*args, "--scripted", str(tmp_path)])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[1:] == live.splitlines()[1:]
