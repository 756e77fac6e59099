"""A run's limits and behaviour (:class:`AgentConfig`), and the checks that reject a wrong
option when the agent is built instead of deep inside a run."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict

from ..errors import ConfigurationError, UnknownOptionError
from ..protocols.decision import MultiAction
from ..protocols.output import output_spec
from ..tools.base import Tool
from ..transport.retries import RetryPolicy
from ..types import (
    HistoryItem,
    ModelSettings,
    ToolChoice,
    check_number,
    check_seconds,
    check_type,
    describe,
)

if TYPE_CHECKING:
    from .journal import SessionLike

__all__ = [
    "SAMPLING_SHORTHANDS",
    "AgentConfig",
    "Options",
    "RunOptions",
    "check_bool",
    "tool_list",
    "with_options",
]


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Limits and behaviour of a run. Every field can be overridden per run."""

    max_steps: int = 10
    """Model turns that may call tools; then one last request asks for a final answer with
    tools off."""
    max_tool_calls: int | None = None
    """Tool calls per run; once spent, the model is asked for its final answer, tools off."""
    max_calls_per_step: int = 16
    """Tool calls run from one reply; the ones beyond it are not run (each is told so)."""
    max_total_tokens: int | None = None
    """A cost ceiling: total tokens per run; past it the run stops (``token_budget``)."""
    deadline: float | None = None
    """Wall-clock seconds for the whole run; past it the run stops (``deadline``)."""
    max_consecutive_errors: int = 3
    """Consecutive failed turns fed back to the model before :class:`ErrorBudgetExhausted`."""
    loop_limit: int = 3
    """The same call this many times earns a warning; once more, a forced final answer."""
    max_observation_chars: int | None = 4000
    """Longer observations are truncated with a visible marker (tools can override)."""
    tool_timeout: float | None = 120.0
    """Seconds a tool call may take unless the tool sets its own ``timeout``."""
    tool_choice: ToolChoice = "auto"
    """``"auto"``, ``"required"``, ``"none"`` or a tool name (emulated by the text protocol)."""
    reset_tool_choice: bool = True
    """Once a tool has run, a ``"required"`` or named ``tool_choice`` becomes ``"auto"``."""
    multi_action: MultiAction = "independent"
    """Which calls run when one reply holds several: ``"independent"``, ``"first"`` or
    ``"all"`` (docs/several-calls.md)."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    trace: str | os.PathLike[str] | None = None
    """A JSON Lines file the run appends its trace to as it happens."""
    output_type: Any = str
    """The type of the final answer: ``str``, or a pydantic model, dataclass, ``TypedDict``,
    ``list[int]``...; ``result.output`` is the validated value."""

    def __post_init__(self) -> None:
        """Every option's type and range, so a wrong one fails here, not deep inside a run."""
        minimums = {"max_steps": 1, "max_consecutive_errors": 0, "loop_limit": 1}
        for name, minimum in {**minimums, "max_calls_per_step": 1}.items():
            check_number(name, getattr(self, name), minimum, integer=True, optional=False)
        for name in ("max_tool_calls", "max_total_tokens", "max_observation_chars"):
            check_number(name, getattr(self, name), 1, integer=True)
        check_seconds(self.deadline, "deadline")
        check_seconds(self.tool_timeout, "tool_timeout")
        choices = "'auto', 'required', 'none' or a tool name"
        check_type(self.tool_choice, str, "tool_choice", choices, optional=False)
        check_bool(self.reset_tool_choice, "reset_tool_choice")
        if self.multi_action not in ("independent", "first", "all"):
            raise ConfigurationError(
                "multi_action must be 'independent', 'first' or 'all', not "
                + describe(self.multi_action)
            )
        check_type(self.settings, ModelSettings, "settings", "a ModelSettings", optional=False)
        check_type(self.retry, RetryPolicy, "retry", "a RetryPolicy", optional=False)
        check_type(self.trace, str | os.PathLike, "trace", "a file path or None")
        output_spec(self.output_type)


