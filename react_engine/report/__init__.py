"""HTML reports of runs, comparisons and BFCL evaluations: one self-contained file each.

* :mod:`.page`: the page (inline styles, no script, no network) and the escaping;
* :mod:`.run`: a run's timeline (``result.to_html()``, ``runs show ID --html FILE``);
* :mod:`.comparison`: ``compare --html FILE``; :mod:`.bfcl`: ``eval bfcl --html FILE``;
* :mod:`.svg`: the bar charts, drawn as inline SVG.
"""

from .bfcl import bfcl_html
from .comparison import comparison_html
from .run import run_html

__all__ = ["bfcl_html", "comparison_html", "run_html"]
