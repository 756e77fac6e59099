"""What every run of an evaluation shares, so that only the protocol (and the model)
differ: the sampling settings, the network attempts, the tool choice, and a capability
cache of its own per run (nothing learned leaks from case to case)."""

from __future__ import annotations

from typing import Any, Protocol

from ..transport.learned import CapabilityCache
from ..transport.retries import RetryPolicy
from ..types import ModelSettings

__all__ = ["RunSettings", "agent_options"]


class RunSettings(Protocol):
    """The settings ``compare`` and ``eval bfcl`` both hold (their own dataclasses)."""

    @property
    def temperature(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def request_timeout(self) -> float | None: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def tool_choice(self) -> str: ...


def agent_options(settings: RunSettings, cache: CapabilityCache | None = None) -> dict[str, Any]:
    """The :class:`~react_engine.Agent` keyword options a case runs with: ``settings``,
    and ``cache`` (by default, a new one)."""
    return {
        "capability_cache": cache if cache is not None else CapabilityCache(),
        "tool_choice": settings.tool_choice,
        "retry": RetryPolicy(max_attempts=settings.max_attempts),
        "settings": ModelSettings(
            temperature=settings.temperature,
            seed=settings.seed,
            max_tokens=settings.max_tokens,
            timeout=settings.request_timeout,
        ),
    }