class Options(TypedDict, total=False):
    """The :class:`AgentConfig` fields and the :data:`SAMPLING_SHORTHANDS` as typed keywords
    of ``Agent(...)`` and of a run (``output_type`` is a parameter of its own)."""

    max_steps: int
    max_tool_calls: int | None
    max_calls_per_step: int
    max_total_tokens: int | None
    deadline: float | None
    max_consecutive_errors: int
    loop_limit: int
    max_observation_chars: int | None
    tool_timeout: float | None
    tool_choice: ToolChoice
    reset_tool_choice: bool
    multi_action: MultiAction
    settings: ModelSettings
    retry: RetryPolicy
    trace: str | os.PathLike[str] | None
    temperature: float | None
    max_tokens: int | None
    seed: int | None
    top_p: float | None


class RunOptions(Options, total=False):
    """A run's keywords besides the configuration (:class:`~react_engine.run.config.Options`)."""

    history: list[HistoryItem] | None
    """The conversation so far, extended in place by the run."""
    session: SessionLike | None
    run_id: str | None
    """The run's new id in the agent's store (a stored one raises ``RunExistsError``)."""


SAMPLING_SHORTHANDS: Final[tuple[str, ...]] = ("temperature", "max_tokens", "seed", "top_p")
""":class:`ModelSettings` fields accepted as options of their own (``temperature=0``)."""

_HINTS: Final[Mapping[str, str]] = {
    # Names other agent libraries use for what is spelled differently here.
    "max_iterations": "max_steps",
    "max_turns": "max_steps",
    "model_settings": "settings",
    "system_prompt": "instructions",
    "max_retries": "retry=RetryPolicy(max_attempts=...)",
    "timeout": (
        "deadline (seconds for the whole run), tool_timeout (for one tool call) or "
        "settings=ModelSettings(timeout=...) (for one request)"
    ),
}


def with_options(
    base: AgentConfig, options: Mapping[str, Any], *, what: str, agent_options: Collection[str] = ()
) -> AgentConfig:
    """``base`` with ``options`` applied, the :data:`SAMPLING_SHORTHANDS` merged into its
    ``settings``. ``what`` names the caller in errors; ``agent_options`` are
    ``Agent(...)``'s other keywords."""
    fields = {f.name for f in dataclasses.fields(AgentConfig)}
    unknown = [name for name in options if name not in fields and name not in SAMPLING_SHORTHANDS]
    if unknown:
        raise UnknownOptionError(
            "; ".join(_unknown_option(name, what, fields, agent_options) for name in unknown)
        )
    config = {k: v for k, v in options.items() if k in fields}
    shorthand = {k: v for k, v in options.items() if k in SAMPLING_SHORTHANDS}
    cfg = dataclasses.replace(base, **config)
    if not shorthand:
        return cfg
    explicit = config.get("settings")
    if isinstance(explicit, ModelSettings):
        for name, value in shorthand.items():
            current = getattr(explicit, name)
            if current is not None and current != value:
                raise ConfigurationError(
                    f"{name} is given twice, as {name}={value!r} and in "
                    f"settings=ModelSettings({name}={current!r}): give it once"
                )
    return dataclasses.replace(cfg, settings=dataclasses.replace(cfg.settings, **shorthand))


def _unknown_option(name: str, what: str, fields: set[str], agent_options: Collection[str]) -> str:
    if what != "Agent" and name in agent_options:
        return f"{name!r} is an option of Agent(...), not of a run: set it when building the agent"
    head = f"unknown {what} option {name!r}"
    if name in _HINTS:
        return f"{head}: use {_HINTS[name]}"
    known = sorted(
        fields | set(SAMPLING_SHORTHANDS) | (set(agent_options) if what == "Agent" else set())
    )
    import difflib  # only for a mistake: not loaded with the package

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"{head}: did you mean {close[0]!r}?"
    return f"{head}; the {what} options are {', '.join(known)}"


def check_bool(value: Any, name: str, *, optional: bool = False) -> None:
    """A bool only (or ``None`` when ``optional``): ``"false"`` would turn the option on."""
    kind = "True, False or None" if optional else "True or False"
    check_type(value, bool, name, f"{kind} (a bool)", optional=optional)


def tool_list(tools: Any) -> list[Tool | Callable[..., Any]]:
    """``tools=`` as a list, each item checked."""
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"tools must be a list of tools or typed functions, not {describe(tools)}"
        )
    items = list(tools)
    for item in items:
        if not isinstance(item, Tool) and (not callable(item) or isinstance(item, type)):
            raise ConfigurationError(
                f"every tool must be a Tool or a typed function, not {describe(item)}"
            )
    return items
