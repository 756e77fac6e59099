"""The README's embedded-model block, as pasted, against the real local model.

tests/api/test_readme.py runs every README block with a stand-in for ``local_server()``; this
runs the one block that starts the embedded model for real: the server process, the
agent, a run and the printed answer. The block makes the first step call the tool, so the
answer must carry what the tool returned (the condition or the temperature): the 135M
model cannot know either otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_examples.run_code
from pytest_examples import EvalExample, find_examples

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_embedded_model_block_runs_as_pasted(
    local_model_path: Path,  # skips (or fails under CI) without the local extra
    eval_example: EvalExample,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    (block,) = [e for e in find_examples(README) if "with local_server() as" in e.source]
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "REACT_ENGINE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    # See tests/api/test_readme.py: pytest-examples' rebuilt tracebacks break pytest on 3.11.
    monkeypatch.setattr(pytest_examples.run_code, "create_example_traceback", lambda *a: None)
    eval_example.run(block, rewrite_assertions=False)
    answer, *calls = capfd.readouterr().out.strip().splitlines()
    assert answer != "None", "the block printed no answer"
    assert calls and calls[0].startswith("get_weather {"), calls
    assert "overcast" in answer.lower() or "14" in answer, answer
