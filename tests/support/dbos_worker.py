"""A worker process for tests/integrations/test_dbos*.py: an agent whose runs are DBOS
workflows, against a loopback server, with DBOS's system database at SYSDB (a ``sqlite://``
URL or a ``postgresql://`` URI).

    python dbos_worker.py SYSDB URL EFFECTS run WFID [--kill-in-tool K] [--idempotent]
    python dbos_worker.py SYSDB URL EFFECTS recover WFID [--idempotent]
    python dbos_worker.py SYSDB URL EFFECTS work EXECUTOR --limit N --period PERIOD

``run`` starts the run WFID ("go") and prints its result as one JSON line; ``recover``
launches DBOS (which recovers the runs a dead process of the same executor left) and
prints the result of WFID. ``work`` serves the queue ``runs`` (2 runs at once, one per
worker) with each model request on the queue ``provider`` (at most N started per PERIOD seconds),
until killed; EXECUTOR is its DBOS executor id.

The tool ``act(n)`` appends ``WFID:n`` to EFFECTS (its side effect, counted by the tests);
``--kill-in-tool K``: this process dies by SIGKILL inside the K-th call, after its side
effect; ``--slow-in-tool K``: the K-th call overruns its timeout; ``--fail-in-tool K``:
the K-th call raises. ``--idempotent`` marks ``act`` idempotent. ``--approval``: ``act`` requires
approval (the run waits for one). ``--typed``: the run's ``output_type`` is ``Done``.
``--session ID --sessions FILE``: the run is a turn of the SQLite session ID in FILE.
``--question``: the run's question ("go"). ``--blocking``: the run is started with the
blocking ``DBOSAgent.run``, from inside a running event loop. ``--protocol``: the agent's (function calling).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from react_engine import Agent, Tool
from react_engine.integrations.dbos import DBOSAgent, agent_queue
from react_engine.store import open_store
from react_engine.tools import ToolAnnotations

APP = "react-engine-tests"


class Done(BaseModel):
    """The typed answer of ``--typed`` runs."""

    summary: str


def build(args: argparse.Namespace) -> DBOSAgent[str]:
    def act(n: int) -> str:
        """Do step n."""
        workflow = DBOS.workflow_id or "-"
        with open(args.effects, "a") as fh:
            fh.write(f"{workflow}:{n}\n")
        if args.kill_in_tool == n:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.slow_in_tool == n:
            time.sleep(1.0)  # past its 0.3 s timeout
        if args.fail_in_tool == n:
            raise ValueError(f"no luck with {n}")
        return f"done {n}"

    tool = Tool.from_function(
        act,
        requires_approval=args.approval,
        timeout=0.3 if args.slow_in_tool else None,
        annotations=ToolAnnotations(idempotent=args.idempotent),
    )
    agent = Agent("m", [tool], base_url=args.url, protocol=args.protocol)
    requests = "provider" if args.mode == "work" else None
    sessions = open_store(args.sessions).session
    return DBOSAgent(agent, name="test", requests=requests, sessions=sessions)


def launch(sysdb: str, executor: str) -> None:
    DBOS(
        config={
            "name": APP,
            "system_database_url": sysdb,
            "application_version": "1",
            "executor_id": executor,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()


def transcript(result: Any) -> dict[str, Any]:
    return {
        "answer": result.answer,
        "output": result.output.model_dump() if isinstance(result.output, Done) else None,
        "stop_reason": result.stop_reason,
        "steps": [
            {
                "kind": s.kind,
                "text": s.text,
                "final_answer": s.final_answer,
                "actions": [
                    [a.id, a.tool, a.arguments, a.status, a.observation] for a in s.actions
                ],
            }
            for s in result.steps
        ],
    }


async def result_of(durable: DBOSAgent[str], args: argparse.Namespace) -> Any:
    mode, workflow_id = args.mode, args.name
    if args.blocking:  # DBOSAgent.run, called where an event loop runs
        return durable.run(args.question, workflow_id=workflow_id)
    if mode == "run":
        options: dict[str, Any] = {"output_type": Done} if args.typed else {}
        handle = await durable.start(
            args.question, workflow_id=workflow_id, session_id=args.session, **options
        )
    else:
        handle = await DBOS.retrieve_workflow_async(workflow_id)
    return await handle.get_result()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sysdb")
    parser.add_argument("url")
    parser.add_argument("effects")
    parser.add_argument("mode", choices=["run", "recover", "work"])
    parser.add_argument("name")
    parser.add_argument("--kill-in-tool", type=int)
    parser.add_argument("--slow-in-tool", type=int)
    parser.add_argument("--fail-in-tool", type=int)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--approval", action="store_true")
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--question", default="go")
    parser.add_argument("--typed", action="store_true")
    parser.add_argument("--blocking", action="store_true")
    parser.add_argument("--protocol", default="function_calling")
    parser.add_argument("--session")
    parser.add_argument("--sessions", help="the SQLite file of the sessions")
    args = parser.parse_args()
    durable = build(args)
    if args.mode == "work":
        launch(args.sysdb, args.name)
        agent_queue("runs", concurrency=2, worker_concurrency=1, polling_interval=0.05)
        agent_queue(
            "provider",
            limiter={"limit": args.limit, "period": args.period},
            polling_interval=0.05,
            per_provider=True,
        )
        print("ready", flush=True)
        while True:
            time.sleep(1)
    launch(args.sysdb, "local")
    result = asyncio.run(result_of(durable, args))
    print(json.dumps(transcript(result)), flush=True)
    DBOS.destroy()
    os._exit(0)  # not waiting for DBOS's idle executor threads to be joined at exit


if __name__ == "__main__":
    main()
