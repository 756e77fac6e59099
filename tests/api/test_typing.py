"""The public edges are typed: ``mypy --strict`` on ``tests/api/typechecked/agent_types.py``.

That file is never run; it states what a type checker must infer (``assert_type``) and
which lines it must refuse (``# E: <code>``). The test fails on an inference that changed
(``Agent(output_type=Person).run(...)`` no longer a ``RunResult[Person]``), on a refusal
that vanished (``Agent(max_stesp=3)`` accepted) and on any other error in the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).parents[2]
CHECKED = Path(__file__).parent / "typechecked" / "agent_types.py"


def expected_errors(path: Path) -> set[tuple[int, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {
        (number, match.group(1))
        for number, line in enumerate(lines, 1)
        if (match := re.search(r"# E: ([a-z-]+)$", line))
    }


@pytest.mark.slow  # mypy reads the package and its dependencies: about 30 s
def test_mypy_strict_infers_the_typed_results_and_refuses_misspelt_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)  # the worktree's react_engine and its pyproject.toml
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--enable-error-code=deprecated",
            "--no-incremental",
            "--cache-dir=/dev/null",
            "--hide-error-context",
            "--no-error-summary",
            str(CHECKED.relative_to(ROOT)),
        ]
    )
    assert stderr == ""
    found = {
        (int(line), code)
        for line, code in re.findall(r"^[^:\n]+:(\d+): error: .*\[([a-z-]+)\]$", stdout, re.M)
    }
    expected = expected_errors(CHECKED)
    assert len(expected) >= 4  # the file refuses a misspelt option, a wrong type and result
    assert found == expected, stdout
    assert status == 1
