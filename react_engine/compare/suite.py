"""The comparison's tasks: data files, their checker, and their scripted transcripts.

A task is one JSON file (docs/comparison.md, "The task format"); the suite ships inside
the package as ``react_engine/compare/tasks/*.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigurationError
from ..protocols import registry
from ..testing import Script, ScriptExhausted, reply, tool_call_reply
from ..transport.wire import request_payload
from ..types import ModelRequest, ModelResponse, RunResult, Usage
from .tools import TASK_TOOLS

__all__ = [
    "PROTOCOLS",
    "Check",
    "ScriptReply",
    "Task",
    "Transcript",
    "check_result",
    "default_tasks_dir",
    "estimate_tokens",
    "load_script",
    "load_task",
    "load_tasks",
    "replies_for",
]


PROTOCOLS: tuple[str, ...] = ("function_calling", "text")
"""What ``compare`` runs by default; every task has scripted replies for these."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptToolCall(_Strict):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """An object, or the raw argument text exactly as a model sent it (broken JSON too)."""
    id: str | None = None


class ScriptReply(_Strict):
    """One scripted model reply."""

    content: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    reasoning: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_is_content(cls, value: Any) -> Any:
        return {"content": value} if isinstance(value, str) else value

    def response(self, usage: Usage) -> ModelResponse:
        if not self.tool_calls:
            return reply(self.content, reasoning=self.reasoning, usage=usage)
        calls = [
            (c.name, c.arguments, c.id or f"call_{i}") for i, c in enumerate(self.tool_calls, 1)
        ]
        return tool_call_reply(*calls, content=self.content, reasoning=self.reasoning, usage=usage)


class Check(_Strict):
    """What a run must do to count as a success."""

    answer_contains: list[str | list[str]] = Field(default_factory=list)
    """Case-insensitive substrings of the final answer; a list entry means any one of them."""
    must_call: list[str] = Field(default_factory=list)
    """Tools that must actually run at least once (an error result counts: it ran)."""
    must_not_call: list[str] = Field(default_factory=list)
    """Tools the model must not even ask for; may name tools that do not exist."""
    max_steps: int = Field(default=6, ge=1, le=20)
    """Model turns allowed, the final answer included (also the agent's step budget)."""
    observation_truncated: bool = False
    """Some observation must carry the truncation marker."""


class Task(_Strict):
    """One task of the comparison suite, as loaded from its file."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    covers: str
    question: str = Field(min_length=1)
    tools: list[str] = Field(min_length=1)
    instructions: str | None = None
    check: Check
    scripted: dict[str, list[ScriptReply]] = Field(default_factory=dict)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        unknown = [n for n in value if n not in TASK_TOOLS]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(TASK_TOOLS)}")
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    def model_post_init(self, context: Any, /) -> None:
        missing = [n for n in self.check.must_call if n not in self.tools]
        if missing:
            raise ValueError(f"check.must_call names tools the task does not offer: {missing}")
        for protocol, replies in self.scripted.items():
            if protocol not in registry.PROTOCOLS:
                raise ValueError(
                    f"scripted.{protocol}: not a protocol (one of {', '.join(registry.PROTOCOLS)})"
                )
            if not replies:
                raise ValueError(f"scripted.{protocol} is empty")
            native = registry.registration(protocol).native_calls
            if not native and any(r.tool_calls for r in replies):
                raise ValueError(f"scripted.{protocol} replies are text: no tool_calls")


def replies_for(script: Mapping[str, list[ScriptReply]], protocol: str) -> list[ScriptReply] | None:
    """The replies ``script`` has for ``protocol``: its own, or else its function-calling
    ones written in that protocol's format by the registry."""
    own = script.get(protocol)
    native = script.get("function_calling")
    if own is not None or native is None or protocol not in registry.PROTOCOLS:
        return own
    written = registry.registration(protocol).scripted([r.model_dump() for r in native])
    return [ScriptReply.model_validate(r) for r in written]


def default_tasks_dir() -> Traversable:
    """The task suite shipped inside the package (``react_engine/compare/tasks``)."""
    return resources.files("react_engine.compare").joinpath("tasks")


def load_task(path: Traversable) -> Task:
    """Read and validate one task file; errors name the file and the field."""
    stem = PurePath(path.name).stem
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read task file {path}: {exc}") from None
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigurationError(
            f"invalid task file {path}: {where}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from None
    if task.id != stem:
        raise ConfigurationError(f"task file {path} has id {task.id!r}: it must be {stem!r}")
    return task


def load_tasks(directory: Traversable | None = None, only: Sequence[str] = ()) -> list[Task]:
    """Every task in ``directory`` (default: the shipped suite) by id, or only those named."""
    directory = directory if directory is not None else default_tasks_dir()
    if not directory.is_dir():
        raise ConfigurationError(f"no task directory {directory}; pass --tasks DIR")
    paths = sorted(
        (p for p in directory.iterdir() if p.name.endswith(".json") and p.is_file()),
        key=lambda p: p.name,
    )
    if not paths:
        raise ConfigurationError(f"no task files (*.json) in {directory}; pass --tasks DIR")
    tasks = [load_task(p) for p in paths]
    if only:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in only if i not in by_id]
        if unknown:
            raise ConfigurationError(f"unknown task ids {unknown}; known: {sorted(by_id)}")
        tasks = [by_id[i] for i in only]
    return tasks


_RAN = frozenset({"ok", "error", "timeout"})


def check_result(task: Task, result: RunResult) -> list[str]:
    """Why ``result`` fails ``task``'s check: an empty list means success."""
    c = task.check
    failures: list[str] = []
    if result.stop_reason != "final_answer" or result.answer is None:
        failures.append(f"no final answer (stop reason: {result.stop_reason})")
    answer = (result.answer or "").casefold()
    for entry in c.answer_contains:
        options = [entry] if isinstance(entry, str) else entry
        if not any(o.casefold() in answer for o in options):
            failures.append(f"the answer lacks {' or '.join(map(repr, options))}")
    actions = [a for s in result.steps for a in s.actions]
    ran = {a.tool for a in actions if a.status in _RAN}
    asked = {a.tool for a in actions}
    failures += [f"{name} never ran" for name in c.must_call if name not in ran]
    failures += [f"called {name}, which it must not" for name in c.must_not_call if name in asked]
    if len(result.steps) > c.max_steps:
        failures.append(f"{len(result.steps)} steps (at most {c.max_steps})")
    if c.observation_truncated and not any("[truncated" in a.observation for a in actions):
        failures.append("no observation was truncated")
    return failures


# One token per CJK character; Latin words at about four characters a token; digits in
# groups of three (as BPE tokenizers split them); any other visible character one token.
_TOKEN = re.compile(
    r"(?P<cjk>[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef])"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<other>\S)"
)


