"""What servers rejected at run time (:class:`CapabilityCache`, per ``(base_url, model)``),
and :func:`resolve`, which puts it over the registry and says which layer decided
(docs/capability-cache.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, TypeAlias

from ..errors import ConfigurationError
from ..paths import state_dir
from .capabilities import BOOL_FIELDS, Capabilities, CapabilityRegistry
from .wire import mask_url

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CACHE_ENV",
    "CACHE_FILE",
    "CapabilityCache",
    "default_cache",
    "resolve",
    "set_default_cache",
]

logger = logging.getLogger(__name__)

CACHE_ENV: Final = "REACT_ENGINE_CAPABILITY_CACHE"
"""Where the default cache keeps what it learned across runs: the path of a JSON file, or
``off`` to keep it in memory only. Unset or empty: :data:`CACHE_FILE` in the state
directory."""

CACHE_FILE: Final = "capabilities.json"
"""The default cache's file name in :func:`~react_engine.paths.state_dir`."""


_CacheKey: TypeAlias = tuple[str, str]


def _cache_key(base_url: str | None, model: str) -> _CacheKey:
    """The server (its credentials masked: they are not kept) and the model."""
    return (mask_url((base_url or "").strip().rstrip("/")), model.strip())


class CapabilityCache:
    """What servers rejected at run time, per ``(base_url, model)`` (credentials masked).

    In memory without a ``path``. With one, every change reads the file again and writes it
    atomically under an exclusive lock, so processes sharing it keep each other's lessons;
    a file that cannot be read or written is ignored with a logged warning. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._data: dict[_CacheKey, dict[str, bool]] = (self._path and self._read()) or {}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CapabilityCache:
        """The cache ``env`` (default: ``os.environ``) asks for: in the file
        ``REACT_ENGINE_CAPABILITY_CACHE`` names, in memory if it is ``off``, else in
        :data:`CACHE_FILE` in the state directory."""
        environ = os.environ if env is None else env
        named = environ.get(CACHE_ENV, "").strip()
        if named.lower() == "off":
            return cls(None)
        return cls(Path(named).expanduser() if named else state_dir(environ) / CACHE_FILE)

    @property
    def path(self) -> Path | None:
        """The file the cache is kept in, or ``None`` for memory only."""
        return self._path

    def get(self, base_url: str | None, model: str) -> dict[str, bool]:
        """The learned overrides for this server and model (a copy; empty if none)."""
        with self._lock:
            return dict(self._data.get(_cache_key(base_url, model), {}))

    def entries(self) -> list[tuple[str, str, dict[str, bool]]]:
        """Every ``(base_url, model, overrides)`` learned so far, for display."""
        with self._lock:
            return [(url, model, dict(o)) for (url, model), o in sorted(self._data.items())]

    def remember(self, base_url: str | None, model: str, **overrides: bool) -> None:
        """Record capability overrides, e.g. ``function_calling=False``, merged into any
        already known for this server and model."""
        for name, value in overrides.items():
            if name not in BOOL_FIELDS or not isinstance(value, bool):
                raise ConfigurationError(
                    f"CapabilityCache.remember: not a capability and a bool: {name}={value!r} "
                    f"(capabilities: {', '.join(BOOL_FIELDS)})"
                )
        if overrides:
            key = _cache_key(base_url, model)
            self._mutate(lambda data: data.update({key: {**data.get(key, {}), **overrides}}))

    def forget(self, base_url: str | None, model: str) -> None:
        """Drop what was learned about this server and model."""
        key = _cache_key(base_url, model)
        self._mutate(lambda data: data.pop(key, None))

    def clear(self) -> None:
        """Drop everything learned (and empty the file, if there is one)."""
        self._mutate(lambda data: data.clear())

    def _mutate(self, change: Callable[[dict[_CacheKey, dict[str, bool]]], object]) -> None:
        with self._lock, self._file_lock():
            on_disk = self._read() if self._path is not None else None
            data = {k: dict(v) for k, v in (self._data if on_disk is None else on_disk).items()}
            change(data)
            self._data = data
            if self._path is not None:
                self._write(data)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """Hold the file's lock between this process's read and write; where locking is
        not possible, go ahead unlocked (a lesson may be lost, never the file)."""
        if self._path is None or fcntl is None:
            yield
            return
        lock_path = self._path.with_name(f".{self._path.name}.lock")
        fd: int | None = None
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # no lock file, or a file system without locks
            logger.warning("capability cache %s: cannot lock it: %s", self._path, exc)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the last descriptor releases the lock

    def _read(self) -> dict[_CacheKey, dict[str, bool]] | None:
        """The file's entries; ``{}`` if it does not exist, ``None`` if it is unusable."""
        assert self._path is not None
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("ignoring capability cache %s: cannot read it: %s", self._path, exc)
            return None
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
                raise ValueError("expected an object with an 'entries' list")
        except (ValueError, RecursionError) as exc:
            logger.warning("ignoring corrupt capability cache %s: %s", self._path, exc)
            return None
        data: dict[_CacheKey, dict[str, bool]] = {}
        for item in raw["entries"]:
            try:
                url, model, overrides = item["base_url"], item["model"], item["overrides"]
                if not (isinstance(url, str) and isinstance(model, str)):
                    raise TypeError("base_url and model must be strings")
                clean = {
                    k: v for k, v in overrides.items() if k in BOOL_FIELDS and isinstance(v, bool)
                }
            except (KeyError, TypeError, AttributeError) as exc:
                logger.warning("ignoring a bad entry in capability cache %s: %s", self._path, exc)
                continue
            if clean:
                data[_cache_key(url, model)] = clean
        return data

    def _write(self, data: Mapping[_CacheKey, Mapping[str, bool]]) -> None:
        assert self._path is not None
        document = {
            "version": 1,
            "entries": [
                {"base_url": url, "model": model, "overrides": dict(sorted(o.items()))}
                for (url, model), o in sorted(data.items())
            ],
        }
        import tempfile  # with the first lesson written, not with the library

        tmp_name: str | None = None
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            where, prefix = self._path.parent, f".{self._path.name}."
            fd, tmp_name = tempfile.mkstemp(dir=where, prefix=prefix, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, self._path)
            tmp_name = None
        except OSError as exc:
            logger.warning("could not save capability cache %s: %s", self._path, exc)
        finally:
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)


