"""Retries: :func:`with_retries`, the one wrapper around any model call, tries a
:class:`ModelUnavailableError` again with exponential backoff and jitter (honouring
``Retry-After``), within bounded attempts and time; other errors surface at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from ..errors import ModelAPIError, ModelUnavailableError

__all__ = ["RetryPolicy", "backoff", "with_retries"]

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How transient API failures are retried (network retries; format retries are apart)."""

    max_attempts: int = 4
    """Attempts per request in all, the first included."""
    initial_backoff: float = 0.5
    """Seconds before the first retry; doubles each time, with jitter."""
    max_backoff: float = 20.0
    """Upper bound on one wait, ``Retry-After`` included."""
    max_total: float = 90.0
    """Give up once this many seconds have passed since the first attempt."""
    jitter: float = 0.5
    """Random seconds added to each exponential wait, so clients do not retry in lockstep."""
    sleep: Callable[[float], Awaitable[None]] | None = None
    """Replaces ``asyncio.sleep`` (tests pass a fake that records waits and returns at once)."""
    on_retry: Callable[[int, float, BaseException], None] | None = None
    """Called before each wait with the number of the attempt that follows (2 for the first
    retry), the seconds it waits and the error; it runs in the run's loop: return at once."""


def backoff(policy: RetryPolicy, error: BaseException | None, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first): the
    server's ``Retry-After`` when it sent one, else an exponential wait with jitter; at
    most ``policy.max_backoff`` either way (the jitter aside)."""
    hint = getattr(error, "retry_after", None)
    if isinstance(hint, int | float):
        return float(min(hint, policy.max_backoff))
    exponential = policy.initial_backoff * float(2 ** max(0, attempt - 1))
    return min(policy.max_backoff, exponential) + random.uniform(0, policy.jitter)


async def with_retries(
    policy: RetryPolicy, attempt: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``await attempt(*args, **kwargs)``, again after each :class:`ModelUnavailableError`
    while ``policy`` allows; the last error is raised with the number of attempts made as
    its ``attempts``. The first attempt is a plain ``await`` (docs/performance.md): only a
    request that failed goes on to :func:`_retry`."""
    started = time.monotonic()
    try:
        return await attempt(*args, **kwargs)
    except ModelUnavailableError as exc:
        return await _retry(lambda: attempt(*args, **kwargs), policy, exc, started)
    except ModelAPIError as exc:
        exc.attempts = 1
        raise


async def _retry(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    failed: ModelUnavailableError,
    started: float,
) -> T:
    """The attempts after a first one failed, with tenacity's ``AsyncRetrying`` (whose
    first trial is that failure)."""
    import asyncio

    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

    def error(state: RetryCallState) -> BaseException | None:
        return state.outcome.exception() if state.outcome is not None else None

    def before_sleep(state: RetryCallState) -> None:
        if policy.on_retry is not None and (exc := error(state)) is not None:
            waited = state.next_action.sleep if state.next_action is not None else 0.0
            policy.on_retry(state.attempt_number + 1, waited, exc)

    attempts = 0
    retrying = AsyncRetrying(
        stop=lambda state: (
            time.monotonic() - started >= policy.max_total
            or state.attempt_number >= max(1, policy.max_attempts)
        ),
        wait=lambda state: backoff(policy, error(state), state.attempt_number),
        retry=retry_if_exception_type(ModelUnavailableError),
        sleep=policy.sleep or asyncio.sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for trial in retrying:
            with trial:
                attempts += 1
                if attempts == 1:
                    raise failed
                return await attempt()
    except ModelUnavailableError as exc:
        failed = exc
    except ModelAPIError as exc:
        exc.attempts = attempts
        raise
    failed.attempts = attempts
    if attempts > 1:
        failed.args = (f"{failed.args[0] if failed.args else failed} (after {attempts} attempts)",)
    raise failed
