"""Pacing to a provider's rate limits, so that a full-size run never storms a quota.

Providers meter requests and tokens per minute over a sliding window. A paced endpoint
keeps the same ledger: every request sent is entered with its requests, its input tokens
(estimated as the protocol does, characters / 3.3, or / 1.5 for CJK text) and its output
tokens (counted at the request's budget until the reply reports the real figure, then
corrected, input included). A call waits until the window has room for it. One larger
than a whole window's budget could never fit: it waits for an empty window and is sent
alone, with a warning.

Where a reply reports the quota left (OpenAI's ``x-ratelimit-remaining-*``, Anthropic's
``anthropic-ratelimit-*``), the pacer follows it too: with less left than the next call
needs, it waits until the provider says the quota resets.

The window is shared by every evalnb process of the user on this machine that calls the same
endpoint (:mod:`evalnb.providers.ledger`): with a ``shared`` ledger, the entries are those of
every such process, read and entered under the ledger's file lock, so that four runs pacing
one judge send what one run may send, not four times as much.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalnb.core.tokens import estimate_tokens
from evalnb.providers.base import ChatRequest, Completion, Provider
from evalnb.providers.ledger import QuotaLedger, WindowEntry

DIMENSIONS = ("requests", "input_tokens", "output_tokens")
SAFETY_SECONDS = 0.25   # the server's window starts when a request arrives, a little after sending
# A call waiting on a shared window looks again at least this often: another process's reply
# may free room early (a settled estimate), which no event of this process announces.
SHARED_POLL_SECONDS = 0.5
# A server counts a call when it arrives, and a call can reach it well after it was entered
# (a process's first request sets up its client and connection; a loaded machine delays every
# send): measured here, over a second. So a call counts from ARRIVAL_BOUND_SECONDS after it was
# entered while it is in flight, and from when its reply came once it is in (at most the bound
# after entering), which is never before it arrived.
ARRIVAL_BOUND_SECONDS = 5.0


@dataclass(frozen=True)
class RateLimit:
    """Per-endpoint quota; ``None`` means unmetered. ``window_seconds`` is the provider's window
    (a minute everywhere we know of; shorter windows serve tests)."""

    requests_per_minute: float | None = None
    input_tokens_per_minute: float | None = None
    output_tokens_per_minute: float | None = None
    window_seconds: float = 60.0

    def budget(self) -> dict[str, float | None]:
        return {"requests": self.requests_per_minute, "input_tokens": self.input_tokens_per_minute,
                "output_tokens": self.output_tokens_per_minute}


@dataclass(frozen=True)
class Quota:
    """What a reply's headers say is left, and when it resets (seconds from now)."""

    remaining: Mapping[str, float]
    reset_after: float


_Entry = WindowEntry


