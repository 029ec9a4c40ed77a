"""The single retry policy, applied to every provider alike.

"Retry up to 5x" is at most five retries after the first attempt: six attempts in all.
Waits grow exponentially with jitter; a server's Retry-After is honoured up to a cap.
Refusals and empty output are answers, not failures, and are never retried.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from evalnb.core.tokens import estimate_tokens
from evalnb.providers.base import ChatRequest, Completion, Provider, ProviderError, Usage
from evalnb.core.types import RetryPolicy as RetryPolicy   # defined with the shared types; re-exported


RETRIED_ERROR_KEPT = 300   # characters of each retried attempt's error kept in the record


@dataclass
class Outcome:
    completion: Completion | None
    error: ProviderError | None
    attempts: int
    waits: list[float] = field(default_factory=list)
    retried_errors: list[str] = field(default_factory=list)   # why each retry was needed
    failed_usage: list[dict[str, Any]] = field(default_factory=list)   # what failed attempts may have cost


class NotSent(BaseException):
    """An attempt that a wrapper refused to send (the spending ceiling, evalnb.execution.budget).
    Not a failure of the call, so not an Exception: nothing that records a call's failure may
    catch it; the call stays resumable work and the stage ends."""


def failed_attempt_usage(error: ProviderError, request: ChatRequest) -> dict[str, Any] | None:
    """What a failed attempt may have cost, counted by the spending ceiling.

    A provider that answered with an HTTP error refused the request and bills nothing; a
    request that never reached it (refused, not resolved, failed while connecting)
    cannot have been billed. Any other failure (a timeout, a broken connection or stream, a
    malformed reply) may have come after the provider did and billed the work: it is counted at
    the call's upper bound, its estimated input and whole output budget, unless the provider
    reported its usage.
    """
    if error.status_code is not None or not error.reached:
        return None
    return {"input_tokens": round(request_input_tokens(request)), "output_tokens": request.max_tokens,
            "basis": "upper bound (no reply to say otherwise)"}


def request_input_tokens(request: ChatRequest) -> float:
    """The estimated input of a request: its prompt and its system text (core.tokens)."""
    return (estimate_tokens(request.prompt) + (estimate_tokens(request.system) if request.system else 0.0)
            + sum(estimate_tokens(turn.content) for turn in request.history))


def makes_no_model_call(provider: object) -> bool:
    """An offline baseline, also behind the wrappers (pacing, the ceiling) that hold it as ``inner``."""
    while provider is not None:
        if getattr(provider, "makes_no_model_call", False):
            return True
        provider = getattr(provider, "inner", None)
    return False


def usage_or_estimate(completion: Completion, request: ChatRequest, provider: object = None) -> Completion:
    """The completion with usage: as reported, or, where the reply reported none, estimated
    from the request's prompt and the returned text and reasoning (the estimate the ceiling
    reserves by) and marked ``estimated``. A reply without usage used tokens all the same: a
    null would be counted as 0 tokens and $0 by every total and by the spending ceiling."""
    if completion.usage is not None or makes_no_model_call(provider):
        return completion   # as reported; an offline baseline uses no tokens at all
    returned = completion.text + (completion.reasoning or "")
    usage = Usage(input_tokens=round(request_input_tokens(request)),
                  output_tokens=round(estimate_tokens(returned)) if returned else 0, estimated=True)
    return replace(completion, usage=usage)


def as_provider_error(error: Exception) -> ProviderError:
    """A provider's classified failure as is; anything else it raised (an SDK's own bug, a
    reply no provider anticipated) is transient: retried, then resumable, never fatal."""
    if isinstance(error, ProviderError):
        return error
    return ProviderError("transient", f"unexpected {type(error).__name__}: {error}",
                         code="unexpected")


async def call_with_retries(provider: Provider, request: ChatRequest, policy: RetryPolicy,
                            rng: random.Random, on_backoff: Callable[[int], None] | None = None) -> Outcome:
    """``on_backoff(+1)`` as a wait before a retry begins, ``on_backoff(-1)`` as it ends (the
    progress a terminal shows)."""
    waits: list[float] = []
    errors: list[str] = []
    charged: list[dict[str, Any]] = []
    for attempt in range(1, policy.max_retries + 2):
        try:
            completion = usage_or_estimate(await provider.complete(request), request, provider)
            return Outcome(completion, None, attempt, waits, errors, charged)
        except NotSent as refused:
            if attempt == 1:
                raise   # nothing was sent: no record, the call stays as it was
            # Retries already sent (and maybe paid for): recorded, resumable.
            stop = ProviderError("transient", f"not sent: {refused}", code="not_sent")
            return Outcome(None, stop, attempt - 1, waits, errors, charged)
        except Exception as unexpected:   # noqa: BLE001 - a failure belongs to its call
            error = as_provider_error(unexpected)
            if (usage := failed_attempt_usage(error, request)) is not None:
                charged.append(usage)
            if error.kind != "transient" or attempt > policy.max_retries:   # permanent, endpoint
                return Outcome(None, error, attempt, waits, errors, charged)
            errors.append(error.message[:RETRIED_ERROR_KEPT])
            waits.append(policy.wait(attempt, error.retry_after, rng))
            if on_backoff is not None:
                on_backoff(1)
            try:
                await asyncio.sleep(waits[-1])
            finally:
                if on_backoff is not None:
                    on_backoff(-1)
    raise AssertionError("unreachable")
