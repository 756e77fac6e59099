"""``react-engine compare``: the front end of :mod:`react_engine.compare`."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..compare.run import (
    CompareSettings,
    Target,
    format_report,
    run_comparison,
    write_outputs,
)
from ..compare.suite import PROTOCOLS, load_tasks
from ..errors import ModelAPIError
from ..protocols.registry import protocol_names
from .endpoint import Endpoint, describe_api_error, endpoint
from .exits import EXIT_API, Exit
from .options import add_endpoint_options, add_evaluation_options, batch_options

__all__ = ["add_compare_parser"]


def add_compare_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``compare`` to the CLI's subcommands."""
    compare = sub.add_parser(
        "compare", help="run the task suite under each protocol and compare them side by side"
    )
    add_endpoint_options(compare, many_models=True)
    compare.add_argument(
        "--protocol",
        action="append",
        choices=list(protocol_names()[1:]),
        help="a protocol to run; repeat for several (default: function_calling and text)",
    )
    compare.add_argument(
        "--tasks",
        metavar="DIR",
        help="a directory of task files (default: the suite shipped with react-engine)",
    )
    compare.add_argument(
        "--task", action="append", metavar="ID", help="run only this task; repeatable"
    )
    compare.add_argument(
        "--scripted", action="store_true", help="replay each task's scripted transcripts: no server"
    )
    compare.add_argument(
        "--out",
        metavar="DIR",
        help="write comparison.json, .csv, .txt and .png here (the PNG needs matplotlib)",
    )
    compare.add_argument("--no-plot", action="store_true", help="skip the PNG chart")
    compare.add_argument(
        "--html",
        metavar="FILE",
        help="write the comparison as one HTML page (charts, each task per protocol, each run)",
    )
    add_evaluation_options(
        compare, tool_choice_help="'required': each run's first step must call a tool (then 'auto')"
    )
    compare.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines or progress bar on stderr"
    )
    compare.set_defaults(handler=_cmd_compare)


@contextlib.contextmanager
def _compare_targets(
    args: argparse.Namespace, protocols: Sequence[str]
) -> Iterator[tuple[list[Target], str]]:
    chosen = [p for p in protocol_names()[1:] if p in protocols]
    if args.scripted:
        yield [Target("scripted", p, scripted=True) for p in chosen], "scripted"
        return
    with endpoint(args, local_default=True) as ep:
        models = [ep.model] if ep.local else args.model or [ep.model]
        target = functools.partial(Target, base_url=ep.base_url, api_key=ep.api_key)
        where = "embedded llama.cpp server" if ep.local else ep.where
        yield [target(m, p) for m in models for p in chosen], where


def _cmd_compare(args: argparse.Namespace) -> int:
    batch = batch_options(args)
    tasks = load_tasks(Path(args.tasks) if args.tasks else None, args.task or ())
    settings = CompareSettings(
        seed=args.seed,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_attempts=args.max_retries + 1,
        tool_choice=args.tool_choice,
    )
    with _compare_targets(args, args.protocol or PROTOCOLS) as (targets, source):
        try:
            report = run_comparison(
                tasks,
                targets,
                settings,
                source=source,
                quiet=args.quiet,
                **batch,
            )
        except ModelAPIError as exc:
            first = Endpoint(targets[0].model, targets[0].base_url, targets[0].api_key)
            raise Exit(describe_api_error(exc, first, first.model), EXIT_API) from None
    print(format_report(report))
    if args.html:
        from ..report.comparison import comparison_html

        Path(args.html).write_text(comparison_html(report), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    if args.out:
        written = write_outputs(report, Path(args.out), plot=not args.no_plot)
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
        if not args.no_plot and not any(p.suffix == ".png" for p in written):
            print(
                "warning: comparison.png skipped: matplotlib is not installed "
                "(pip install 'react-engine[plot]', or --no-plot to say you want none)",
                file=sys.stderr,
            )
    return 0
