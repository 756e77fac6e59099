"""What every run of an evaluation shares, so that only the protocol (and the model)
differ: the sampling settings, the network attempts, the tool choice, and a capability
cache of its own per run (nothing learned leaks from case to case)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..transport.learned import CapabilityCache
from ..transport.retries import RetryPolicy
from ..types import ModelSettings

__all__ = ["RunSettings", "agent_options"]


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The settings ``compare`` and ``eval bfcl`` share (each adds its own)."""

    temperature: float = 0.0
    """Greedy decoding: differences come from the protocol, and a recording can be made again."""
    seed: int = 42
    """Sent with every request; servers that honour it repeat their sampling."""
    max_tokens: int = 256
    """Enough for a few calls; a model that rambles cannot stall a run on a small machine."""
    request_timeout: float | None = 300.0
    """Seconds per request (a 2-core machine running the local model is slow)."""
    max_attempts: int = 3
    """Network attempts per request (transient failures only)."""
    tool_choice: str = "auto"
    """``"auto"``, or ``"required"`` for a first step that must call a tool (then ``"auto"``)."""


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
