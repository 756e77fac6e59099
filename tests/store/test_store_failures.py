"""A SQLite store that cannot be used fails typed: a corrupt, a truncated, a read-only and a
full file, from the API and from the CLI; text no store column takes (a lone surrogate) is
stored; one file is one store whatever its name; stored text reaches a terminal escaped.

The read-only store is a real permission drop: the check runs in a process of its own as a
user who may not write the file (as root, who may write anything whatever its mode, that
is the system user ``nobody``, the store's files staying root's; otherwise this user, the
modes dropped), and the process first proves that it cannot open the file for writing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.parts import missing, require_module

from react_engine import Agent, StoreError
from react_engine.cli import main
from react_engine.store import RunBusy, SQLiteDB, SQLiteRunStore, open_store
from react_engine.testing import ScriptedModel, reply, tool_call_reply

ROOT = Path(__file__).resolve().parents[2]


def wait(coro: Any) -> Any:
    return asyncio.run(coro)


def agent(store: str | Path, *replies: Any, **options: Any) -> Agent:
    return Agent(
        client=ScriptedModel(list(replies) or ["Final Answer: 4"]),
        protocol="text",
        store=str(store),
        model="m",
        **options,
    )


def stored(path: Path, runs: int = 1) -> list[str]:
    """A store at ``path`` with ``runs`` finished runs (their ids), closed: its WAL written
    back into the file, which alone is then the store."""
    ids = [agent(path, f"Final Answer: {'x' * 2000}").run(f"q{i}").run_id for i in range(runs)]
    SQLiteDB.shared(path).close()
    return [i for i in ids if i is not None]


def forget(path: Path) -> None:
    """Drop this process's connection to ``path`` (the file was changed behind it)."""
    SQLiteDB.shared(path).close()


def corrupt(path: Path) -> None:
    stored(path)
    path.write_bytes(b"this is no SQLite database\n" * 400)
    forget(path)


def truncated(path: Path) -> None:
    stored(path, runs=20)
    os.truncate(path, path.stat().st_size // 2)
    forget(path)


def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "react_engine", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )


@pytest.mark.parametrize("damage", [corrupt, truncated])
def test_a_damaged_store_raises_store_error_from_the_api(tmp_path: Path, damage: Any) -> None:
    path = tmp_path / "store.db"
    damage(path)
    with pytest.raises(StoreError) as listed:
        wait(open_store(path).runs())
    assert str(path) in str(listed.value) and listed.value.location == str(path)
    assert "corrupt" in str(listed.value)
    with pytest.raises(StoreError, match="corrupt"):
        agent(path).run("What is 2 + 2?")
    with pytest.raises(StoreError, match="corrupt"):
        agent(path).resume("anything")


@pytest.mark.parametrize("damage", [corrupt, truncated])
@pytest.mark.parametrize("command", [["list"], ["show", "r1"]])
def test_a_damaged_store_is_one_line_from_the_cli(
    tmp_path: Path, damage: Any, command: list[str]
) -> None:
    path = tmp_path / "store.db"
    damage(path)
    proc = cli_process("runs", *command, "--store", str(path))
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: store {path}: ") and "corrupt" in proc.stderr


# --- a read-only store, under a real permission drop -------------------------------------


