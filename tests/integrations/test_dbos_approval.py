"""A run on DBOS waits for approvals (``DBOS.recv``), given from another process with
``approve``: one approved, one denied, the third after the waiting worker was killed and
another worker recovered the run; another process follows its steps (``steps``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from support.parts import require_module

require_module("dbos", "the dbos extra", "pip install -e '.[dbos]'")

from dbos import DBOS, DBOSClient  # noqa: E402

from integrations.dbos_support import (  # noqa: E402
    effects,
    finish,
    start,
    three_calls,
    three_written_calls,
)
from react_engine.integrations.dbos import PENDING_EVENT, approve, steps  # noqa: E402
from react_engine.testing import ScriptedServer  # noqa: E402
from react_engine.wording import Notice, NoticeCode  # noqa: E402

pytestmark = pytest.mark.slow  # worker processes


def awaiting(client: DBOSClient, workflow_id: str, n: int) -> str:
    """The id of the call ``act(n)`` once the run awaits its approval."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending: list[dict[str, Any]] = client.get_event(workflow_id, PENDING_EVENT, 1) or []
        if [p["arguments"] for p in pending] == [{"n": n}]:
            return str(pending[0]["id"])
        time.sleep(0.05)
    raise AssertionError(f"act({n}) never awaited approval")


@pytest.mark.parametrize("protocol", ["function_calling", "text"])
def test_approvals_from_another_process_resume_the_waiting_run(
    tmp_path: Path, protocol: str
) -> None:
    """Under the text protocol the calls' ids are made up at random: the recovered run
    gives each call the id it had, which the verdict sent before the crash names."""
    sysdb = f"sqlite:///{tmp_path / 'dbos.db'}"
    script = three_calls if protocol == "function_calling" else three_written_calls
    flags = ("--approval", "--protocol", protocol)
    DBOS.migrate(sysdb)  # the schema, before the client reads it
    client = DBOSClient(system_database_url=sysdb)
    try:
        with ScriptedServer(default=script) as server:
            proc = start(sysdb, server.base_url, tmp_path, "run", "a", *flags)
            approve("a", {awaiting(client, "a", 1): True}, client=client)
            second = awaiting(client, "a", 2)
            assert effects(tmp_path) == {"a:1": 1}  # ran once approved; act(2) waits
            proc.kill()  # the worker dies while the run waits
            assert finish(proc) == (-9, None)
            approve("a", {second: False}, client=client)  # kept until the run reads it
            proc = start(sysdb, server.base_url, tmp_path, "recover", "a", *flags)
            approve("a", {awaiting(client, "a", 3): True}, client=client)
            code, out = finish(proc)
            assert len(server.requests) == 4  # the recovered run asked for no reply again
            streamed = list(steps("a", client=client))  # as another process follows the run
    finally:
        client.destroy()
    assert code == 0 and out is not None
    assert effects(tmp_path) == {"a:1": 1, "a:3": 1}
    denied = f"Error: {Notice(NoticeCode.NOT_APPROVED)}"
    calls = [s["actions"][0][3:] for s in out["steps"][:3]]
    assert calls == [["ok", "done 1"], ["denied", denied], ["ok", "done 3"]]
    if protocol == "function_calling":
        assert out["answer"] == f"done 1; {denied}; done 3"
    assert [s.index for s in streamed] == [0, 1, 2, 3]  # each step once, across the crash
    assert [[a.status for a in s.actions] for s in streamed] == [["ok"], ["denied"], ["ok"], []]
