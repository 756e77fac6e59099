"""``react-engine runs resume`` on a run awaiting approval, and on one that has ended.

Without an answer for every call awaiting approval, the run keeps waiting: nothing is
denied, nothing runs, no request is sent, and the command says which calls wait and how
to answer them. A mistyped ``--approve`` id is an error naming the ids that wait. A run
that has ended prints its stored answer, with no model or endpoint at all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from react_engine import Agent
from react_engine.cli import main
from react_engine.cli.agents import load_tools
from react_engine.store import open_store
from react_engine.testing import ScriptedServer, completion

TOOLS = '''
import os

from react_engine import tool


@tool(requires_approval=True)
def rm(path: str) -> str:
    """Remove a path."""
    with open(os.environ["RM_EFFECTS"], "a") as fh:
        fh.write(path + "\\n")
    return f"removed {path}"
'''


def rm_call(path: str) -> dict[str, Any]:
    """A reply calling ``rm(path)`` with the id ``call_1`` (servers that number each
    reply's calls give it again and again)."""
    arguments = json.dumps({"path": path})
    call = {"id": "call_1", "type": "function", "function": {"name": "rm", "arguments": arguments}}
    return completion(None, tool_calls=[call])


def by_turn(body: dict[str, Any]) -> dict[str, Any]:
    """Remove /srv/a, then /etc, then answer: by how many replies the request holds."""
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return [rm_call("/srv/a"), rm_call("/etc"), completion("done")][turn]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=by_turn) as srv:
        yield srv


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "rm_tools.py"
    path.write_text(TOOLS)
    monkeypatch.setenv("RM_EFFECTS", str(tmp_path / "effects"))
    return path


def removed(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects"
    return path.read_text().split() if path.exists() else []


def waiting_run(db: Path, server: ScriptedServer, tools: Path) -> str:
    """A run stopped awaiting approval of ``rm("/srv/a")`` (id ``call_1``)."""
    agent = Agent(
        "mock-model",
        load_tools(str(tools)),
        base_url=server.base_url,
        api_key="sk-test",
        protocol="function_calling",
        store=open_store(db),
        approve="defer",
    )
    result = agent.run("clean up")
    assert result.stop_reason == "awaiting_approval" and result.run_id is not None
    return result.run_id


def resume(db: Path, server: ScriptedServer, tools: Path, run_id: str, *more: str) -> int:
    return main(
        [
            "runs", "resume", run_id, "--store", str(db), "--base-url", server.base_url,
            "--model", "mock-model", "--protocol", "function_calling", "--tools", str(tools),
            *more,
        ]
    )  # fmt: skip


def stored(db: Path, run_id: str) -> tuple[str, list[tuple[str, str]]]:
    store = open_store(db)
    entries = asyncio.run(store.entries(run_id))
    return asyncio.run(store.info(run_id)).status, [(e.kind, e.key) for e in entries]


def test_resume_without_an_answer_keeps_the_run_waiting(
    tmp_path: Path, server: ScriptedServer, tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    run_id = waiting_run(db, server, tools)
    before, requests = stored(db, run_id), len(server.requests)
    capsys.readouterr()

    assert resume(db, server, tools, run_id) == 3  # no answer: the run still waits
    err = capsys.readouterr().err
    assert 'call_1  rm({"path": "/srv/a"})' in err
    assert f"react-engine runs resume {run_id} --store {db} --approve call_1=yes" in err
    assert "CALL_ID=no" in err
    assert stored(db, run_id) == before  # nothing denied, nothing recorded
    assert len(server.requests) == requests and removed(tmp_path) == []

    # The approval can still be given; the model's next call reuses the id: it waits,
    # under an id of its own, and the same approval given again is an error.
    assert resume(db, server, tools, run_id, "--approve", "call_1=yes") == 3
    err = capsys.readouterr().err
    assert removed(tmp_path) == ["/srv/a"]
    assert 'call_1-2  rm({"path": "/etc"})' in err and "--approve call_1-2=yes" in err
    assert stored(db, run_id)[0] == "awaiting_approval"
    assert resume(db, server, tools, run_id, "--approve", "call_1=yes") == 2
    assert "'call_1-2'" in capsys.readouterr().err and removed(tmp_path) == ["/srv/a"]

    assert resume(db, server, tools, run_id, "--approve", "call_1-2=no") == 0
    assert capsys.readouterr().out.strip() == "done"
    assert removed(tmp_path) == ["/srv/a"]


def test_a_mistyped_approval_is_an_error_and_denies_nothing(
    tmp_path: Path, server: ScriptedServer, tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    run_id = waiting_run(db, server, tools)
    before, requests = stored(db, run_id), len(server.requests)
    capsys.readouterr()

    assert resume(db, server, tools, run_id, "--approve", "call_999=yes") == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: ") and "'call_999'" in err and "'call_1'" in err
    assert stored(db, run_id) == before
    assert len(server.requests) == requests and removed(tmp_path) == []
    assert resume(db, server, tools, run_id, "--approve", "call_1=yes") == 3  # still waits
    assert removed(tmp_path) == ["/srv/a"]


def test_resume_of_a_finished_run_prints_its_answer_with_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    with ScriptedServer(completion("Final Answer: 4")) as server:
        agent = Agent(
            "m", base_url=server.base_url, api_key="k", store=open_store(db), protocol="text"
        )
        run_id = agent.run("2 + 2?", run_id="sum").run_id
    assert run_id == "sum"
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "REACT_ENGINE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    capsys.readouterr()

    assert main(["runs", "resume", "sum", "--store", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == "4\n" and "final_answer" in err
    assert main(["runs", "resume", "sum", "--store", str(db), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["answer"], payload["stop_reason"]) == ("4", "final_answer")
    assert payload["question"] == "2 + 2?" and payload["steps"][-1]["kind"] == "final"
    # An approval for a run that awaits none is an error, not ignored.
    assert main(["runs", "resume", "sum", "--store", str(db), "--approve", "call_1=yes"]) == 2
    assert "run 'sum' has no call awaiting approval" in capsys.readouterr().err