@pytest.fixture
def unlocked_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory whose modes are given back after the test (so that it can be removed)."""
    yield tmp_path
    for sub in [tmp_path, *tmp_path.rglob("*")]:
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o755)


MOUNT_RO = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def read_only(path: Path, where: str) -> list[str]:
    """The command prefix that runs a process for which the store at ``path`` (the file, or
    its whole directory: ``where``) cannot be written. As root, whom no mode stops: a
    read-only bind mount, in a mount namespace of the process's own. Otherwise the modes
    are dropped."""
    target = path if where == "file" else path.parent
    if os.geteuid() != 0:
        path.chmod(0o444)
        if where == "directory":
            target.chmod(0o555)
        return []
    if shutil.which("unshare") is None:
        missing("a read-only bind mount (root, whom file modes do not stop)", "no unshare")
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT_RO, "sh"]
    probe = subprocess.run([*prefix, str(target), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        missing("a read-only bind mount (root, whom file modes do not stop)", probe.stderr)
    return [*prefix, str(target)]


CHECK = textwrap.dedent(
    """
    import asyncio, json, sys
    from react_engine import Agent, StoreError
    from react_engine.store import open_store
    from react_engine.testing import ScriptedModel

    path, run_id = sys.argv[1], sys.argv[2]
    try:
        open(path, "r+b")
    except OSError:  # PermissionError, or "Read-only file system"
        pass
    else:
        sys.exit("the store can be written: no permission was dropped")
    out = {"runs": [r.id for r in asyncio.run(open_store(path).runs())]}
    agent = Agent(client=ScriptedModel(["Final Answer: 4"]), protocol="text", store=path, model="m")
    for name, call in (("run", lambda: agent.run("q")), ("resume", lambda: agent.resume(run_id))):
        try:
            call()
        except StoreError as exc:
            out[name] = [str(exc), exc.location]
    out["question"] = asyncio.run(open_store(path).question(run_id))
    print(json.dumps(out))
    """
)


def env() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REACT_ENGINE_"))}
    return {**kept, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_read_only_store_lists_and_refuses_writes_with_store_error(
    unlocked_dir: Path, where: str
) -> None:
    path = unlocked_dir / "store.db"
    (run_id,) = stored(path)
    prefix = read_only(path, where)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=120, env=env()
        )

    proc = run(sys.executable, "-c", CHECK, str(path), run_id)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runs"] == [run_id] and out["question"] == "q0"
    for name in ("run", "resume"):
        message, location = out[name]
        assert location == str(path) and message.startswith(f"store {path}: ")
    cli = [sys.executable, "-m", "react_engine", "runs"]
    for command in (["list"], ["show", run_id]):
        shown = run(*cli, *command, "--store", str(path))
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        assert run_id in shown.stdout and "q0" in shown.stdout
    # A finished run's resume only reads: it prints the stored answer (writes are refused
    # through the API above, as the CHECK child shows).
    ended = run(*cli, "resume", run_id, "--store", str(path))
    assert ended.returncode == 0 and "Traceback" not in ended.stderr, ended.stderr
    assert "x" * 2000 in ended.stdout


# --- a full disk ---------------------------------------------------------------------------


def fill_at(path: Path, spare_pages: int) -> None:
    """Let the store's file grow by ``spare_pages`` pages at most: past them SQLite answers
    as on a full disk (``SQLITE_FULL``, "database or disk is full")."""

    async def limit() -> None:
        async with SQLiteDB.shared(path).statements() as execute:
            [(pages,)], _ = await execute("PRAGMA page_count", [])
            await execute(f"PRAGMA max_page_count = {pages + spare_pages}", [])

    wait(limit())


BIG = "y" * 90_000  # a final answer that needs some twenty more pages (under MAX_REPLY_CHARS)


def calling(path: Path, tool: Any, *replies: Any) -> Agent:
    return Agent(
        client=ScriptedModel(list(replies)),
        protocol="function_calling",
        store=str(path),
        model="m",
        tools=[tool],
    )


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_a_full_disk_at_the_last_commit_keeps_the_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "store.db"
    stored(path)
    fill_at(path, spare_pages=8)  # room for the run's row and its call, not for its answer
    bot = calling(path, add, tool_call_reply(("add", {"a": 2, "b": 2})), reply(BIG))
    with caplog.at_level(logging.WARNING, logger="react_engine"):
        result = bot.run("What is 2 + 2?")
    assert result.answer == BIG and result.stop_reason == "final_answer"
    assert [a.observation for a in result.tool_calls] == ["4"]
    (notice,) = [n for n in result.notices if "not stored" in n.message]
    assert "the disk is full" in notice.message and str(path) in notice.message
    assert any("not stored" in r.getMessage() for r in caplog.records)
    assert result.run_id is not None
    assert wait(open_store(path).info(result.run_id)).status == "running"  # as after a crash
    assert [e.kind for e in wait(open_store(path).entries(result.run_id))] == [
        "reply",
        "started",
        "done",
    ]


def test_a_full_disk_in_the_middle_of_a_run_raises_store_error_with_the_run_so_far(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    stored(path)

    def fetch(url: str) -> str:
        """Fetch a page."""
        fill_at(path, spare_pages=0)
        return BIG  # its record cannot be committed

    bot = calling(path, fetch, tool_call_reply(("fetch", {"url": "u"})), reply("done"))
    with pytest.raises(StoreError, match="the disk is full") as raised:
        bot.run("Fetch u")
    result = raised.value.result
    assert result is not None and result.answer is None and result.question == "Fetch u"
    assert result.run_id is not None and raised.value.location == str(path)


# --- text no column takes ------------------------------------------------------------------

ODD = "is \ud800 lone, \udfff too, and \x00 a NUL?"


def test_a_lone_surrogate_in_the_question_is_stored_and_resumed_exactly(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    model = ScriptedModel([tool_call_reply(("add", {"a": 1, "b": 2})), reply("3 \udc80")])
    bot = Agent(client=model, protocol="function_calling", store=str(path), model="m", tools=[add])
    result = bot.run(ODD)
    assert result.answer == "3 \udc80" and result.run_id is not None
    store = open_store(path)
    assert wait(store.question(result.run_id)) == ODD
    assert (
        wait(store.info(result.run_id)).question == "is \\ud800 lone, \\udfff too, and \\x00 a NUL?"
    )
    (final,) = [s for s in wait(store.steps(result.run_id)) if s.kind == "final"]
    assert final.final_answer == "3 \udc80"
    resumed = bot.resume(result.run_id)  # a finished run: replayed from the store as it was
    assert resumed.question == ODD and resumed.answer == "3 \udc80"
    assert len(model.requests) == 2  # nothing asked again


# --- one file, one store -------------------------------------------------------------------


def test_one_file_under_two_names_gives_one_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "store.db"
    stored(path)
    (tmp_path / "link.db").symlink_to(path)
    (tmp_path / "sub").mkdir()
    names = ["store.db", "./store.db", str(path), "link.db", "sub/../store.db"]

    async def leases() -> list[str]:
        busy = []
        for name in names:
            async with SQLiteRunStore(str(path)).hold("r1"):
                try:
                    async with SQLiteRunStore(name).hold("r1"):
                        pass
                except RunBusy:
                    busy.append(name)
        return busy

    assert wait(leases()) == names
    assert {SQLiteDB(name).path for name in names} == {path.resolve()}
    assert len({id(SQLiteDB(name).leases) for name in names}) == 1  # two objects, one lease


# --- what a terminal is sent ---------------------------------------------------------------

HOSTILE = "hi\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\r"


def test_runs_list_and_show_escape_stored_control_sequences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store.db"
    bot = calling(path, add, tool_call_reply(("add", {"a": 1, "b": 2})), reply(f"answer {HOSTILE}"))
    run_id = bot.run(f"question {HOSTILE}").run_id
    assert run_id is not None
    for command in (["list"], ["show", run_id], ["show", run_id, "--json"]):
        assert main(["runs", *command, "--store", str(path)]) == 0
        out = capsys.readouterr().out
        for char in "\x1b\x07\x9b\u202e\r":
            assert char not in out
        assert "\\x1b" in out or "\\u001b" in out
    assert main(["runs", "show", run_id, "--store", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "question hi\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil\\x0d" in shown
    assert "answer hi\\x1b]0;pwned" in shown
    assert main(["runs", "show", run_id, "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["question"] == f"question {HOSTILE}"


# --- PostgreSQL, without a server ----------------------------------------------------------


@pytest.mark.parametrize(
    "conninfo",
    [
        "postgresql://me:s3cret-pw@127.0.0.1:1/runs?connect_timeout=5",
        "host=127.0.0.1 port=1 password=s3cret-pw dbname",  # a string psycopg cannot read
    ],
)
def test_a_postgres_store_that_cannot_connect_is_a_store_error_without_its_password(
    conninfo: str,
) -> None:
    require_module("psycopg", "psycopg", "pip install -e '.[postgres]'", module_level=False)
    from react_engine.store import PostgresRunStore

    with pytest.raises(StoreError) as raised:
        wait(PostgresRunStore(conninfo).runs())
    assert str(raised.value).startswith("store PostgreSQL")
    assert "s3cret-pw" not in str(raised.value) and "s3cret-pw" not in repr(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
