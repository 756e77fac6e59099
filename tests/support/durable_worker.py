"""A worker process for tests/store/test_durable_runs.py: runs (or resumes) a 3-call run against
a loopback server with a store, and dies by SIGKILL where it is told to.

    python durable_worker.py DB URL EFFECTS run RUN_ID [--kill-after N] [--kill-in-tool K]
    python durable_worker.py DB URL EFFECTS resume RUN_ID [--approve ID=yes|no ...]

DB is a SQLite file or a postgresql:// URI.

``--kill-after N``: SIGKILL right after the store's N-th commit (transaction) of the
run's journal.
``--kill-in-tool K``: SIGKILL inside the K-th call, after its side effect. Each call of
``act`` appends one line to EFFECTS (its side effect), so the test counts how often each ran.
``--slow S``: each call of ``act`` takes S seconds. A resume refused because another worker
holds the run prints ``{"busy": RUN_ID}``.
The result is printed as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from react_engine import Agent
from react_engine.store import RunBusy, RunStore, open_store
from react_engine.tools import ToolAnnotations, tool


def killing_store(target: str, kill_after: int | None) -> RunStore:
    """The store at ``target`` (a SQLite file or a postgresql:// URI), killing this process
    right after its ``kill_after``-th commit of the run's journal."""
    store = open_store(target)
    commits = 0
    add_many = store.add_many

    async def counted(run_id: str, entries: Any) -> None:
        nonlocal commits
        await add_many(run_id, entries)
        commits += 1
        if kill_after is not None and commits == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    store.add_many = counted  # type: ignore[method-assign]
    return store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("url")
    parser.add_argument("effects")
    parser.add_argument("mode", choices=["run", "resume"])
    parser.add_argument("run_id")
    parser.add_argument("--kill-after", type=int)
    parser.add_argument("--kill-in-tool", type=int)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--approval", action="store_true", help='approve="defer" on act')
    parser.add_argument("--approve", action="append", default=[])
    parser.add_argument("--slow", type=float, default=0.0, help="each call takes this long")
    args = parser.parse_args()
    effects = Path(args.effects)

    def act(n: int) -> str:
        """Do step n (a side effect: one line in the effects file)."""
        with effects.open("a") as fh:
            fh.write(f"{n}\n")
        if args.kill_in_tool == n:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(args.slow)
        return f"done {n}"

    made = tool(
        requires_approval=args.approval, annotations=ToolAnnotations(idempotent=args.idempotent)
    )(act)
    agent = Agent(
        "mock-model",
        [made],
        base_url=args.url,
        api_key="sk-test",
        protocol="function_calling",
        store=killing_store(args.db, args.kill_after),
        approve="defer" if args.approval else None,
    )
    if args.mode == "run":
        result = agent.run("do the three steps", run_id=args.run_id)
    else:
        approvals = {k: v == "yes" for k, v in (a.split("=", 1) for a in args.approve)}
        try:
            result = agent.resume(args.run_id, approvals=approvals)
        except RunBusy:
            sys.stdout.write(json.dumps({"busy": args.run_id}) + "\n")
            return
    out = {
        "answer": result.answer,
        "stop_reason": result.stop_reason,
        "pending": [a.id for a in result.pending],
        "calls": [[a.tool, a.status, a.observation] for a in result.tool_calls],
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
