"""A report seen by a real browser: headless Chromium's DOM of a page, and a screenshot.

Chromium is a program, not a Python package: Debian's ``chromium`` (``apt-get install
chromium``; ``make test`` installs it when missing). Each call starts it once on a
``file://`` page, with a profile of its own in a temporary directory and every
background service off (no network is needed or used), and waits for it to exit:
``--dump-dom`` prints the page's DOM as the browser built it (after any script on it ran),
``--screenshot`` writes a PNG of the window.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import ConfigurationError

__all__ = ["FLAGS", "NAMES", "dump_dom", "find_chromium", "screenshot"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""The names headless Chromium goes by on ``PATH``, in the order they are tried
(``$REACT_ENGINE_CHROMIUM`` names one first)."""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def find_chromium() -> str | None:
    """The Chromium executable (``$REACT_ENGINE_CHROMIUM`` first), or ``None``."""
    given = os.environ.get("REACT_ENGINE_CHROMIUM", "").strip()
    for name in (given, *NAMES) if given else NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(page: Path, *args: str, timeout: float) -> str:
    exe = find_chromium()
    if exe is None:
        raise ConfigurationError(
            "headless Chromium is not installed (apt-get install chromium, or name it in "
            "$REACT_ENGINE_CHROMIUM)"
        )
    with tempfile.TemporaryDirectory(prefix="react-engine-chromium-") as profile:
        command = [exe, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ConfigurationError(f"{exe} exited with {done.returncode} on {page}:\n{tail}")
    return done.stdout


def dump_dom(page: Path, *, timeout: float = 120.0) -> str:
    """The DOM Chromium built from the HTML file ``page``, serialised."""
    return _run(page, "--dump-dom", timeout=timeout)


def screenshot(
    page: Path, out: Path, *, width: int = 1200, height: int = 1400, timeout: float = 120.0
) -> Path:
    """A PNG of ``page`` in a ``width`` × ``height`` window, written to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(page, f"--screenshot={out.resolve()}", f"--window-size={width},{height}", timeout=timeout)
    if not out.is_file() or out.stat().st_size == 0:
        raise ConfigurationError(f"Chromium wrote no screenshot of {page}")
    return out
