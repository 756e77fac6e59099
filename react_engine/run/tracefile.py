"""A run's trace on disk as it happens: what survives the process.

``Agent(trace="run.jsonl")`` appends one JSON Lines record per event that matters, flushed
(not ``fsync``-ed) when it happens, so that a killed run leaves every request paid for and
every call started: ``run``, ``reply`` (before its calls run), ``tool_started``, ``step`` and
``result`` (the ``run``, ``step`` and ``result`` records are ``RunResult.to_jsonl``'s)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import IO, Any

from ..errors import ConfigurationError
from ..text import escape_separators
from ..types import run_record, to_jsonable
from .events import (
    Event,
    ModelCallFinished,
    RunDone,
    RunFailed,
    RunNotice,
    RunStarted,
    StepDone,
    ToolStarted,
)

log = logging.getLogger("react_engine")

__all__ = ["TRACE_FAILED", "TraceFile"]

TRACE_FAILED = "the trace could not be written to"  # how the notice of a failed trace begins


class TraceFile:
    """A sink of run events that appends the run's records to ``path`` as they happen."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Opens the file before the run: a bad path is said before anything is paid for."""
        self.path = os.fspath(path)
        self.failure: str | None = None  # why the file stopped being written, once it did
        try:
            self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise ConfigurationError(
                f"trace={self.path!r}: cannot write it: {exc.strerror or exc}"
            ) from None

    def __call__(self, event: Event) -> None:
        match event:
            case RunStarted(question=question, model=model, protocol=protocol, reason=reason):
                self._write(run_record(question, model, protocol, reason))
            case ModelCallFinished(step=step, reply=reply, duration_s=duration):
                self._write(
                    {
                        "type": "reply",
                        "step": step,
                        "text": reply.content,
                        "tool_calls": to_jsonable(reply.tool_calls),
                        "finish_reason": reply.finish_reason,
                        "usage": to_jsonable(reply.usage),
                        "duration_s": duration,
                    }
                )
            case ToolStarted(step=step, call=call):
                self._write(
                    {
                        "type": "tool_started",
                        "step": step,
                        "id": call.id,
                        "tool": call.tool,
                        "arguments": to_jsonable(call.arguments),
                    }
                )
            case StepDone(step=step):
                self._write({**to_jsonable(step), "type": "step"})
            case RunDone(result=result):
                self._write(result.trace()[-1])
                if self.failure is not None:
                    result.notices.append(RunNotice(len(result.steps), self.failure))
                self.close()
            case RunFailed(error=error):
                failed = getattr(error, "result", None)
                record: dict[str, Any]
                if failed is not None:
                    record = failed.trace()[-1]
                else:
                    interrupted = isinstance(error, KeyboardInterrupt | asyncio.CancelledError)
                    stop = "cancelled" if interrupted else "error"
                    record = {"type": "result", "answer": None, "stop_reason": stop}
                record["error"] = record.get("error") or f"{type(error).__name__}: {error}"[:500]
                self._write(record)
                self.close()

    def _write(self, record: dict[str, Any]) -> None:
        if self.failure is not None:
            return
        try:
            self._append(escape_separators(json.dumps(record, ensure_ascii=False)) + "\n")
        except OSError as exc:
            # A full disk must not end the run: the trace stops, and the result says so.
            self.failure = f"{TRACE_FAILED} {self.path}: {exc.strerror or exc}"
            log.warning("%s", self.failure)

    def _append(self, line: str) -> None:
        self._file.write(line)
        self._file.flush()

    def close(self) -> None:
        self._file.close()
