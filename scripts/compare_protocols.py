"""Side-by-side comparison of the function-calling and text protocols.

The same code as ``react-engine compare`` (see :mod:`react_engine.compare`); every option
of that command works here::

    .venv/bin/python scripts/compare_protocols.py --out /tmp/cmp          # the local model
    .venv/bin/python scripts/compare_protocols.py --scripted              # no server at all
    .venv/bin/python scripts/compare_protocols.py --base-url URL --model A --model B
"""

from __future__ import annotations

import sys

from react_engine.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
