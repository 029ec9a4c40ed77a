"""One stage's batched calls: collection, submission in provider-sized chunks, waiting.

Each pass over a stage (every ``evalnb run``, and every poll under ``--wait``):

1. Every batch of the stage still in flight is advanced (:mod:`evalnb.execution.batch.collect`):
   an intent is looked up at the provider; a submitted batch is polled once; a finished
   batch's results are written into the stage's store, one record per call, exactly as the
   live runner writes them.
2. Every call of a batched endpoint that has no final record and is not in a batch in flight
   is prepared (a document read only now), and chunks (:mod:`evalnb.execution.batch.chunk`)
   no larger than the provider's limits are submitted, each recorded in the journal as an
   intent before the provider is asked. A call that failed transiently inside a batch goes
   into a new batch, or is made live when the endpoint says ``batch: {resend: live}``; a
   request too large for any batch is made live.

Calls of live endpoints run side by side, as without batch mode, except those a batch in
flight still holds (an endpoint switched from batch to live mid-run): they wait for it.

An endpoint failure (a refusal for reasons of the endpoint's own), whether a batch met it or a
live call (an endpoint's own, a resend, a request too large), stops that endpoint for the rest
of the stage in this process: one :data:`~evalnb.execution.endpoint_gate.Stopped` is shared by
the batches and every live round.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalnb.execution.batch import limits, wait_interval
from evalnb.execution.batch.backend_base import Backend, management_error
from evalnb.execution.batch.backends import backend_for
from evalnb.execution.batch.chunk import Chunk
from evalnb.execution.batch.collect import Collector
from evalnb.execution.batch.journal import CALLS_DIR, Entry, Journal
from evalnb.core.run_config import EndpointConfig
from evalnb.records.manifest import utc_now
from evalnb.providers import BATCH_PROVIDERS, make_provider
from evalnb.views.progress import StageProgress
from evalnb.providers.base import ChatRequest, Provider
from evalnb.records.stores import JsonlStore
from evalnb.providers.retry import RetryPolicy
from evalnb.execution.endpoint_gate import Stopped
from evalnb.execution.runner import Call, Record, run_calls, unexpected_failure

# Tests only: exit at once after the provider accepted a batch, before the journal says so.
CRASH_ENV = "EVALNB_CRASH_AFTER_BATCH_CREATE"


async def run_batched_stage(calls: Sequence[Call], pool: Mapping[str, Provider],
                            endpoints: Mapping[str, EndpointConfig], store: JsonlStore, run_dir: Path, *,
                            policy: RetryPolicy, concurrency: int, done: Any, desc: str,
                            budget: Any = None, cache: Any = None) -> Counter[str]:
    """A stage's calls when batch mode is in play (:func:`evalnb.execution.uses_batches`):
    batched endpoints through their batch APIs, the others live, side by side. ``cache``: the
    response cache, given each batch result's final answer as a live call's would be."""
    batches = StageBatches(run_dir, desc, calls, endpoints)
    batches.budget = budget   # the spending ceiling (evalnb.execution.budget): reserved when submitted
    batches.collector.cache = cache
    try:
        batched, live = await asyncio.gather(
            batches.run(store, pool, policy, done, concurrency),
            run_calls(batches.live_calls, pool, store, policy, is_done=done, desc=desc, concurrency=concurrency,
                      stopped=batches.stopped, cache=cache))
    finally:
        store.close()
    return batched + live


class StageBatches:
    """The batch side of one stage in one process: its journal entries, clients and calls."""

    def __init__(self, run_dir: Path, stage: str, calls: Sequence[Call],
                 endpoints: Mapping[str, EndpointConfig]) -> None:
        self.dir, self.stage, self.endpoints = run_dir, stage, endpoints
        self.journal = Journal(run_dir)
        self.batched = [role for role, e in endpoints.items() if e.mode == "batch"]
        held = self.held_keys()
        self.by_key = {c.key: c for c in calls}
        self.batch_calls = [c for c in calls if c.endpoint in self.batched]
        self.live_calls = [c for c in calls if c.endpoint not in self.batched and c.key not in held]
        self._backends: dict[str, Backend] = {}
        self._clients: list[Provider] = []
        self.budget: Any = None
        self.stopped: Stopped = {}   # endpoints that refused for reasons of their own, live or batched
        self.collector = Collector(self.journal, self.by_key, self.stopped)

    @property
    def active(self) -> bool:
        return bool(self.batched) or bool(self.journal.in_flight(self.stage))

    def held_keys(self) -> set[str]:
        return {row["key"] for e in self.journal.in_flight(self.stage) for row in self.journal.calls(e)}

    def backend(self, role: str) -> Backend | None:
        if role not in self._backends:
            endpoint = self.endpoints.get(role)
            if endpoint is None or endpoint.provider not in BATCH_PROVIDERS:
                return None
            live = make_provider(replace(endpoint, rate_limit=None))   # batch limits are the provider's own
            assert live is not None
            self._clients.append(live)
            self._backends[role] = backend_for(endpoint.provider, live)
        return self._backends[role]

    # -- the passes ------------------------------------------------------------------------

    async def run(self, store: JsonlStore, pool: Mapping[str, Provider], policy: RetryPolicy, done: Any,
                  concurrency: int) -> Counter[str]:
        statuses: Counter[str] = Counter()
        sent: Counter[str] = Counter()   # batches each call went into during this process
        interval = wait_interval()
        bar: StageProgress | None = None
        try:
            while True:
                for entry in self.journal.in_flight(self.stage):
                    statuses += await self.collector.advance(entry, self.backend(entry["endpoint"]), store, done)
                if self.budget is not None:   # collected batches are spent, no longer reserved
                    self.budget.refresh()
                again_live = await self.submit_pending(store, done, policy, sent, statuses)
                if again_live:
                    statuses += await run_calls(again_live, pool, store, policy, is_done=done,
                                                desc=f"{self.stage} (live)", concurrency=concurrency,
                                                stage=self.stage, stopped=self.stopped, cache=self.collector.cache)
                flight = self.journal.in_flight(self.stage)
                if not flight or interval is None:
                    break
                bar = self.progress(bar, flight, interval)
                await asyncio.sleep(interval)
        finally:
            if bar is not None:
                bar.close()
            self.journal.close()
            for client in self._clients:
                await client.aclose()
        return statuses

    def progress(self, bar: StageProgress | None, flight: list[Entry], interval: float) -> StageProgress:
        waiting = sum(e["calls"] for e in flight)
        if bar is None:
            bar = StageProgress(self.stage, total=waiting, pending=waiting, desc=f"{self.stage}: batches",
                                unit="call", mininterval=0.1)
        total = max(bar.bar.total or 0, bar.bar.n + waiting)
        bar.set_done(total - waiting, total, f"{len(flight)} batch{'es' if len(flight) != 1 else ''} in flight "
                                             f"({waiting:,} calls), next poll in {interval:g}s")
        return bar

    async def submit_pending(self, store: JsonlStore, done: Any, policy: RetryPolicy, sent: Counter[str],
                             statuses: Counter[str]) -> list[Call]:
        """Submit every batched call that needs an answer and is not in flight; return the
        calls to make live instead (resent live by the endpoint's choice, or too large)."""
        stored = store.load()
        held = self.held_keys()
        live: list[Call] = []
        for role in (r for r in self.batched if r not in self.stopped):
            endpoint, backend = self.endpoints[role], self.backend(role)
            assert backend is not None
            options = endpoint.batch or {}
            limit = limits(endpoint.provider).capped(options)
            pending = [c for c in self.batch_calls if c.endpoint == role and c.key not in held
                       and not (c.key in stored and done(stored[c.key])) and sent[c.key] <= policy.max_retries]
            if options.get("resend") == "live":
                again = {c.key for c in pending if c.key in stored and stored[c.key].get("batch")}
                live += [c for c in pending if c.key in again]
                pending = [c for c in pending if c.key not in again]
            chunk: Chunk | None = None
            for index, call in enumerate(pending):
                request, fields = self.prepare(call, store, statuses)
                if request is None:
                    continue
                if chunk is None:
                    chunk = self.new_chunk(role, limit.inline_bytes)
                custom_id = chunk.custom_id()
                line = backend.line(custom_id, request)
                data = backend.line_bytes(line)
                if len(data) > limit.max_bytes:
                    print(f"WARNING: {call.key}: {len(data):,} bytes, more than one {endpoint.provider} batch "
                          f"may hold ({limit.max_bytes:,}): sent live", file=sys.stderr)
                    live.append(call)
                    continue
                if chunk.rows and (len(chunk.rows) >= limit.max_requests or chunk.size + len(data) > limit.max_bytes):
                    statuses += await self.submit(chunk, role, backend, store)
                    if role in self.stopped:   # the endpoint refused for reasons of its own: no further batch to it
                        statuses["not_sent"] += len(pending) - index
                        chunk = None
                        break
                    chunk = self.new_chunk(role, limit.inline_bytes)
                    custom_id = chunk.custom_id()
                    line = backend.line(custom_id, request)
                    data = backend.line_bytes(line)
                usd = 0.0 if self.budget is None else self.budget.hold_batch(role, request)
                if usd is None:   # the spending ceiling: this call and the rest stay resumable
                    break
                chunk.add(call, fields, custom_id, line, data)
                chunk.reserved_usd += usd
                sent[call.key] += 1
            if chunk is not None and chunk.rows:
                statuses += await self.submit(chunk, role, backend, store)
        # A batch refused above stops its endpoint's live calls too, those gathered before it included.
        statuses["not_sent"] += sum(c.endpoint in self.stopped for c in live)
        return [c for c in live if c.endpoint not in self.stopped]

    def prepare(self, call: Call, store: JsonlStore, statuses: Counter[str]
                ) -> tuple[ChatRequest | None, Mapping[str, Any]]:
        """The call's request; a call decided without a model is recorded here, as live."""
        try:
            prepared = call.prepare()
        except Exception as error:   # noqa: BLE001 - a failure belongs to its call
            record: Record = {"key": call.key, "endpoint": call.endpoint, "attempts": 0,
                              **unexpected_failure(error)}
            store.append(record)
            statuses[record["status"]] += 1
            return None, {}
        if prepared.request is None:
            record = {"key": call.key, "endpoint": call.endpoint, **prepared.fields}
            record.setdefault("attempts", 0)
            store.append(record)
            statuses[record["status"]] += 1
        return prepared.request, prepared.fields

    def new_chunk(self, role: str, inline_bytes: int | None) -> Chunk:
        """A chunk spooled to a file unless its provider always takes requests inline."""
        tag = self.journal.next_tag(self.stage, role)
        spool = None
        if inline_bytes is not None:
            spool = self.dir / CALLS_DIR / f"{tag}.input.jsonl"
            spool.parent.mkdir(parents=True, exist_ok=True)
            spool.unlink(missing_ok=True)
        return Chunk(tag, spool, inline_bytes)

    async def submit(self, chunk: Chunk, role: str, backend: Backend, store: JsonlStore) -> Counter[str]:
        """Intent first, then the provider; a crash in between is resolved on the next pass."""
        endpoint = self.endpoints[role]
        self.journal.write_calls(chunk.tag, chunk.rows)
        entry = self.journal.record({
            "key": chunk.tag, "stage": self.stage, "endpoint": role, "provider": endpoint.provider,
            "model": endpoint.name, "state": "intent", "batch_id": None, "calls": len(chunk.rows),
            "bytes": chunk.size, "intent_at": utc_now(), "intent_ts": time.time(),
            **({"reserved_usd": chunk.reserved_usd} if chunk.reserved_usd else {})})
        try:
            batch_id, extra = await backend.submit(chunk.tag, chunk.lines, chunk.spool)
        except Exception as error:   # noqa: BLE001
            failure = management_error(error)
            if failure.kind != "transient":   # refused outright (the endpoint's own refusal too): no batch
                counts = self.collector.write(entry | {"batch_id": None}, chunk.rows, {}, failure, store, lambda r: False,
                                    utc_now())
                self.journal.update(entry, state="rejected", error=failure.as_dict())
                return counts
            # Maybe created, maybe not: the intent stays, and is looked up on the next pass.
            self.journal.update(entry, last_error=failure.message)
            return Counter()
        finally:
            if chunk.spool is not None:
                chunk.spool.unlink(missing_ok=True)
        if os.environ.get(CRASH_ENV):
            os._exit(75)
        self.journal.update(entry, state="submitted", batch_id=batch_id, submitted_at=utc_now(),
                            submitted_ts=time.time(), **extra)
        return Counter()
