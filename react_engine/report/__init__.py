"""HTML reports of runs, comparisons and BFCL evaluations: one self-contained file each."""

from .bfcl import bfcl_html
from .comparison import comparison_html
from .run import run_html

__all__ = ["bfcl_html", "comparison_html", "run_html"]
