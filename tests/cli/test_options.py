"""The options commands share are declared once (react_engine/cli/options.py), so every
command that talks to a model reads where it is the same way."""

from __future__ import annotations

import argparse

from react_engine.cli import build_parser

ENDPOINT_COMMANDS = ["run", "chat", "demo", "compare", "eval bfcl", "probe", "runs resume"]


def _command(parser: argparse.ArgumentParser, path: str) -> argparse.ArgumentParser:
    for name in path.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def test_every_command_that_talks_to_a_model_has_the_same_endpoint_options() -> None:
    parser = build_parser()
    seen = {path: _options(_command(parser, path)) for path in ENDPOINT_COMMANDS}
    for flag in ("--base-url", "--api-key-env"):
        helps = {path: options[flag].help for path, options in seen.items()}
        assert len(set(helps.values())) == 1, helps
    local = {p: o["--local"].help for p, o in seen.items()}
    assert len(set(local.values())) == 1, local
    assert "probe" in local  # probe --local probes the embedded model


def test_compare_and_eval_share_the_evaluation_options() -> None:
    parser = build_parser()
    compare, bfcl = (_options(_command(parser, p)) for p in ("compare", "eval bfcl"))
    for flag in ("--seed", "--temperature", "--max-tokens", "--concurrency", "--ray", "--results"):
        assert (compare[flag].help, compare[flag].default) == (bfcl[flag].help, bfcl[flag].default)
    assert (compare["--ray"].nargs, compare["--ray"].const) == ("?", "")  # ADDRESS optional
    assert "--resume" in compare and "--resume" in bfcl
