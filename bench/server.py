"""The scripted mock server in a process of its own, so client CPU excludes the server.

:class:`ServerProcess` runs ``python -m bench.server``: a
:class:`react_engine.testing.ScriptedServer` bound to 127.0.0.1, answering from
:func:`bench.task.respond`. The child prints its port, serves until its stdin closes (so
it also goes when the parent dies), and keeps only the last few request bodies, so a long
benchmark does not grow its memory.
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from react_engine.testing import MockResponse, ScriptedServer

from .task import respond

__all__ = ["ServerProcess", "mock_responder", "raise_fd_limit"]

ROOT = Path(__file__).resolve().parent.parent


def mock_responder(body: dict[str, Any]) -> MockResponse:
    return MockResponse(body=respond(body))


def raise_fd_limit() -> None:
    """1,000 concurrent runs need over 1,000 sockets on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class ServerProcess:
    """``with ServerProcess() as base_url:`` a scripted OpenAI-compatible server."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> str:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.isdigit():
            self._proc.kill()
            raise RuntimeError(f"the mock server process did not start: {line!r}")
        self.base_url = f"http://127.0.0.1:{line}/v1"
        return self.base_url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def main() -> None:
    raise_fd_limit()
    server = ScriptedServer(default=mock_responder)
    server.requests = collections.deque(maxlen=16)  # type: ignore[assignment]
    server.start()
    print(server.port, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin (or dies)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