_default_cache: CapabilityCache | None = None
_default_cache_lock = threading.Lock()


def default_cache() -> CapabilityCache:
    """The process-wide cache (:meth:`CapabilityCache.from_env`), built on first use."""
    global _default_cache
    with _default_cache_lock:
        if _default_cache is None:
            _default_cache = CapabilityCache.from_env()
        return _default_cache


def set_default_cache(cache: CapabilityCache | None) -> None:
    """Make ``cache`` the process-wide cache from now on (``None``: build it again from the
    environment on next use). Agents built before keep theirs."""
    global _default_cache
    with _default_cache_lock:
        _default_cache = cache


def resolve(
    registry: CapabilityRegistry, cache: CapabilityCache, base_url: str | None, model: str
) -> tuple[Capabilities, str]:
    """The capabilities to use for ``model`` on ``base_url``, and why
    (``"registry: <pattern>"`` or ``"learned: stop=False (registry: o3*)"``). Learned
    overrides win."""
    caps, pattern = registry.lookup(model)
    server = registry.lookup_server(base_url)
    if server is not None:
        fields, server_pattern = server
        changes = {k: v for k, v in fields.items() if getattr(caps, k) != v}
        if changes:
            caps = dataclasses.replace(caps, **changes)
            pattern = f"{pattern}, server {server_pattern}"
    learned = cache.get(base_url, model)
    changed: dict[str, Any] = {k: v for k, v in sorted(learned.items()) if getattr(caps, k) != v}
    if not changed:
        return caps, f"registry: {pattern}"
    what = ", ".join(f"{k}={v}" for k, v in changed.items())
    return dataclasses.replace(caps, **changed), f"learned: {what} (registry: {pattern})"
