"""Packaging facts that other files rely on."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import react_engine
from react_engine.cli import main
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
        "zh",
    ]


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


# --- one version source ---------------------------------------------------------------------


def test_the_version_is_written_once_in_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"] == {"path": "react_engine/__init__.py"}
    source = (ROOT / "react_engine" / "__init__.py").read_text()
    assert re.findall(r'^__version__ = "([^"]+)"$', source, re.M) == [react_engine.__version__]


def test_installed_metadata_has_the_package_version() -> None:
    assert react_engine.__version__ == importlib.metadata.version("react-engine")


def test_cli_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"react-engine {react_engine.__version__}"


# --- the license ------------------------------------------------------------------------------


def test_license_is_mit_and_declared() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the react-engine authors\n")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    assert "/LICENSE" in pyproject["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
