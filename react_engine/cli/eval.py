"""``react-engine eval bfcl``: the front end of :mod:`react_engine.eval.bfcl`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..eval.bfcl import DEFAULT_PROTOCOLS, AnyCase, eval_protocols, run_bfcl
from ..eval.bfcl_case import EvalSettings
from ..eval.bfcl_data import CATEGORIES, DEFAULT_CATEGORIES, load_cases
from ..eval.bfcl_multi_turn import MULTI_TURN_CATEGORIES, load_multi_turn_cases
from ..eval.bfcl_prompt import BFCL_PROMPT
from ..eval.bfcl_recording import Recorded, default_recordings, load_recording, save_recording
from ..eval.bfcl_report import format_report, report_json
from ..harness.report import json_text
from ..version import __version__
from .endpoint import endpoint
from .options import add_endpoint_options, add_evaluation_options, batch_options

__all__ = ["add_eval_parser", "run_eval_command"]


def add_eval_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``eval`` (with its one benchmark, ``bfcl``) to the CLI's subcommands."""
    evaluate = subparsers.add_parser("eval", help="benchmarks: eval bfcl (BFCL's AST categories)")
    benches = evaluate.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    p = benches.add_parser(
        "bfcl",
        help="BFCL's simple/multiple/parallel/parallel_multiple/irrelevance cases, one step "
        "each, under each protocol",
    )
    p.add_argument(
        "--scripted",
        nargs="?",
        const="",
        metavar="DIR",
        help="no server: replay the replies recorded in DIR (default: fixtures/bfcl, or "
        "fixtures/bfcl/multi-turn when only multi-turn categories or cases are asked for), "
        "under each protocol recorded there",
    )
    p.add_argument(
        "--record",
        nargs="?",
        const="",
        metavar="DIR",
        help="write the live replies to DIR/<protocol>.json (default: fixtures/bfcl, or "
        "fixtures/bfcl/multi-turn as for --scripted)",
    )
    p.add_argument(
        "--categories",
        nargs="+",
        choices=[*CATEGORIES, *MULTI_TURN_CATEGORIES],
        metavar="CAT",
        help=f"categories to run, of {', '.join([*CATEGORIES, *MULTI_TURN_CATEGORIES])} "
        f"(default: {', '.join(DEFAULT_CATEGORIES)}; --scripted: every one recorded)",
    )
    p.add_argument("--limit", type=int, metavar="N", help="the first N cases of each category")
    p.add_argument(
        "--cases",
        nargs="+",
        metavar="ID",
        help="only these cases, by BFCL id (multi_turn_base_100...)",
    )
    p.add_argument(
        "--protocol",
        action="append",
        choices=list(eval_protocols()),
        help=f"a protocol to run; repeatable (default: {', '.join(DEFAULT_PROTOCOLS)}; "
        f"{BFCL_PROMPT}: the text protocol with BFCL's Prompt-mode system prompt)",
    )
    p.add_argument("--out", metavar="FILE", help="write the report (every case) as JSON")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the report as one HTML page (charts, each case per protocol, each reply)",
    )
    add_endpoint_options(p, retries=False)
    add_evaluation_options(
        p,
        tool_choice_help="'required': every reply must call a tool (irrelevance then fails by "
        "design)",
    )
    p.add_argument(
        "--no-constraints",
        action="store_true",
        help="no constrained decoding even where the server supports it: the parser alone",
    )
    p.add_argument(
        "--max-turn-steps",
        type=int,
        metavar="N",
        help="multi-turn: steps a turn may take before the case is force-terminated "
        "(default: BFCL's limit)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines or progress bar on stderr"
    )
    p.set_defaults(handler=run_eval_command)


