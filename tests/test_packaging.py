"""Packaging facts that other files rely on."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from react_engine.local import PORTABLE_CMAKE_ARGS

ROOT = Path(__file__).resolve().parent.parent


def test_makefile_builds_llama_cpp_portably() -> None:
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^LLAMA_CMAKE_ARGS \?= (.+)$", makefile, re.M)
    assert match is not None
    assert match.group(1).strip() == PORTABLE_CMAKE_ARGS
    assert 'CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)"' in makefile


def test_prompts_ship_inside_the_wheel() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    force = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force == {"prompts": "react_engine/prompts"}
    assert sorted(p.stem for p in (ROOT / "prompts").glob("*.toml")) == [
        "classic",
        "function_calling",
        "json",
        "structured",
        "zh",
    ]


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
