"""The single retry policy (spec README reading 6), applied to every provider alike.

"Retry up to 5x" is at most five retries after the first attempt: six attempts in all.
Waits grow exponentially with jitter; a server's Retry-After is honoured up to a cap.
Refusals and empty output are answers, not failures, and are never retried.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from evalnb.providers.base import ChatRequest, Completion, Provider, ProviderError
from evalnb.core.types import RetryPolicy as RetryPolicy   # defined with the shared types; re-exported


RETRIED_ERROR_KEPT = 300   # characters of each retried attempt's error kept in the record


@dataclass
class Outcome:
    completion: Completion | None
    error: ProviderError | None
    attempts: int
    waits: list[float] = field(default_factory=list)
    retried_errors: list[str] = field(default_factory=list)   # why each retry was needed


def as_provider_error(error: Exception) -> ProviderError:
    """A provider's classified failure as is; anything else it raised (an SDK's own bug, a
    reply no provider anticipated) is transient: retried, then resumable, never fatal."""
    if isinstance(error, ProviderError):
        return error
    return ProviderError("transient", f"unexpected {type(error).__name__}: {error}",
                         code="unexpected")


async def call_with_retries(provider: Provider, request: ChatRequest, policy: RetryPolicy,
                            rng: random.Random) -> Outcome:
    waits: list[float] = []
    errors: list[str] = []
    for attempt in range(1, policy.max_retries + 2):
        try:
            return Outcome(await provider.complete(request), None, attempt, waits, errors)
        except Exception as unexpected:   # noqa: BLE001 - a failure belongs to its call
            error = as_provider_error(unexpected)
            if error.kind == "permanent" or attempt > policy.max_retries:
                return Outcome(None, error, attempt, waits, errors)
            errors.append(error.message[:RETRIED_ERROR_KEPT])
            waits.append(policy.wait(attempt, error.retry_after, rng))
            await asyncio.sleep(waits[-1])
    raise AssertionError("unreachable")
