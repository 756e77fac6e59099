"""`make docs`: the documentation site builds from docs/ and mkdocs.yml with no warning.

``mkdocs build --strict`` turns every warning into a failure: a page on disk missing from
the nav, a link to a page or an anchor that does not exist, a broken image. The site is
built into a temporary directory, as ``make docs`` builds it into ``site/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.parts import DOCS, DOCS_HINT, require_module

require_module("mkdocs", DOCS, DOCS_HINT)
require_module("material", DOCS, DOCS_HINT)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a child process


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    for page in ("quickstart", "cli", "protocols", "reports", "dbos"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    # The generated page: bench/results.md, as `make bench` last wrote it.
    measured = (tmp_path / "site" / "measurements" / "index.html").read_text(encoding="utf-8")
    assert "Produced by <code>make bench</code>" in measured


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check can fail: the same site with one page linking nowhere does not build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in (ROOT / "docs").rglob("*"):
        if page.is_file():
            (docs / page.relative_to(ROOT / "docs")).parent.mkdir(parents=True, exist_ok=True)
            (docs / page.relative_to(ROOT / "docs")).write_bytes(page.read_bytes())
    (docs / "index.md").write_text("# Home\n\nSee [nowhere](nowhere.md).\n", encoding="utf-8")
    for part in ("scripts/docs_hooks.py", "bench/results.md"):
        (tmp_path / part).parent.mkdir(exist_ok=True)
        (tmp_path / part).write_bytes((ROOT / part).read_bytes())
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), encoding="utf-8")
    done = build(config, tmp_path / "site")
    assert done.returncode != 0
    assert "nowhere.md" in done.stderr
