"""A tool for the CLI's ``runs resume`` test: ``act`` writes one line per call to the
file named by ``$DURABLE_EFFECTS`` (its side effect, counted by the test)."""

from __future__ import annotations

import os

from react_engine import tool


@tool
def act(n: int) -> str:
    """Do step n."""
    with open(os.environ["DURABLE_EFFECTS"], "a") as fh:
        fh.write(f"{n}\n")
    return f"done {n}"
