"""Where react-engine keeps what it writes for the user: ``$XDG_STATE_HOME/react-engine``,
else ``~/.local/state/react-engine``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["state_dir"]


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """react-engine's state directory, from ``env`` (``os.environ``); it may not exist yet."""
    state = (os.environ if env is None else env).get("XDG_STATE_HOME", "").strip()
    base = Path(state).expanduser() if state else Path.home() / ".local" / "state"
    return base / "react-engine"
