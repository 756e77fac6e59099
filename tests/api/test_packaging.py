"""Packaging facts that other files rely on, and the built wheel and sdist themselves."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from support.parts import missing

import react_engine
from react_engine.cli import main
from react_engine.local import PORTABLE_CMAKE_ARGS

ROOT = Path(__file__).resolve().parents[2]


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


def test_readme_gives_the_portable_build_flags() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in readme
    assert "pip install '.[local]'" in readme  # from a clone: not on an index yet


def _generated_pages() -> list[str]:
    """The docs pages scripts/docs_hooks.py makes from files outside docs/, each from a file
    that exists."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert all(source.is_file() for source in hooks.GENERATED.values())
    return list(hooks.GENERATED)


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
)
def test_relative_links_point_at_files_that_exist(page: str) -> None:
    path = ROOT / page
    links = [t for t in _LINK.findall(path.read_text()) if "://" not in t]
    made = {ROOT / "docs" / name for name in _generated_pages()}  # when the site is built
    missing = [t for t in links if not (path.parent / t).exists() and path.parent / t not in made]
    assert not missing, f"{page} links to missing files: {missing}"


# --- one version source ---------------------------------------------------------------------


def test_the_version_is_written_once_in_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"] == {"path": "react_engine/version.py"}
    source = (ROOT / "react_engine" / "version.py").read_text()
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


# --- the built wheel and sdist ---------------------------------------------------------------


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel and sdist of this source tree, built by hatchling's PEP 517 hooks (what
    ``pip wheel`` and ``python -m build`` call), in a child process, into a temp dir."""
    probe = subprocess.run([sys.executable, "-c", "import hatchling.build"], capture_output=True)
    if probe.returncode != 0:
        reason = "hatchling (in the dev extra) is not installed: cannot build the wheel"
        missing("hatchling", reason)
    out = tmp_path_factory.mktemp("dist")
    code = textwrap.dedent(
        """
        import sys
        import hatchling.build as backend
        print(backend.build_wheel(sys.argv[1]))
        print(backend.build_sdist(sys.argv[1]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    wheel, sdist = done.stdout.split()
    return {"wheel": out / wheel, "sdist": out / sdist}


def _source_files(folder: str, pattern: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ROOT / folder).glob(pattern))}


@pytest.mark.slow  # builds the wheel and sdist
def test_the_wheel_ships_the_tasks_prompts_and_license(dist: dict[str, Path]) -> None:
    version = react_engine.__version__
    assert dist["wheel"].name == f"react_engine-{version}-py3-none-any.whl"
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())

        def shipped(prefix: str, suffix: str) -> dict[str, bytes]:
            return {
                n[len(prefix) :]: whl.read(n)
                for n in sorted(names)
                if n.startswith(prefix) and n.endswith(suffix) and "/" not in n[len(prefix) :]
            }

        tasks = shipped("react_engine/compare/tasks/", ".json")
        assert len(tasks) >= 12
        assert tasks == _source_files("react_engine/compare/tasks", "*.json")
        assert shipped("react_engine/prompts/", ".toml") == _source_files("prompts", "*.toml")
        assert {
            "react_engine/transport/capabilities.json",
            "react_engine/cli/dry_run.json",
            "react_engine/report/page.css",
            "react_engine/py.typed",
            "react_engine/local/server.py",
        } <= names
        info = f"react_engine-{version}.dist-info"
        assert whl.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = whl.read(f"{info}/METADATA").decode()
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    assert f"\nVersion: {version}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    assert "react-engine = react_engine.cli:main" in entry_points
    assert not any(n.startswith(("fixtures/", "tests/", "react_engine/fixtures")) for n in names)


@pytest.mark.slow  # builds the wheel and sdist
def test_the_sdist_has_what_a_wheel_build_needs(dist: dict[str, Path]) -> None:
    top = f"react_engine-{react_engine.__version__}/"
    with tarfile.open(dist["sdist"]) as sdist:
        names = {n.removeprefix(top) for n in sdist.getnames()}
    expected = {
        "LICENSE",
        "README.md",
        "pyproject.toml",
        "react_engine/transport/capabilities.json",
        "react_engine/cli/dry_run.json",
        "react_engine/report/page.css",
    }
    expected |= {
        f"react_engine/compare/tasks/{n}"
        for n in _source_files("react_engine/compare/tasks", "*.json")
    }
    expected |= {f"prompts/{n}" for n in _source_files("prompts", "*.toml")}
    assert expected <= names
    assert not any(n.startswith(("fixtures/", "tests/", "docs/", "bench/")) for n in names)


@pytest.mark.slow  # builds the wheel and sdist
def test_the_installed_wheel_runs_compare_without_the_source_tree(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    # Unpacking a pure wheel into a folder is what installing it does; the child imports
    # react_engine from there, with a working directory outside the source tree.
    site = tmp_path / "site"
    with zipfile.ZipFile(dist["wheel"]) as whl:
        whl.extractall(site)
    run = tmp_path / "run"
    run.mkdir()
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import react_engine
        from react_engine.cli import main
        from react_engine.compare.suite import default_tasks_dir, load_tasks
        from react_engine.protocols.prompts import load_template

        assert react_engine.__file__.startswith(sys.argv[1]), react_engine.__file__
        assert str(default_tasks_dir()).startswith(sys.argv[1]), default_tasks_dir()
        assert load_template("zh").source.startswith(sys.argv[1])
        from react_engine.transport.capabilities import default_registry
        assert default_registry().lookup("gpt-4o")[1] != "default"
        print("tasks", len(load_tasks()))
        sys.exit(main(["compare", "--scripted", "--quiet"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        cwd=run,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    n = len(_source_files("react_engine/compare/tasks", "*.json"))
    assert f"tasks {n}\n" in done.stdout
    assert f"{n} tasks" in done.stdout and "TOTAL" in done.stdout
