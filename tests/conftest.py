"""Shared test configuration.

* ``--update-goldens`` rewrites golden expectation files instead of comparing them.
* Every test is hermetic: a socket guard fails any connection to a non-loopback address.
* Every test under ``tests/e2e`` is marked ``e2e`` and ``slow``: ``pytest -m "not slow"``
  is the fast inner loop.
* Under pytest-xdist (``make test`` runs ``-n auto --dist loadfile``) each test file runs
  on one worker, so a module-scoped server (PostgreSQL, MCP, a built wheel) starts once;
  the session-scoped llama.cpp server (tests/e2e/conftest.py) starts once per worker that
  runs e2e tests, each on a free port of its own.
* A missing optional part (BFCL data, the local model, PostgreSQL...) skips the tests that
  need it, or fails them under ``REACT_ENGINE_REQUIRE_ALL=1``: tests/support/parts.py.
"""

from __future__ import annotations

import gc
import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite the expected outputs of golden-file tests from the current code",
    )


E2E = Path(__file__).resolve().parent / "e2e"


def pytest_itemcollected(item: pytest.Item) -> None:
    if E2E in item.path.resolve().parents:
        item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.slow)


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
    else:
        return True  # unix sockets and the like
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"hermetic tests: connection to {address!r} is not allowed")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"hermetic tests: connection to {address!r} is not allowed")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what exists once the tests are collected (the imported modules, the test
    items and their parameters): the collection after each test then scans only what the
    tests made since. A full collection of the collected session took about 90 ms, three
    quarters of the suite's CPU time; a leak is still found in the test that made it."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage_after_each_test() -> Iterator[None]:
    """Collect garbage when each test ends, so an unclosed socket or file is reported
    against the test that leaked it (pytest turns it into a failure there) rather than
    against whichever later test the collector happens to run in."""
    yield
    gc.collect()
