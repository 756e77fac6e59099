"""What the golden-file tests share: deterministic dumping and the update-or-load step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def dump(value: Any) -> bytes:
    """Deterministic JSON: UTF-8, or ``\\u`` escapes when a lone surrogate forbids UTF-8."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(value, indent=2, ensure_ascii=True, sort_keys=False) + "\n").encode()


def expected_for(path: Path, actual: Any, update: bool, suffix: str = ".json") -> Any | None:
    """The expectation beside ``path`` (its name with ``suffix``); with ``update``, rewrite
    it from ``actual`` and return None (the test then has nothing to compare)."""
    expected_path = path.with_suffix(suffix)
    if update:
        expected_path.write_bytes(dump(actual))
        return None
    assert expected_path.exists(), f"{expected_path.name} is missing: run pytest --update-goldens"
    return json.loads(expected_path.read_bytes().decode("utf-8"))
