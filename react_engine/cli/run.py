"""``react-engine run`` (one question) and ``react-engine demo`` (the weather agent)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError
from ..run.agent import Agent
from ..testing.tools import get_weather
from ..tools import Tool
from ..types import RunResult
from .agents import (
    answer,
    check_trace,
    describe_protocol,
    load_tools,
    make_agent,
    warn_unused_options,
)
from .endpoint import Endpoint, endpoint
from .exits import EXIT_NO_ANSWER
from .options import add_agent_options
from .render import RunProgress, is_tty

__all__ = ["DEMO_QUESTION", "add_demo_parser", "add_run_parser", "demo_check"]

DEMO_QUESTION = "What is the weather in Paris right now?"
"""A question the model cannot answer without calling ``get_weather``."""


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def demo_check(result: RunResult) -> tuple[bool, str]:
    """Whether the answer carries the temperature some successful ``get_weather`` returned."""
    if result.answer is None:
        return False, "no answer"
    temperatures: list[float] = []
    for step in result.steps:
        for action in step.actions:
            if action.tool != "get_weather" or action.status != "ok":
                continue
            try:
                data = json.loads(action.observation)
            except ValueError:
                continue
            if isinstance(data, dict):
                for key in ("temperature_c", "temperature_f"):
                    if isinstance(data.get(key), int | float):
                        temperatures.append(float(data[key]))
    if not temperatures:
        return False, "get_weather never returned data in this run"
    said = {float(n) for n in _NUMBER.findall(result.answer)}
    for value in temperatures:
        if value in said:
            return True, f"the answer carries the temperature get_weather returned ({value:g})"
    shown = ", ".join(f"{v:g}" for v in temperatures)
    return False, f"the answer does not carry the temperature get_weather returned ({shown})"


_RUN_DESCRIPTION = """\
Answer one question with a ReAct agent, showing each step as it happens.

The answer alone goes to stdout; the steps, progress and the run's summary go to
stderr (-q leaves them out), so `react-engine run "..." > answer.txt` keeps just the
answer. On a terminal the model's text streams as it is written, a ticker shows how long
the model has been thinking, and network retries are shown as they wait.

Where the model is: --base-url and --model (or OPENAI_BASE_URL, OPENAI_API_KEY and
REACT_ENGINE_MODEL), --local for the embedded model, or --dry-run / --scripted FILE
for no server at all.
"""

_RUN_EXAMPLES = """\
examples:
  react-engine run "What is the weather in Paris?" --local
  react-engine run "What is 6*7?" --base-url http://127.0.0.1:8080/v1 --model qwen2.5-7b
  react-engine run -q "Weather in Tokyo?" --local --tool-choice required > answer.txt
  echo "Weather in Oslo, in Fahrenheit?" | react-engine run - --local
  react-engine run "Weather in Rome?" --tools ./mytools.py --protocol text --local
  react-engine run "Weather in Paris?" --dry-run --json --trace run.jsonl

exit codes: 0 answered, 2 configuration, 3 no answer, 4 API error, 130 Ctrl-C
"""


def add_run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` to the CLI's subcommands."""
    run = sub.add_parser(
        "run",
        help="answer one question, showing each step",
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("question", help="the question; - reads it from stdin")
    add_agent_options(run)
    run.add_argument(
        "--tool-choice",
        choices=["auto", "required"],
        default="auto",
        help="'required': the first step must call a tool (then 'auto'), as the demo's does; "
        "a small model may otherwise answer from memory",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")
    run.set_defaults(handler=_cmd_run)


def add_demo_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` to the CLI's subcommands."""
    demo = sub.add_parser(
        "demo", help="the weather agent (embedded local model unless an endpoint is set)"
    )
    add_agent_options(demo)
    demo.add_argument(
        "--question",
        default=DEMO_QUESTION,
        help=f"the question to ask (default: {DEMO_QUESTION!r})",
    )
    demo.add_argument("--json", action="store_true", help="print the result as JSON, no live steps")
    demo.set_defaults(max_steps=None, handler=_cmd_demo)


def _read_question(args: argparse.Namespace) -> str:
    question: str = args.question
    if question != "-":
        return question
    if is_tty(sys.stdin) and not args.quiet:
        print("(reading the question from stdin; end it with Ctrl-D)", file=sys.stderr)
    question = sys.stdin.read().strip()
    if not question:
        raise ConfigurationError("run -: no question on stdin")
    return question


def _shown_agent(
    args: argparse.Namespace,
    ep: Endpoint,
    tools: Sequence[Tool],
    progress: RunProgress,
    **options: Any,
) -> Agent:
    """The agent of ``run`` or ``demo``, its progress on stderr, its setup said."""
    agent = make_agent(args, ep, tools, args.protocol, progress, **options)
    warn_unused_options(args, agent)
    progress.say(f"model {agent.model} · {ep.where} · protocol {describe_protocol(agent)}")
    return agent


def _cmd_run(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    check_trace(args.trace)
    question = _read_question(args)
    with endpoint(args, local_default=False) as ep:
        progress = RunProgress(args)
        agent = _shown_agent(args, ep, tools, progress)
        result = answer(args, ep, agent, progress, question, tool_choice=args.tool_choice)
    return 0 if result.answer is not None else EXIT_NO_ANSWER


def _cmd_demo(args: argparse.Namespace) -> int:
    args.question = args.question or DEMO_QUESTION
    tools = load_tools(args.tools) if args.tools else [get_weather]
    check_trace(args.trace)
    with endpoint(args, local_default=True) as ep:
        progress = RunProgress(args)
        # A 135M model given the choice after a result tends to call the same tool again:
        # on the embedded model, one round of calls, then the answer is asked for.
        max_steps = args.max_steps if args.max_steps is not None else (1 if ep.local else 6)
        agent = _shown_agent(args, ep, tools, progress, max_steps=max_steps)
        progress.say(f"question: {args.question}")
        result = answer(args, ep, agent, progress, args.question, tool_choice="required")
    ok, why = demo_check(result)
    progress.say(("✓ " if ok else "✗ ") + why)
    return 0 if ok else EXIT_NO_ANSWER
