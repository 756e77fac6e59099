"""``react-engine chat``: the multi-turn conversation (a REPL) and its slash commands."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ..errors import ModelAPIError, RunAborted
from ..paths import state_dir
from ..protocols.registry import protocol_names
from ..run.agent import Agent
from ..run.conversation import Conversation
from ..store import open_store
from ..tools import Tool
from ..transport.wire import mask_key
from ..types import Step
from .agents import (
    check_trace,
    describe_protocol,
    load_tools,
    make_agent,
    sampling_settings,
    warn_unused_options,
)
from .endpoint import Endpoint, describe_api_error, endpoint
from .options import add_agent_options
from .render import RunProgress, format_history, is_tty, stop_words

__all__ = ["ChatSession", "add_chat_parser", "clean_line", "history_path"]


def add_chat_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``chat`` to the CLI's subcommands."""
    chat = sub.add_parser(
        "chat",
        help="an interactive multi-turn conversation",
        description="A multi-turn conversation: type a question, or /help for the commands. "
        "Answers go to stdout, steps and progress to stderr. On a terminal, lines can be "
        "edited and earlier questions recalled (arrow keys); they are kept in a history file "
        f"({_HISTORY_HINT}).",
    )
    add_agent_options(chat)
    chat.add_argument(
        "--history",
        metavar="FILE",
        help=f"the file that keeps the questions typed on a terminal (default: {_HISTORY_HINT})",
    )
    chat.add_argument(
        "--no-history", action="store_true", help="keep no history file for this session"
    )
    chat.add_argument(
        "--session",
        metavar="NAME",
        help="keep the conversation in this session of the store ($REACT_ENGINE_STORE)",
    )
    chat.set_defaults(handler=_cmd_chat)


_HISTORY_HINT = (
    "$XDG_STATE_HOME/react-engine/chat_history, else ~/.local/state/react-engine/chat_history"
)

_HELP = """\
Commands:
  /help             this help
  /history          the conversation so far: questions, tool calls, answers
  /tools            the tools the agent may call
  /settings         model, endpoint, API key (masked), protocol, limits
  /trace FILE       append each turn's trace to FILE (JSON Lines); /trace off to stop
  /protocol NAME    switch protocol: {protocols} (history kept)
  /exit             leave (Ctrl-D too)
Ctrl-C during an answer interrupts it; the conversation keeps what was done so far."""


