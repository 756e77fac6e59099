"""The ``dbos`` extra: ``make test`` installs it, and a plain ``pytest`` without the
package skips the DBOS tests naming the extra (fails them under
``REACT_ENGINE_REQUIRE_ALL``, as for every optional part: tests/support/parts.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # pytest in subprocesses

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = (
    "import sys, pytest; sys.modules['dbos'] = None; "  # the package, as if not installed
    "sys.exit(pytest.main(['-q', '-rs', '-n', '0', '-p', 'no:cacheprovider', "
    "'tests/integrations/test_dbos_recovery.py']))"
)


def test_make_installs_the_dbos_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["dbos"] == ["dbos>=3.4"]
    install = re.search(
        r"pip install --quiet -e '\.\[([a-z,]+)\]'", (ROOT / "Makefile").read_text()
    )
    assert install is not None and "dbos" in install.group(1).split(",")


@pytest.mark.parametrize("require_all", ["", "1"])
def test_without_the_package_the_dbos_tests_skip_naming_the_extra(require_all: str) -> None:
    env = {**os.environ, "REACT_ENGINE_REQUIRE_ALL": require_all}
    proc = subprocess.run(
        [sys.executable, "-c", HIDDEN], cwd=ROOT, env=env, capture_output=True, text=True
    )
    said = "the dbos extra is not available: dbos is not installed (pip install -e '.[dbos]')"
    assert said in proc.stdout
    if require_all:
        assert proc.returncode != 0 and "REACT_ENGINE_REQUIRE_ALL is set" in proc.stdout
    else:
        # Skipped at collection: pytest's "no tests ran" (5) for this file alone.
        assert proc.returncode in (0, 5) and "1 skipped" in proc.stdout
