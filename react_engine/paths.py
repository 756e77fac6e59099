"""Where react-engine keeps what it writes for the user: one state directory.

``$XDG_STATE_HOME/react-engine``, else ``~/.local/state/react-engine`` (the XDG Base
Directory rule for state: data that outlives a run but is not worth a backup). The run
store (``store.db``), the capability cache (``capabilities.json``) and the chat history
(``chat_history``) live there unless told otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["state_dir"]


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """react-engine's state directory, read from ``env`` (default: ``os.environ``) when
    asked; it may not exist yet (whoever writes there first makes it)."""
    state = (os.environ if env is None else env).get("XDG_STATE_HOME", "").strip()
    base = Path(state).expanduser() if state else Path.home() / ".local" / "state"
    return base / "react-engine"