@dataclass
class Pacer:
    limit: RateLimit
    name: str = "endpoint"
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    waited_s: float = 0.0
    oversized: int = 0
    _ledger: deque[_Entry] = field(default_factory=deque)
    _turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    _settled: asyncio.Event = field(default_factory=asyncio.Event)
    _quota: tuple[float, Quota] | None = None   # (observed at, quota)
    waiting: bool = False
    shared: QuotaLedger | None = None   # every process's entries for this endpoint (clock: time.monotonic)
    arrival_bound: float = 0.0   # ARRIVAL_BOUND_SECONDS for a real endpoint (make_provider)

    def cost_of(self, request: ChatRequest) -> dict[str, float]:
        return {"requests": 1.0, "input_tokens": estimate_tokens(request.text()),
                "output_tokens": float(request.max_tokens)}

    def _used(self, now: float) -> dict[str, float]:
        horizon = now - self.limit.window_seconds - SAFETY_SECONDS
        while self._ledger and self._ledger[0].sent_at <= horizon:
            self._ledger.popleft()
        return {d: sum(e.cost[d] for e in self._ledger) for d in DIMENSIONS}

    def _wait_needed(self, cost: Mapping[str, float], now: float) -> float:
        """Seconds until ``cost`` fits the window (0: it fits now)."""
        used = self._used(now)
        wait = 0.0
        for dim, budget in self.limit.budget().items():
            if budget is None or used[dim] + cost[dim] <= budget:
                continue
            # Oldest entries leave the window first: wait until enough of them have left
            # (all of them, for a call larger than the whole budget).
            needed, freed = used[dim] + cost[dim] - budget, 0.0
            for entry in self._ledger:
                freed += entry.cost[dim]
                if freed >= needed or entry is self._ledger[-1]:
                    leaves = entry.sent_at + self.limit.window_seconds + SAFETY_SECONDS
                    wait = max(wait, leaves - now)
                    break
        if self._quota is not None:
            observed, quota = self._quota
            resets = observed + quota.reset_after
            sent_since = {d: sum(e.cost[d] for e in self._ledger if e.sent_at > observed) for d in DIMENSIONS}
            for dim, left in quota.remaining.items():
                if now < resets and left - sent_since.get(dim, 0.0) < cost.get(dim, 0.0):
                    wait = max(wait, resets - now)
        return max(0.0, wait)

    async def reserve(self, request: ChatRequest) -> _Entry:
        """Wait for room in the window, then enter the call (in order: first come, first sent)."""
        cost = self.cost_of(request)
        async with self._turn:
            if self._oversized(cost):
                self.oversized += 1
                print(f"WARNING: {self.name}: a request of {cost['input_tokens']:.0f} input and "
                      f"{cost['output_tokens']:.0f} output tokens exceeds the whole per-minute "
                      "budget; it is sent alone", file=sys.stderr)
            while True:
                wait, entry = self._enter(cost)
                if entry is not None:
                    self.waiting = False
                    return entry
                self.waiting = True
                started = self.clock()
                await self._sleep_or_settled(wait if self.shared is None else min(wait, SHARED_POLL_SECONDS))
                self.waited_s += self.clock() - started

    def _enter(self, cost: Mapping[str, float]) -> tuple[float, _Entry | None]:
        """Enter the call if the window has room now; else how long to wait. With a shared
        ledger, the window is every process's, checked and entered under its file lock."""
        if self.shared is None:
            return self._enter_in(self._ledger, cost)
        horizon = self.clock() - self.limit.window_seconds - SAFETY_SECONDS
        with self.shared.window(horizon) as entries:
            return self._enter_in(entries, cost)

    def _enter_in(self, entries: deque[_Entry], cost: Mapping[str, float]) -> tuple[float, _Entry | None]:
        self._ledger = entries
        now = self.clock()
        wait = self._wait_needed(cost, now)
        if wait > 0:
            return wait, None
        entry = _Entry(now + self.arrival_bound, dict(cost), QuotaLedger.new_id() if self.shared is not None else "",
                       started=now)
        entries.append(entry)
        return 0.0, entry

    async def _sleep_or_settled(self, seconds: float) -> None:
        """Wait ``seconds``, or less if a reply corrects the ledger meanwhile: an estimate that
        was too high may free room for the waiting call at once."""
        self._settled.clear()
        sleeper = asyncio.ensure_future(self.sleep(seconds))
        settled = asyncio.ensure_future(self._settled.wait())
        try:
            await asyncio.wait({sleeper, settled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, settled):
                task.cancel()

    def _oversized(self, cost: Mapping[str, float]) -> bool:
        return any(budget is not None and cost[dim] > budget for dim, budget in self.limit.budget().items())

    def settle(self, entry: _Entry, completion: Completion | None, quota: Quota | None) -> None:
        """Correct the entry with the tokens the reply reports; follow the quota it reports."""
        if self.arrival_bound:   # the reply is in: the call arrived before now
            entry.sent_at = entry.started + min(self.clock() - entry.started, self.arrival_bound)
        if completion is not None and completion.usage is not None:
            entry.cost["input_tokens"] = float(completion.usage.input_tokens)
            entry.cost["output_tokens"] = float(completion.usage.output_tokens)
        if self.shared is not None:
            self.shared.correct(entry)
        if quota is not None:
            self._quota = (self.clock(), quota)
        self._settled.set()


class PacedProvider:
    """A provider whose every attempt first waits for room in its endpoint's quota."""

    def __init__(self, inner: Provider, pacer: Pacer) -> None:
        self.inner, self.pacer = inner, pacer
        self.model, self.concurrency = inner.model, inner.concurrency

    async def complete(self, request: ChatRequest) -> Completion:
        entry = await self.pacer.reserve(request)
        try:
            completion = await self.inner.complete(request)
        except BaseException:
            self.pacer.settle(entry, None, None)   # a failed attempt still counted against the quota
            raise
        self.pacer.settle(entry, completion, quota_of(completion.raw))
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()


# --- reading quota headers ------------------------------------------------------------------

def quota_of(raw: Mapping[str, Any]) -> Quota | None:
    headers = raw.get("rate_limit_headers") if raw else None
    if not isinstance(headers, Mapping):
        return None
    return quota_from_headers(headers)


def quota_from_headers(headers: Mapping[str, str]) -> Quota | None:
    """OpenAI ``x-ratelimit-remaining-{requests,tokens}`` with ``x-ratelimit-reset-*`` durations
    (``"6m0s"``, ``"1.5s"``, ``"20ms"``); Anthropic ``anthropic-ratelimit-{requests,input-tokens,
    output-tokens}-remaining`` with ``-reset`` RFC 3339 times."""
    h = {k.lower(): v for k, v in headers.items()}
    remaining: dict[str, float] = {}
    resets: list[float] = []
    openai = {"requests": "requests", "tokens": "input_tokens"}
    for suffix, dim in openai.items():
        if (value := _number(h.get(f"x-ratelimit-remaining-{suffix}"))) is not None:
            remaining[dim] = value
            resets.append(_duration(h.get(f"x-ratelimit-reset-{suffix}")))
    anthropic = {"requests": "requests", "input-tokens": "input_tokens", "output-tokens": "output_tokens"}
    for part, dim in anthropic.items():
        if (value := _number(h.get(f"anthropic-ratelimit-{part}-remaining"))) is not None:
            remaining[dim] = value
            resets.append(_until(h.get(f"anthropic-ratelimit-{part}-reset")))
    if not remaining:
        return None
    return Quota(remaining, max(resets) if resets else 0.0)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _duration(value: str | None) -> float:
    """``"1h2m3.5s"``, ``"6m0s"``, ``"20ms"`` in seconds (0 when absent or unreadable)."""
    import re

    if not value:
        return 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"([\d.]+)(ms|h|m|s)", value)
    try:
        return sum(float(n) * units[u] for n, u in parts)
    except ValueError:
        return 0.0


def _until(value: str | None) -> float:
    """Seconds from now until an RFC 3339 time (0 when absent, past or unreadable)."""
    from datetime import datetime, timezone

    if not value:
        return 0.0
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def minimum_seconds(limit: RateLimit, totals: Mapping[str, float]) -> float:
    """The shortest time a set of calls can take under ``limit`` over a sliding window: a whole
    budget is spent at once, and the next only when it has left the window, so ``n`` budgets'
    worth take ``ceil(n) - 1`` windows."""
    longest = 0.0
    for dim, budget in limit.budget().items():
        if budget:
            windows = max(0, math.ceil(totals.get(dim, 0.0) / budget - 1e-9) - 1)
            longest = max(longest, windows * limit.window_seconds)
    return longest
