"""Approvals bound to the one call they answer.

A call whose approval is deferred (``approve="defer"``) is journalled as ``deferred`` under
its key: the number of the model reply that made it and its id in that reply
(``"3:call_1"``), with a digest of its tool and arguments. An approval given to
:meth:`Agent.resume <react_engine.Agent.resume>` names a call id: it is taken only for a
call that awaits approval when it is given (else :class:`UnknownApprovalError`, and nothing
is recorded), and journalled as ``approval`` under that call's key and digest.

When the resumed run meets a call that needs approval, a verdict answers it only if both
the key and the digest match. A call made by a later reply never matches, even with the
same id, tool and arguments: it waits for its own approval. A verdict is used once: the
call runs (or is refused) and is journalled ``done``, and a finished call is served from
the journal, never run again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, UnknownApprovalError
from ..types import ActionRecord, describe
from .codec import VERSION, dump_record, dumps, load_record

if TYPE_CHECKING:
    from .runs import Entry

__all__ = ["Waiting", "bind", "call_digest", "deferred_entry", "waiting"]


def call_digest(record: ActionRecord) -> str:
    """What an approval is given for: the call's tool and the arguments it would run with."""
    text = json.dumps(
        [record.tool, record.arguments],
        sort_keys=True,
        ensure_ascii=True,
        separators=(",", ":"),
        default=repr,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def deferred_entry(key: str, record: ActionRecord) -> tuple[str, str, str]:
    """The journal entry of a call deferred under ``key``."""
    body = {"v": VERSION, "digest": call_digest(record), "call": dump_record(record)}
    return ("deferred", key, dumps(body))


@dataclass(frozen=True, slots=True)
class Waiting:
    """A call awaiting approval: its journal key, its digest and its record."""

    key: str
    digest: str
    call: ActionRecord


def waiting(status: str, entries: Sequence[Entry]) -> list[Waiting]:
    """The calls of a run awaiting approval: deferred, and since neither answered nor run.
    Only a run whose status is ``awaiting_approval`` has any."""
    if status != "awaiting_approval":
        return []
    found: dict[str, Entry] = {}
    for entry in entries:
        if entry.kind == "deferred":
            found[entry.key] = entry
        elif entry.kind in ("approval", "started", "done"):
            found.pop(entry.key, None)
    return [Waiting(k, e.body["digest"], load_record(e.body["call"])) for k, e in found.items()]


def bind(
    run_id: str, pending: Sequence[Waiting], approvals: Mapping[str, Any]
) -> list[tuple[str, str, dict[str, Any]]]:
    """The journal entries of ``approvals`` (call id to True or False), each bound to the
    pending call of that id: :class:`UnknownApprovalError` for an id that awaits none."""
    if not isinstance(approvals, Mapping):
        raise ConfigurationError(
            f"approvals must map call ids to True or False, not {describe(approvals)}"
        )
    by_id = {w.call.id: w for w in pending}
    unknown = tuple(str(i) for i in approvals if i not in by_id)
    if unknown:
        raise UnknownApprovalError(run_id, unknown, tuple(by_id))
    entries = []
    for call_id, verdict in approvals.items():
        if not isinstance(verdict, bool):
            raise ConfigurationError(
                f"the approval of {call_id!r} must be True or False, not {describe(verdict)}"
            )
        w = by_id[call_id]
        body = {"v": VERSION, "approved": verdict, "digest": w.digest, "tool": w.call.tool}
        entries.append(("approval", w.key, body))
    return entries