_CHARS = {"word": 4, "digits": 3}
"""Characters a token holds, by kind (one for the kinds not listed, matched one by one)."""


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of a text's token count (close to BPE counts on average)."""
    return sum(-(-len(m[0]) // _CHARS.get(m.lastgroup or "", 1)) for m in _TOKEN.finditer(text))


class Transcript(Script[ModelRequest, ScriptReply]):
    """Scripted replies for one run, answered in order with estimated usage."""

    def __init__(self, replies: Iterable[ScriptReply], *, label: str) -> None:
        super().__init__(replies)
        self.label = label

    def __call__(self, request: ModelRequest) -> ModelResponse:
        try:
            scripted = self.answer(request)
        except ScriptExhausted:
            raise ConfigurationError(
                f"{self.label}: the scripted transcript has no reply left"
            ) from None
        payload = request_payload(request)
        prompt = 3
        for message in payload["messages"]:
            prompt += 4 + estimate_tokens(str(message.get("content") or ""))
            for call in message.get("tool_calls") or ():
                function = call["function"]
                prompt += 3 + estimate_tokens(function["name"] + function["arguments"])
        if payload.get("tools"):
            prompt += estimate_tokens(json.dumps(payload["tools"], ensure_ascii=False))
        completion = (
            1 + estimate_tokens(scripted.content or "") + estimate_tokens(scripted.reasoning or "")
        )
        for c in scripted.tool_calls:
            args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
            completion += 3 + estimate_tokens(c.name + args)
        return scripted.response(Usage(prompt, completion, prompt + completion, 0, 1))


def load_script(path: Path) -> dict[str, list[ScriptReply]]:
    """Scripted replies per protocol (``"*"``: any) from a task file, an object of lists
    keyed by protocol, or one list of replies."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read script {path}: {exc}") from None
    if isinstance(data, dict) and "scripted" in data:
        data = data["scripted"]
    try:
        if isinstance(data, list):
            return {"*": [ScriptReply.model_validate(i) for i in data]}
        if isinstance(data, dict):
            bad = [k for k, v in data.items() if k not in registry.PROTOCOLS or type(v) is not list]
            if bad:
                raise ConfigurationError(
                    f"script {path}: expected lists under {list(registry.PROTOCOLS)}, "
                    f"got {bad[0]!r}"
                )
            return {k: [ScriptReply.model_validate(i) for i in v] for k, v in data.items()}
    except ValidationError as exc:
        raise ConfigurationError(f"invalid script {path}: {exc.errors()[0]['msg']}") from None
    raise ConfigurationError(f"script {path}: expected a list of replies or an object")
