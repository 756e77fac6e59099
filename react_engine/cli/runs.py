"""``react-engine runs list | show ID | resume ID``: the runs of a store."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import re
import shlex
import sys
from pathlib import Path

from ..errors import ModelAPIError, UnknownApprovalError
from ..store import RunStore, open_store
from ..store.approvals import waiting
from ..store.runs import RunInfo
from ..types import ActionRecord, to_jsonable
from .agents import load_tools, make_agent, show_result
from .endpoint import describe_api_error, endpoint
from .exits import EXIT_API, EXIT_CONFIG, EXIT_NO_ANSWER, Exit
from .options import add_agent_options
from .render import RunProgress, format_history

__all__ = ["add_runs_parser", "run_runs_command"]


def add_runs_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``runs`` (list, show, resume) to the CLI's subcommands."""
    runs = subparsers.add_parser("runs", help="the runs kept in a store: list, show, resume")
    actions = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the latest runs, newest first")
    listing.add_argument(
        "--limit", type=int, default=20, metavar="N", help="show at most N runs (default 20)"
    )
    show = actions.add_parser("show", help="one run: its status and the steps committed")
    show.add_argument("run_id", metavar="ID", help="the run's id (runs list shows them)")
    show.add_argument("--json", action="store_true", help="print the run as JSON")
    show.add_argument("--html", metavar="FILE", help="also write the run as an HTML page to FILE")
    resume = actions.add_parser(
        "resume", help="finish a run whose process died, or one awaiting approval"
    )
    resume.add_argument("run_id", metavar="ID", help="the run's id (runs list shows them)")
    resume.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="CALL_ID=yes|no",
        help="the verdict on a call awaiting approval; repeatable",
    )
    resume.add_argument("--json", action="store_true", help="print the result as JSON")
    add_agent_options(resume)
    for p in (listing, show, resume):
        p.add_argument(
            "--store",
            metavar="PATH|URI",
            help="the SQLite file, or a postgresql:// URI (default: $REACT_ENGINE_STORE, "
            "else ~/.local/state/react-engine/store.db)",
        )
    runs.set_defaults(handler=run_runs_command)


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What a terminal must not be sent as it is: control characters (escape sequences, CR),
bidirectional overrides, and lone surrogates."""


def printable(text: str) -> str:
    """Stored text (anyone may have written it), each unsafe character escaped."""
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _print(text: str) -> None:
    print(printable(text))


def run_runs_command(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    if args.runs_command == "list":
        return asyncio.run(_list(store, args))
    if args.runs_command == "show":
        return asyncio.run(_show(store, args))
    return _resume(store, args)


async def _list(store: RunStore, args: argparse.Namespace) -> int:
    runs = await store.runs(args.limit)
    if not runs:
        _print(f"no runs in {store}")
    for run in runs:
        question = run.question if len(run.question) <= 50 else run.question[:49] + "…"
        question = " ".join(printable(question).split())  # one line per run
        when = datetime.datetime.fromtimestamp(run.updated)
        _print(f"{run.id}  {when:%Y-%m-%d %H:%M:%S}  {run.status:<18} {run.model}  {question}")
    return 0


async def _show(store: RunStore, args: argparse.Namespace) -> int:
    info = await store.info(args.run_id)
    steps = await store.steps(args.run_id)
    result = await store.result(args.run_id) or {}
    if args.html:
        from ..report.run import run_html, stored_run_records

        Path(args.html).write_text(run_html(stored_run_records(info, steps, result)), "utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    if args.json:
        payload = {**to_jsonable(info), "result": result, "steps": to_jsonable(steps)}
        # JSON escapes the C0 controls itself; the rest (a C1 CSI, a bidi override, a lone
        # surrogate) as \\uXXXX, which reads back as the same text.
        text = json.dumps(payload, ensure_ascii=False, indent=2)
        print(_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
        return 0
    _print(f"run {info.id} · {info.status} · model {info.model} · protocol {info.protocol}")
    _print(f"question: {info.question}")
    if steps:
        _print(format_history(steps))
    entries = await store.entries(args.run_id)
    calls = {e.key: e for e in entries if e.kind in ("started", "done")}
    for key, entry in calls.items():
        if entry.kind == "started":
            _print(f"in flight when the process stopped: {entry.body['tool']} ({key})")
    for call in result.get("pending") or ():
        _print(f"awaiting approval: {call['id']} {call['tool']}({call['raw_arguments']})")
    if result.get("answer") is not None:
        _print(f"answer: {result['answer']}")
    return 0


def _resume(store: RunStore, args: argparse.Namespace) -> int:
    approvals: dict[str, bool] = {}
    for given in args.approve:
        call_id, sep, verdict = given.partition("=")
        if not sep or verdict not in ("yes", "no"):
            raise Exit(f"--approve takes CALL_ID=yes or CALL_ID=no, not {given!r}", EXIT_CONFIG)
        approvals[call_id] = verdict == "yes"
    info, pending = asyncio.run(_stored(store, args.run_id))
    unknown = [i for i in approvals if i not in {c.id for c in pending}]
    if unknown:  # before any endpoint is needed; the calls awaiting approval still wait
        waiting_ids = tuple(c.id for c in pending)
        raise Exit(str(UnknownApprovalError(info.id, tuple(unknown), waiting_ids)), EXIT_CONFIG)
    if info.status not in ("running", "awaiting_approval", "failed"):
        return asyncio.run(_finished(store, info, args))  # nothing to run: no model needed
    if any(c.id not in approvals for c in pending):
        _how_to_approve(info.id, pending, args)
        return EXIT_NO_ANSWER
    tools = load_tools(args.tools)
    with endpoint(args) as ep:
        # Calls the resumed run makes that need approval wait for the next resume.
        defer = "defer" if any(t.requires_approval for t in tools) else None
        progress = RunProgress(args)
        progress.live = None  # a resumed run is not streamed: its steps print as they end
        options = {"on_step": progress.on_step, "store": store, "approve": defer}
        agent = make_agent(args, ep, tools, args.protocol, None, **options)
        try:
            result = agent.resume(args.run_id, approvals=approvals)
        except ModelAPIError as exc:
            raise Exit(describe_api_error(exc, ep, agent.model), EXIT_API) from None
        show_result(result, args)
    if result.pending:
        _how_to_approve(info.id, result.pending, args)
    return 0 if result.answer is not None else EXIT_NO_ANSWER


async def _stored(store: RunStore, run_id: str) -> tuple[RunInfo, list[ActionRecord]]:
    info = await store.info(run_id)
    return info, [w.call for w in waiting(info.status, await store.entries(run_id))]


def _how_to_approve(run_id: str, pending: list[ActionRecord], args: argparse.Namespace) -> None:
    """On stderr: the calls still awaiting approval, and the command that answers them."""
    print(f"run {run_id} waits for approval of {len(pending)} call(s), not run:", file=sys.stderr)
    for call in pending:
        print(f"  {call.id}  {call.tool}({call.raw_arguments})", file=sys.stderr)
    store = f" --store {shlex.quote(args.store)}" if args.store else ""
    answers = " ".join(f"--approve {shlex.quote(c.id + '=yes')}" for c in pending)
    print(
        "answer each with --approve CALL_ID=yes (run it) or CALL_ID=no (deny it), with the "
        "model options the run goes on with (--model, --base-url, --tools ...), e.g.:\n"
        f"  react-engine runs resume {shlex.quote(run_id)}{store} {answers}",
        file=sys.stderr,
    )


async def _finished(store: RunStore, info: RunInfo, args: argparse.Namespace) -> int:
    """A run that has ended: its stored answer, as ``run`` printed it (nothing runs)."""
    result = await store.result(info.id) or {}
    answer = result.get("answer")
    if args.json:
        payload = {
            "question": info.question,
            "answer": answer,
            "stop_reason": result.get("stop_reason", info.status),
            "error": result.get("error"),
            "model": info.model,
            "protocol": info.protocol,
            "steps": to_jsonable(await store.steps(info.id)),
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        if not args.quiet:
            print(f"run {info.id} has ended ({info.status}): its stored answer", file=sys.stderr)
        if answer is not None:
            print(answer)
    return 0 if answer is not None else EXIT_NO_ANSWER
