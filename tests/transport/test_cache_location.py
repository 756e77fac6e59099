"""Where the process-wide capability cache lives: ``capabilities.json`` in the state
directory (beside the run store) unless ``REACT_ENGINE_CAPABILITY_CACHE`` names another
file or is ``off``; and several processes writing it at once keep each other's lessons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from react_engine.store import default_path
from react_engine.transport.learned import (
    CACHE_ENV,
    CapabilityCache,
    default_cache,
    set_default_cache,
)

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9/v1"


def test_the_default_file_is_in_the_state_directory_beside_the_run_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    assert CapabilityCache.from_env(env).path == tmp_path / "react-engine" / "capabilities.json"
    empty = {"XDG_STATE_HOME": str(tmp_path), CACHE_ENV: "  "}  # empty: the default
    assert CapabilityCache.from_env(empty).path == tmp_path / "react-engine" / "capabilities.json"
    monkeypatch.delenv("XDG_STATE_HOME")  # no state home: ~/.local/state, as for the store
    monkeypatch.setenv("HOME", str(tmp_path))
    state = tmp_path / ".local" / "state" / "react-engine"
    assert CapabilityCache.from_env().path == state / "capabilities.json"
    assert default_path() == state / "store.db"


def test_the_default_cache_writes_beside_the_run_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cache = default_cache()
    assert cache.path is not None and cache.path.parent == default_path().parent
    cache.remember(URL, "m", function_calling=False)
    saved = json.loads((tmp_path / "state" / "react-engine" / "capabilities.json").read_text())
    assert saved["entries"] == [
        {"base_url": URL, "model": "m", "overrides": {"function_calling": False}}
    ]
    set_default_cache(None)  # a new process, as far as the cache knows
    assert default_cache() is not cache
    assert default_cache().get(URL, "m") == {"function_calling": False}


def test_off_keeps_the_default_cache_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, "off")
    default_cache().remember(URL, "m", stop=False)
    assert default_cache().path is None
    assert default_cache().get(URL, "m") == {"stop": False}
    assert list(tmp_path.iterdir()) == []


def test_set_default_cache_replaces_it_from_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    mine = CapabilityCache()
    set_default_cache(mine)
    assert default_cache() is mine
    default_cache().remember(URL, "m", stop=False)
    assert list(tmp_path.iterdir()) == []
    set_default_cache(None)
    assert default_cache().path == tmp_path / "react-engine" / "capabilities.json"
    assert default_cache().get(URL, "m") == {}


_LEARN = """
import sys
from react_engine.transport.learned import CapabilityCache
cache = CapabilityCache(sys.argv[1])
for i in range(int(sys.argv[3])):
    cache.remember("http://127.0.0.1:9/v1", f"model-{sys.argv[2]}-{i}", function_calling=False)
"""


def test_processes_writing_at_once_keep_each_others_lessons(tmp_path: Path) -> None:
    """Each change reads the file and writes it under a lock: without it, two processes
    read the same file, and the later write drops what the earlier one added."""
    path = tmp_path / "capabilities.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers, each = 4, 40
    children = [
        subprocess.Popen([sys.executable, "-c", _LEARN, str(path), str(w), str(each)], env=env)
        for w in range(workers)
    ]
    assert [child.wait(timeout=120) for child in children] == [0] * workers
    learned = {model for _, model, _ in CapabilityCache(path).entries()}
    assert learned == {f"model-{w}-{i}" for w in range(workers) for i in range(each)}
