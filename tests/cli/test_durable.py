"""The CLI's durable state: ``chat --session NAME`` and ``runs list | show | resume``."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import postgres

from react_engine.cli import build_parser, main, render
from react_engine.cli.agents import load_tools
from react_engine.cli.chat import ChatSession
from react_engine.cli.endpoint import Endpoint
from react_engine.store import open_store
from react_engine.testing import ScriptedModel, ScriptedServer, completion, tool_calls_completion
from react_engine.types import UserTurn

WORKER = Path(__file__).parents[1] / "support" / "durable_worker.py"
pg_uri, target = postgres.pg_uri, postgres.target  # the fixtures: a SQLite file, a database


def test_chat_session_keeps_the_conversation_across_chats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACT_ENGINE_STORE", str(tmp_path / "store.db"))
    args = build_parser().parse_args(["chat", "--session", "alice", "--protocol", "text"])
    lines = iter(["my name is Alice", "/exit"])
    out = io.StringIO()
    first = ChatSession(
        args,
        Endpoint("scripted", client=ScriptedModel(["Final Answer: hello Alice"])),
        load_tools(None),
        out=out,
        read_line=lambda _: next(lines),
    )
    first.loop()
    assert "hello Alice" in out.getvalue()

    model = ScriptedModel(["Final Answer: you are Alice"])  # a new chat, later
    lines = iter(["who am I?", "/exit"])
    second = ChatSession(
        args,
        Endpoint("scripted", client=model),
        [],
        out=io.StringIO(),
        read_line=lambda _: next(lines),
    )
    second.loop()
    prompt = "\n".join(m.content or "" for m in model.requests[0].messages)
    assert "my name is Alice" in prompt and "hello Alice" in prompt
    stored = asyncio.run(open_store(tmp_path / "store.db").session("alice").load())
    assert [i.content for i in stored if isinstance(i, UserTurn)] == [
        "my name is Alice",
        "who am I?",
    ]


def three_calls(body: dict[str, Any]) -> dict[str, Any]:
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if len(results) < 3:
        return tool_calls_completion(("act", {"n": len(results) + 1}))
    return completion("; ".join(results))


def test_runs_list_show_and_resume(
    tmp_path: Path,
    target: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, effects = target, tmp_path / "effects"
    monkeypatch.setenv("DURABLE_EFFECTS", str(effects))
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1]))
    with ScriptedServer(default=three_calls) as server:
        worker = [sys.executable, str(WORKER), str(db), server.base_url, str(effects)]
        killed = subprocess.run([*worker, "run", "r1", "--kill-after", "3"], timeout=120)
        assert killed.returncode == -9  # after the first step, with call 2's start
        assert main(["runs", "list", "--store", str(db)]) == 0
        assert "r1" in capsys.readouterr().out
        monkeypatch.setenv("REACT_ENGINE_STORE", str(db))  # the store named by the environment
        assert main(["runs", "list"]) == 0
        assert "r1" in capsys.readouterr().out
        assert main(["runs", "show", "r1", "--store", str(db)]) == 0
        shown = capsys.readouterr().out
        assert "running" in shown and "done 1" in shown
        assert "in flight when the process stopped: act" in shown
        code = main(
            [
                "runs", "resume", "r1", "--store", str(db), "--base-url", server.base_url,
                "--model", "mock-model", "--protocol", "function_calling",
                "--tools", "support.durable_tools", "--json",
            ]
        )  # fmt: skip
        assert code == 0
        maybe = "may or may not have happened"  # call 2 was in flight, not idempotent
        out = capsys.readouterr().out
        assert '"answer": "done 1; Error: ' in out and maybe in out and "; done 3" in out
        assert len(server.requests) == 4
    assert Counter(effects.read_text().split()) == Counter({"1": 1, "3": 1})
    assert main(["runs", "show", "nope", "--store", str(db)]) != 0


def calls_in_either_protocol(body: dict[str, Any]) -> dict[str, Any]:
    """``three_calls`` under function calling; the same run written as text without tools."""
    if body.get("tools"):
        return three_calls(body)
    text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    done = [f"done {n}" for n in (1, 2, 3) if f"done {n}" in text]
    if len(done) < 3:
        n = len(done) + 1
        return completion(f'Thought: next\nAction: act\nAction Input: {{"n": {n}}}')
    return completion("Thought: all done\nFinal Answer: " + "; ".join(done))


@pytest.mark.parametrize("terminal", [False, True])
def test_runs_resume_on_another_model_and_protocol(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminal: bool,
) -> None:
    """Resumed under the text protocol on another model; on a terminal its steps print
    as they end (the live view shows only streamed runs), else ``--json`` has the answer."""
    db, effects = tmp_path / "store.db", tmp_path / "effects"
    monkeypatch.setenv("DURABLE_EFFECTS", str(effects))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    with ScriptedServer(default=calls_in_either_protocol) as server:
        worker = [sys.executable, str(WORKER), str(db), server.base_url, str(effects)]
        killed = subprocess.run([*worker, "run", "r1", "--kill-after", "4"], timeout=120)
        assert killed.returncode == -9  # after call 2's record
        if terminal:
            monkeypatch.setattr(render, "is_tty", lambda stream: True)  # stderr is one
        code = main(
            [
                "runs", "resume", "r1", "--store", str(db), "--base-url", server.base_url,
                "--model", "other-model", "--protocol", "text",
                "--tools", "support.durable_tools", *([] if terminal else ["--json"]),
            ]
        )  # fmt: skip
        assert code == 0
        out, err = capsys.readouterr()
        if terminal:
            assert 'action: act {"n": 3}' in err and "final answer: done 1; done 2; done 3" in err
        else:
            assert '"answer": "done 1; done 2; done 3"' in out
        bodies = list(server.requests)
    assert len(bodies) == 4  # 2 before the crash (function calling), 2 after (text)
    assert [b["model"] for b in bodies] == ["mock-model"] * 2 + ["other-model"] * 2
    assert [bool(b.get("tools")) for b in bodies] == [True, True, False, False]
    assert Counter(effects.read_text().split()) == Counter({"1": 1, "2": 1, "3": 1})