def run_eval_command(args: argparse.Namespace) -> int:
    """``react-engine eval bfcl``: print the table; 0 once the run is complete."""
    for flag, value in (("--limit", args.limit), ("--max-turn-steps", args.max_turn_steps)):
        if value is not None and value < 1:
            raise ConfigurationError(f"{flag} must be at least 1")
    batch = {**batch_options(args), "quiet": args.quiet}
    scripted, recording = args.scripted is not None, args.record is not None
    if scripted and (recording or args.local):
        raise ConfigurationError("--scripted replays recordings: it takes no --record or --local")
    # Without DIR: the checkout's recordings (checked before a live run, not after it).
    named = args.categories or [i.rsplit("_", 1)[0] for i in args.cases or ()]
    multi_turn = bool(named) and all(c in MULTI_TURN_CATEGORIES for c in named)
    for flag, given in (("--scripted", "scripted"), ("--record", "record")):
        if getattr(args, given) == "":
            directory = default_recordings(flag)
            setattr(args, given, str(directory / "multi-turn" if multi_turn else directory))
    categories = args.categories or list(DEFAULT_CATEGORIES)
    if args.cases and not args.categories:  # the categories the ids belong to
        categories = [*CATEGORIES, *MULTI_TURN_CATEGORIES]
    protocols = [p for p in eval_protocols() if p in (args.protocol or DEFAULT_PROTOCOLS)]
    settings = EvalSettings(
        temperature=args.temperature,
        seed=args.seed,
        max_tokens=args.max_tokens,
        tool_choice=args.tool_choice,
        constrained=not args.no_constraints,
        max_turn_steps=args.max_turn_steps,
    )
    if scripted:
        directory = Path(args.scripted)
        if not args.protocol:  # the protocols recorded there
            protocols = [
                p for p in eval_protocols() if (directory / f"{p}.json").is_file()
            ] or protocols
        recorded: dict[str, dict[str, Recorded]] = {}
        meta: dict[str, Any] = {}
        for protocol in protocols:
            meta, recorded[protocol] = load_recording(directory, protocol)
        settings = _recorded_settings(meta, settings)
        ids = sorted({i for replies in recorded.values() for i in replies})
        if args.cases:
            ids = [i for i in ids if i in set(args.cases)]
        if not args.categories:  # every category recorded there
            stems = {i.rsplit("_", 1)[0] for i in ids}
            categories = [c for c in CATEGORIES if CATEGORIES[c] in stems]
            categories += [c for c in MULTI_TURN_CATEGORIES if c in stems]
        cases = _load_any(categories, args.limit, ids)
        if not cases:
            raise ConfigurationError(f"the recordings in {directory} hold none of these categories")
        report = run_bfcl(
            cases,
            protocols,
            recorded=recorded,
            model=str(meta.get("model", "scripted")),
            source=f"recorded replies in {directory}",
            settings=settings,
            **batch,
        )
    else:
        cases = _load_any(categories, args.limit, args.cases or ())
        if not cases:
            raise ConfigurationError("no BFCL case has these ids in these categories")
        record: dict[str, dict[str, Recorded]] | None = {} if recording else None
        with endpoint(args, alternatives=", --local for the embedded model, or --scripted") as ep:
            report = run_bfcl(
                cases,
                protocols,
                endpoint=(ep.base_url, ep.api_key),
                model=ep.model,
                source="embedded llama.cpp server" if ep.local else ep.where,
                settings=settings,
                record=record,
                **batch,
            )
        if record is not None:
            meta = {
                "model": report.model,
                "source": report.source,
                "recorded_at": report.started_at,
                "settings": asdict(settings),
                "react_engine": __version__,
            }
            for protocol, replies in record.items():
                path = save_recording(Path(args.record), protocol, replies, meta)
                print(f"wrote {path}", file=sys.stderr)
    print(format_report(report))
    if args.out:
        Path(args.out).write_text(json_text(report_json(report), indent=1), encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    if args.html:
        from ..report.bfcl import bfcl_html

        Path(args.html).write_text(bfcl_html(report), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _recorded_settings(meta: Mapping[str, Any], given: EvalSettings) -> EvalSettings:
    """The settings the replies were recorded with, where the recording names them."""
    recorded = meta.get("settings")
    if not isinstance(recorded, Mapping):
        return given
    known = {f.name for f in fields(EvalSettings)}
    return EvalSettings(**{k: v for k, v in recorded.items() if k in known})


def _load_any(categories: Sequence[str], limit: int | None, only: Sequence[str]) -> list[AnyCase]:
    ast = [c for c in categories if c in CATEGORIES]
    multi = [c for c in categories if c in MULTI_TURN_CATEGORIES]
    return [
        *load_cases(ast, limit=limit, only=only),
        *load_multi_turn_cases(multi, limit=limit, only=only),
    ]
