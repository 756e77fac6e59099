"""A verdict sent with ``approve`` answers the one call awaiting approval under its id (its
reply, tool and arguments: store/approvals.py), as ``agent.resume(approvals=...)`` does: a
later call reusing the id waits for its own, and an id that names no waiting call answers
nothing."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

import pytest
from support.parts import require_module

require_module("dbos", "the dbos extra", "pip install -e '.[dbos]'")

from react_engine.integrations.dbos import DBOSJournal  # noqa: E402
from react_engine.types import ActionRecord  # noqa: E402


def act(call_id: str, n: int) -> ActionRecord:
    return ActionRecord(call_id, "act", {"n": n}, json.dumps({"n": n}))


def waiting_on(call: ActionRecord, reply_no: int) -> DBOSJournal:
    """A workflow's journal whose reply ``reply_no`` made ``call``, deferred."""
    journal = DBOSJournal(cast(Any, None), "wf")
    journal.reply_no = reply_no + 1  # the reply read: its calls are keyed by its number
    journal.defer(call)
    return journal


def test_a_verdict_answers_the_waiting_call_of_its_id_once() -> None:
    journal = waiting_on(act("call_1", 1), 0)
    journal.rewind({"call_1": True})
    journal.reply_no = 1  # the run replayed up to the reply that made the call
    assert journal.approval(act("call_1", 1)) is True
    assert journal.approval(act("call_1", 2)) is None  # other arguments: not the call approved
    journal.reply_no = 2
    assert journal.approval(act("call_1", 1)) is None  # a later reply's call: it waits
    journal.rewind({"call_1": False})  # answered already: this one answers nothing
    journal.reply_no = 1
    assert journal.approval(act("call_1", 1)) is True


def test_a_verdict_for_no_waiting_call_is_logged_and_answers_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = waiting_on(act("call_1", 1), 0)
    with caplog.at_level(logging.WARNING, logger="react_engine.integrations.dbos"):
        journal.rewind({"call_7": True, "call_1": False})
    assert "'call_7'" in caplog.text and "'call_1'" not in caplog.text
    journal.reply_no = 1
    assert journal.approval(act("call_1", 1)) is False
    assert journal.approval(act("call_7", 1)) is None
