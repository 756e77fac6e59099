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
* Garbage is collected after each test, so a leaked socket fails the test that leaked it;
  what survives a test is frozen, so that collection scans only what the test made
  (:func:`pytest_runtest_protocol`; tests/suite/test_garbage.py).
* The HTTP clients the tests build share one default TLS context (:func:`pytest_configure`).
* Nothing is written into the user's home: ``XDG_STATE_HOME`` (where the run store, the
  capability cache and the chat history live by default) points into pytest's temporary
  directory, one directory per test, and the variables that name other places
  (``REACT_ENGINE_STORE``, ``REACT_ENGINE_CAPABILITY_CACHE``) are unset; the process-wide
  capability cache is built again for each test (:func:`_state_in_a_temporary_directory`).
"""

from __future__ import annotations

import gc
import ipaddress
import itertools
import os
import socket
import ssl
from collections.abc import Callable, Iterator
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


_made_tls_context: Callable[..., ssl.SSLContext] | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Every HTTP client the tests build (an ``Agent`` with a ``base_url`` builds two) shares
    one default TLS context instead of making its own.

    Making one reads the system's CA bundle: about 25 ms of CPU, a third of the
    single-process suite's CPU time, for a suite that never opens a TLS connection. A
    shared context is what the HTTP library's own docs advise; each client still builds
    its own transport and connection pool. Nothing is shared if the SDK's HTTP library is
    not the one this knows (httpcore2, under ``openai``)."""
    global _made_tls_context
    try:
        import httpcore2
    except ImportError:
        return
    made = _made_tls_context = httpcore2.default_ssl_context
    contexts: dict[tuple[object, ...], ssl.SSLContext] = {}

    def shared_tls_context(*, _trust_env: bool = True) -> ssl.SSLContext:
        key = (_trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        context = contexts.get(key)
        if context is None:
            context = contexts[key] = made(_trust_env=_trust_env)
        return context

    httpcore2.default_ssl_context = shared_tls_context


def pytest_unconfigure(config: pytest.Config) -> None:
    if _made_tls_context is not None:
        import httpcore2

        httpcore2.default_ssl_context = _made_tls_context


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


_PLACES = ("REACT_ENGINE_STORE", "REACT_ENGINE_CAPABILITY_CACHE")
"""Environment variables that name where the engine writes, unset for the tests."""


@pytest.fixture(scope="session", autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state home of the whole session, set before any other fixture, so that the
    processes a session- or module-scoped fixture starts write there too."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("state")
        mp.setenv("XDG_STATE_HOME", str(home))
        for name in _PLACES:
            mp.delenv(name, raising=False)
        yield home


_test_number = itertools.count()


@pytest.fixture(autouse=True)
def _state_in_a_temporary_directory(
    _state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Each test its own state home (made when something first writes there), and a
    process-wide capability cache read from it: what one test's runs learned never
    decides another's protocol."""
    from react_engine.transport.learned import set_default_cache

    monkeypatch.setenv("XDG_STATE_HOME", str(_state_home / str(next(_test_number))))
    set_default_cache(None)
    yield
    set_default_cache(None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what exists once the tests are collected (the imported modules, the test
    items and their parameters): the collection after each test then scans only what the
    tests made since (see :func:`pytest_runtest_protocol`)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage_after_each_test() -> Iterator[None]:
    """Collect garbage when each test ends, so an unclosed socket or file is reported
    against the test that leaked it (pytest turns it into a failure there) rather than
    against whichever later test the collector happens to run in."""
    yield
    gc.collect()


_outliving_fixture_ended = False
"""Whether a fixture that outlives a test (module-scoped and wider) ended in this test."""


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[object]) -> None:
    global _outliving_fixture_ended
    if fixturedef.scope != "function":
        _outliving_fixture_ended = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """Freeze what survives each test, so the next test's collection scans only what that
    test makes.

    Without it every collection scanned all that the earlier tests had left: the modules
    they imported (mcp, matplotlib...), caches and pytest's reports, 100,000 objects and
    more. The collection after each test then took 20 to 70 ms, most of the single-process
    suite's CPU time (about 200 of 250 s).

    What a test leaves is collected once more here, after pytest has dropped the test's
    fixture values (a cycle among them is reported in the next test's setup, as before),
    then frozen. Garbage among frozen objects is found by a full collection (everything
    unfrozen, collected and frozen again: about 200 ms): after a test in which a
    module-scoped (or wider) fixture ended, and when the tests of a folder end (for
    something a test left alive that a later test released). At the end of the session
    everything is unfrozen, so pytest's last collection sees it all."""
    global _outliving_fixture_ended
    try:
        return (yield)
    finally:
        gc.collect()
        if nextitem is None:
            gc.unfreeze()
        elif _outliving_fixture_ended or nextitem.path.parent != item.path.parent:
            _outliving_fixture_ended = False
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        else:
            gc.freeze()
