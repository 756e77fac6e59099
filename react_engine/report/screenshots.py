"""The pictures of ``docs/reports.md``: each sample report (:mod:`.samples`) written as
HTML and photographed by headless Chromium (:mod:`.browser`).

``python -m react_engine.report.screenshots [DIR]`` (``make screenshots``) writes
``report-run.png``, ``report-comparison.png`` and ``report-bfcl.png`` to DIR (default:
``docs/images``), with the pages beside them in a temporary directory. The browser tests
load the same pages (``tests/report/``).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from . import samples
from .bfcl import bfcl_html
from .browser import screenshot
from .comparison import comparison_html

__all__ = ["KINDS", "main", "sample_page"]

KINDS: dict[str, Callable[[bool], str]] = {
    "run": lambda hostile: samples.run_result(hostile=hostile).to_html(),
    "comparison": lambda hostile: comparison_html(samples.comparison_report(hostile=hostile)),
    "bfcl": lambda hostile: bfcl_html(samples.bfcl_report(hostile=hostile)),
}
"""Each kind of report, as the HTML of its sample (``hostile``: with :data:`HOSTILE
<react_engine.report.samples.HOSTILE>` in a reply)."""


def sample_page(kind: str, directory: Path, *, hostile: bool = False) -> Path:
    """Write the sample report of ``kind`` to ``directory/report-<kind>.html``."""
    path = directory / f"report-{kind}.html"
    path.write_text(KINDS[kind](hostile), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0] if args else "docs/images")
    with tempfile.TemporaryDirectory(prefix="react-engine-reports-") as tmp:
        for kind in KINDS:
            page = sample_page(kind, Path(tmp))
            shot = screenshot(page, out / f"report-{kind}.png", width=1200, height=1300)
            print(f"wrote {shot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
