"""HTML reports of runs, comparisons and BFCL evaluations: one self-contained file each.

* :mod:`.page`: the page (inline styles, no script, no network) and the escaping;
* :mod:`.run`: a run's timeline (``result.to_html()``, ``runs show ID --html FILE``);
* :mod:`.comparison`: ``compare --html FILE``; :mod:`.bfcl`: ``eval bfcl --html FILE``;
* :mod:`.svg`: the bar charts, drawn as inline SVG;
* :mod:`.browser`: headless Chromium, to look at a report (its DOM, a screenshot);
* :mod:`.samples` and :mod:`.screenshots`: the sample reports of ``docs/reports.md`` and
  their pictures (``python -m react_engine.report.screenshots``).
"""

from .bfcl import bfcl_html
from .comparison import comparison_html
from .run import run_html

__all__ = ["bfcl_html", "comparison_html", "run_html"]
