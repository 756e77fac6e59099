"""The suite's garbage collection (tests/conftest.py): the collection after each test scans
only what that test made, and a leak is still reported, whoever made it.

Each check runs a small suite of its own under the real conftest, in a child pytest with
no plugins but pytest's own, and reads its JUnit XML report."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
LEAK = "ResourceWarning: unclosed <socket.socket"

FILES = {
    "holder.py": """
KEPT = []
""",
    "first/test_a_survivors.py": """
import gc

KEPT = []


def test_keeps_a_hundred_thousand_objects():
    KEPT.extend([i] for i in range(100_000))


def test_the_next_test_does_not_scan_them():
    assert len(KEPT) == 100_000
    assert len(gc.get_objects()) < 20_000
""",
    "first/test_b_leak.py": """
import socket


def test_leaks_a_socket_in_a_cycle():
    cycle = [socket.socket()]
    cycle.append(cycle)


def test_after_the_leak():
    pass
""",
    "first/test_c_fixture_value.py": """
import socket

import pytest


@pytest.fixture
def socket_in_a_cycle():
    cycle = [socket.socket()]
    cycle.append(cycle)
    return cycle


def test_takes_the_fixture(socket_in_a_cycle):
    assert socket_in_a_cycle


def test_after_the_fixture_value():
    pass
""",
    "first/test_d_module_fixture.py": """
import socket

import pytest


@pytest.fixture(scope="module")
def shared_socket_in_a_cycle():
    cycle = [socket.socket()]
    cycle.append(cycle)
    return cycle


def test_first(shared_socket_in_a_cycle):
    assert shared_socket_in_a_cycle


def test_second(shared_socket_in_a_cycle):
    assert shared_socket_in_a_cycle
""",
    "first/test_e_next_file.py": """
def test_in_the_next_file():
    pass


def test_last():
    pass
""",
    "first/test_f_kept.py": """
import socket

import holder


def test_keeps_a_socket_in_a_cycle_alive():
    cycle = [socket.socket()]
    cycle.append(cycle)
    holder.KEPT.append(cycle)
""",
    "first/test_g_released.py": """
import holder


def test_releases_it():
    holder.KEPT.clear()


def test_after_the_release():
    pass
""",
    "second/test_h_next_folder.py": """
def test_in_the_next_folder():
    pass
""",
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each test of the small suite: "passed", or its error or failure report."""
    root = tmp_path_factory.mktemp("garbage")
    (root / "conftest.py").write_text(CONFTEST.read_text())
    (root / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    for name, text in FILES.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out.xml"],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    found: dict[str, str] = {}
    for case in ET.parse(root / "out.xml").iter("testcase"):
        name = case.get("name", "")
        bad = [child for child in case if child.tag in ("error", "failure")]
        found[name] = " ".join(child.text or "" for child in bad) if bad else "passed"
    return found


def test_the_collection_after_a_test_skips_what_earlier_tests_left(
    outcomes: dict[str, str],
) -> None:
    assert outcomes["test_keeps_a_hundred_thousand_objects"] == "passed"
    assert outcomes["test_the_next_test_does_not_scan_them"] == "passed"


def test_a_socket_leaked_in_a_cycle_fails_the_test_that_leaked_it(
    outcomes: dict[str, str],
) -> None:
    assert LEAK in outcomes["test_leaks_a_socket_in_a_cycle"]
    assert outcomes["test_after_the_leak"] == "passed"


def test_a_fixture_values_leak_is_reported_by_the_next_test(outcomes: dict[str, str]) -> None:
    """pytest drops a test's fixture values after its teardown: a cycle among them is
    found by the collection that follows and reported in the next test."""
    assert outcomes["test_takes_the_fixture"] == "passed"
    assert LEAK in outcomes["test_after_the_fixture_value"]


def test_a_module_fixtures_leak_is_reported_when_it_ends(outcomes: dict[str, str]) -> None:
    """The fixture's socket was made in an earlier test (frozen since): the full collection
    after the fixture ends finds it, and the next file's first test reports it."""
    assert outcomes["test_first"] == "passed"
    assert outcomes["test_second"] == "passed"
    assert LEAK in outcomes["test_in_the_next_file"]
    assert outcomes["test_last"] == "passed"


def test_what_a_test_left_alive_and_a_later_one_released_is_reported_when_its_folder_ends(
    outcomes: dict[str, str],
) -> None:
    """Kept alive by a test, the socket is frozen; released in a later test, it is found by
    the full collection at the end of the folder, and the next folder's first test reports it."""
    assert outcomes["test_keeps_a_socket_in_a_cycle_alive"] == "passed"
    assert outcomes["test_releases_it"] == "passed"
    assert outcomes["test_after_the_release"] == "passed"
    assert LEAK in outcomes["test_in_the_next_folder"]
