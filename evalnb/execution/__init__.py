"""Where a stage's calls are run: one entry point, which decides live or batch once.

- :mod:`evalnb.execution.runner`: live calls, concurrently, each recorded whatever happens.
- :mod:`evalnb.execution.batch`: calls sent through the providers' batch APIs.

May import everything up to :mod:`evalnb.config`; :mod:`evalnb.benchmarks` and the layers above
may import it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.records.stores import JsonlStore
from evalnb.core.run_config import EndpointConfig
from evalnb.core.types import Call, RetryPolicy
from evalnb.execution.batch.engine import run_batched_stage
from evalnb.execution.batch.journal import in_flight
from evalnb.execution.budget import Budget
from evalnb.execution.cache.reuse import CallCache
from evalnb.execution.runner import reuse_cached, run_calls
from evalnb.providers import make_provider
from evalnb.providers.base import Provider


def uses_batches(run_dir: Path, stage: str, endpoints: Mapping[str, EndpointConfig]) -> bool:
    """Batch mode is in play for a stage when one of its endpoints is in ``mode: batch``, or
    an earlier invocation left batches of it in flight (they are collected whatever the mode)."""
    return (any(e.mode == "batch" for e in endpoints.values())
            or any(entry["stage"] == stage for entry in in_flight(run_dir)))


async def run_stage_calls(calls: Sequence[Call], endpoints: Mapping[str, EndpointConfig], store: JsonlStore,
                          run_dir: Path, *, policy: RetryPolicy, concurrency: int, done: Any,
                          stage: str, budget: Budget | None = None, cache: CallCache | None = None) -> Counter[str]:
    """Every call of a stage not yet ``done``, each recorded in ``store``; the count of new
    records by status. Clients are made inside the event loop that uses them, and closed with it.
    Under a spending ceiling (``budget``) every attempt is reserved before it is sent; a call the
    response cache (``cache``) answers is never sent, so it reserves nothing."""
    pool: dict[str, Provider] = {}
    try:
        for role, endpoint in endpoints.items():
            provider = make_provider(endpoint)
            if provider is not None:
                pool[role] = budget.wrap(role, provider) if budget else provider
        if uses_batches(run_dir, stage, endpoints):
            reused = reuse_cached(calls, pool, store, cache, done) if cache is not None else Counter()
            return reused + await run_batched_stage(calls, pool, endpoints, store, run_dir, policy=policy,
                                                    concurrency=concurrency, done=done, desc=stage, budget=budget,
                                                    cache=cache)
        return await run_calls(calls, pool, store, policy, is_done=done, desc=stage, concurrency=concurrency,
                               cache=cache)
    finally:
        for provider in pool.values():
            await provider.aclose()