class ChatSession:
    """The loop of ``react-engine chat``: answers on ``out``; steps, figures, errors on ``err``."""

    def __init__(
        self,
        args: argparse.Namespace,
        endpoint: Endpoint,
        tools: Sequence[Tool],
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        read_line: Callable[[str], str] = input,
    ) -> None:
        self.args = args
        self.endpoint = endpoint
        self.tools = list(tools)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.read_line = read_line
        self.protocol: str = args.protocol
        self.trace_path: str | None = args.trace or None
        self.progress = RunProgress(args, stream=self.err)
        self.agent = self._agent()
        session = None if args.session is None else open_store().session(args.session)
        self.conversation = Conversation(self.agent, session=session)

    def _agent(self) -> Agent:
        return make_agent(self.args, self.endpoint, self.tools, self.protocol, self.progress)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A line on stderr: progress, figures, errors."""
        print(text, file=self.err, flush=True)

    def loop(self) -> int:
        if not self.args.quiet:
            self.note(
                f"react-engine chat · model {self.agent.model} · {self.endpoint.where} · "
                f"protocol {describe_protocol(self.agent)}\nType a question, or /help."
            )
        while True:
            try:
                line = clean_line(self.read_line("you> "))
            except EOFError:
                self.say("")
                return 0
            except KeyboardInterrupt:
                self.note("\n(Ctrl-C: type /exit or press Ctrl-D to leave)")
                continue
            if not line:
                continue
            if not line.startswith("/"):
                self.ask(line)
            elif not self.command(line):
                return 0

    def command(self, line: str) -> bool:
        """Run a slash command; ``False`` means leave."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/exit", "/quit"):
            self.say("bye")
            return False
        if name == "/help":
            self.say(_HELP.format(protocols=", ".join(protocol_names())))
        elif name == "/history":
            self.say(format_history(self.conversation.history))
        elif name == "/tools":
            for t in self.tools:
                first = (t.description or "\n").splitlines()[0]
                self.say(f"  {t.name}({', '.join(t.argument_names)}): {first}")
        elif name == "/settings":
            self.say(self._settings_text())
        elif name == "/trace":
            self._set_trace(rest)
        elif name == "/protocol":
            self._set_protocol(rest)
        else:
            self.say(f"unknown command {name}; /help lists the commands")
        return True

    def _settings_text(self) -> str:
        ep, agent, args = self.endpoint, self.agent, self.args
        s = sampling_settings(args, ep)
        fields = ("temperature", "seed", "max_tokens")
        sampling = ", ".join(f"{k}={getattr(s, k)}" for k in fields if getattr(s, k) is not None)
        key = f"{mask_key(ep.api_key)} (from ${ep.key_env})" if ep.client is None else "(not used)"
        return "\n".join(
            [
                f"  model:     {agent.model}",
                f"  endpoint:  {ep.where}",
                f"  API key:   {key}",
                f"  protocol:  {self.protocol} -> {describe_protocol(agent)}",
                f"  template:  {args.template or '(the model family default)'}",
                f"  tools:     {', '.join(t.name for t in self.tools)}",
                f"  max steps: {args.max_steps}",
                f"  sampling:  {sampling or '(server defaults)'}",
                f"  trace:     {self.trace_path or 'off'}",
                f"  history:   {len(self.conversation.history)} items",
            ]
        )

    def _set_trace(self, rest: str) -> None:
        if not rest:
            self.say(f"trace: {self.trace_path or 'off'} (usage: /trace FILE or /trace off)")
        elif rest == "off":
            self.trace_path = None
            self.say("trace: off")
        else:
            try:
                open(rest, "a", encoding="utf-8").close()
            except OSError as exc:
                self.say(f"cannot write {rest}: {exc.strerror or exc}")
                return
            self.trace_path = rest
            self.say(f"trace: appending each turn to {rest}")

    def _set_protocol(self, rest: str) -> None:
        if rest not in protocol_names():
            self.say(f"protocol: {self.protocol}; usage: /protocol {'|'.join(protocol_names())}")
            return
        self.protocol = rest
        self.agent = self.conversation.agent = self._agent()
        self.say(f"protocol: {describe_protocol(self.agent)}; the history is kept")

    def ask(self, question: str) -> None:
        history = self.conversation.history
        before = len(history)
        try:
            with self.progress.ticker:
                result = asyncio.run(self.conversation.aask(question, trace=self.trace_path))
        except KeyboardInterrupt:
            steps = [i for i in history[before:] if isinstance(i, Step)]
            self.note(
                f"\n(interrupted: the conversation keeps this question and the {len(steps)} "
                "step(s) done so far)"
            )
            return
        except RunAborted as exc:
            result = exc.result
        except ModelAPIError as exc:
            self.note(f"error: {describe_api_error(exc, self.endpoint, self.agent.model)}")
            return
        if result.answer is not None:
            self.say(f"assistant> {result.answer}")
        else:
            self.note(
                f"(no answer: {stop_words(result)}{': ' + result.error if result.error else ''})"
            )
        if self.args.quiet:
            return
        u = result.usage
        self.note(
            f"   [{result.protocol} · {u.requests} LLM call(s) · {len(result.tool_calls)} tool "
            f"call(s) · {u.prompt_tokens}+{u.completion_tokens} tokens · {result.duration_s:.1f}s]"
        )
        shown = {notice.message for step in result.steps for notice in step.notices}
        for event in (notice.message for notice in result.notices):
            if event not in shown:  # the run's own events, which no step printed
                self.note(f"   ! {event}")


_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # an escape sequence a key sent (arrows: ESC [ A)
    r"|\x1b[@-_]"  # a two-character escape
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"  # any other control character (tab aside)
)


def clean_line(line: str) -> str:
    """A typed line without control characters, key escape sequences or outer spaces."""
    return _CONTROL.sub("", line).strip()


def history_path() -> Path:
    """Where ``chat`` keeps the questions typed on a terminal (the XDG state directory)."""
    return state_dir() / "chat_history"


@contextlib.contextmanager
def _line_editing(args: argparse.Namespace) -> Iterator[None]:
    """On a terminal with ``readline``, line editing and the saved history of questions."""
    if not (is_tty(sys.stdin) and is_tty(sys.stdout)):
        yield
        return
    try:
        import readline
    except ImportError:  # pragma: no cover - platforms without readline
        yield
        return
    path = None if args.no_history else Path(args.history) if args.history else history_path()
    if path is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
    readline.set_history_length(1000)
    try:
        yield
    finally:
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(path)
            except OSError as exc:
                print(
                    f"warning: cannot save the chat history to {path}: {exc.strerror or exc}",
                    file=sys.stderr,
                )


def _cmd_chat(args: argparse.Namespace) -> int:
    tools = load_tools(args.tools)
    check_trace(args.trace)
    with endpoint(args, local_default=False) as ep:
        session = ChatSession(args, ep, tools)
        warn_unused_options(args, session.agent)
        with _line_editing(args):
            return session.loop()
