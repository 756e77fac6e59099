"""Opening a store by name: :func:`open_store` and the backends registered by URI scheme.

A target is a path to a SQLite file (``"runs.db"``, ``sqlite:///abs/runs.db``) or a URI
whose scheme some backend registered with :func:`register_store`: ``postgresql://`` and
``postgres://`` by :mod:`react_engine.store.postgres`. No target means
``$REACT_ENGINE_STORE``, else the default SQLite file (:func:`~react_engine.store.default_path`).
One store keeps runs and, when its backend has them, sessions (:meth:`RunStore.session`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ..errors import ConfigurationError
from .runs import RunStore, SQLiteRunStore

__all__ = ["STORE_ENV", "open_store", "register_store"]

STORE_ENV = "REACT_ENGINE_STORE"
"""Environment variable naming the default store."""

StoreOpener = Callable[[str], RunStore]
"""Makes the store a target names; it is given the whole target (``scheme://...``)."""

_OPENERS: dict[str, StoreOpener] = {}

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def register_store(scheme: str, opener: StoreOpener) -> None:
    """Open targets ``scheme://...`` with ``opener`` (a later registration replaces one)."""
    _OPENERS[scheme.lower()] = opener


def open_store(target: str | os.PathLike[str] | None = None) -> RunStore:
    """The run store ``target`` names (see the module); sessions are ``.session(name)``.

    An unknown scheme raises :class:`~react_engine.errors.ConfigurationError` naming the
    registered ones; so does a libpq ``key=value`` connection string, which would
    otherwise name a SQLite file (give a ``postgresql://`` URI)."""
    if target is None:
        target = os.environ.get(STORE_ENV, "").strip() or None
    if not isinstance(target, str) or (match := _SCHEME.match(target)) is None:
        return SQLiteRunStore(target)  # a path, or none: the default file
    scheme = match.group(1).lower()
    opener = _OPENERS.get(scheme)
    if opener is None:
        known = ", ".join(f"{name}://" for name in sorted(_OPENERS))
        raise ConfigurationError(
            f"no store backend is registered for {scheme}:// (registered: {known}); "
            "a path names a SQLite file"
        )
    return opener(target)


# sqlite:///abs/runs.db: the URI's path
register_store("sqlite", lambda target: SQLiteRunStore(target.removeprefix("sqlite://") or None))
