"""Fixtures of the fault tests: the loopback server, the harness on it, and the gate that
releases every tool still blocked when a test ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from support.faults import Harness, wait_for_stuck_threads

from react_engine.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def harness(server: ScriptedServer) -> Harness:
    return Harness(server)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Set when the test ends: releases every tool still blocked on it."""
    event = threading.Event()
    yield event
    event.set()
    wait_for_stuck_threads()
