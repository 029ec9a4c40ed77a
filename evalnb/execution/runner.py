"""Running many calls: a run-wide concurrency cap, per-provider limits, one retry policy,
a resumable store.

Each provider gets as many workers as its own ``concurrency`` allows, pulling calls from its
own queue, so a slow judge never starves the others; all workers share one run-wide cap,
so that at most the run's ``concurrency`` requests (and documents) are in flight at once,
whatever the number of judges. Every finished call is appended to the stage's store as
soon as it returns, which is what makes a killed run resumable.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import random
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, TypeVar


from evalnb.execution.cache.reuse import CallCache, Reused
from evalnb.execution.endpoint_gate import EndpointGate, EndpointStopped, Stopped
from evalnb.providers.pacing import Pacer
from evalnb.views.progress import StageProgress
from evalnb.core.reasoning import reasoning_fields
from evalnb.providers.base import Completion, Provider, Usage
from evalnb.core.types import Latency
from evalnb.records.stores import JsonlStore
from evalnb.core.redaction import redact
from evalnb.core.events import FIRST_REPLY
from evalnb.providers.retry import NotSent, RetryPolicy, call_with_retries, makes_no_model_call
# The call and record types live in evalnb.core.types (shared by every layer); re-exported here.
from evalnb.core.types import Call as Call, Prepared as Prepared, Record as Record
from evalnb.core.types import answer_fields as answer_fields

T = TypeVar("T")


def completion_fields(completion: Completion) -> dict[str, Any]:
    return {
        "finish_reason": completion.finish_reason,
        "usage": usage_fields(completion.usage),
        "model_route": completion.model_route,
        "request_id": completion.request_id,
        "provider_meta": completion.raw,
        "latency": latency_fields(completion.latency),
        **({"streamed": True} if completion.streamed else {}),
        **reasoning_fields(completion),
    }


def latency_fields(latency: Latency | None) -> dict[str, Any] | None:
    """A record's latency; ``server_s`` only where the server reported its own time (the
    records of other servers read as they always did)."""
    if latency is None:
        return None
    fields = asdict(latency)
    return fields if fields["server_s"] is not None else {k: v for k, v in fields.items() if k != "server_s"}


def usage_fields(usage: Usage | None) -> dict[str, Any] | None:
    """A record's usage: the counts, and ``estimated: true`` only where they are an estimate
    (the records of calls whose replies reported usage read as they always did)."""
    if usage is None:
        return None
    fields = asdict(usage)
    if not fields.pop("estimated"):
        return fields
    return fields | {"estimated": True}


async def _run_one(call: Call, provider: Provider | None, policy: RetryPolicy,
                   rng: random.Random, on_backoff: Callable[[int], None] | None = None,
                   cache: CallCache | None = None, is_done: Callable[[Record], bool] | None = None) -> Record:
    """The call's record, whatever happens: an unexpected exception while preparing, sending
    or reading it is recorded against this call as resumable, and the other calls go on."""
    try:
        return await _attempt(call, provider, policy, rng, on_backoff, cache, is_done)
    except Exception as error:   # noqa: BLE001 - a failure belongs to its call
        return {"key": call.key, "endpoint": call.endpoint, "attempts": 0, **unexpected_failure(error)}


def unexpected_failure(error: Exception) -> Record:
    """The record fields of a call that raised where no provider error was expected (a bug,
    a reply the reader could not take): resumable, with the error's text through the filter."""
    return {"status": "failed_transient", "text": None,
            "error": {"kind": "transient", "status_code": None, "code": "unexpected",
                      "message": redact(f"{type(error).__name__}: {error}")}}


def reused_record(record: Record, call: Call, reused: Reused) -> Record:
    """The record of a call answered from the response cache: no attempt, no usage of its own;
    the original call's usage, latency, time and run kept apart under ``cache``."""
    original = reused.completion
    record.update(attempts=0, **completion_fields(replace(original, usage=None, latency=None)))
    record["cache"] = {**reused.origin, "usage": usage_fields(original.usage),
                       "latency": latency_fields(original.latency)}
    record.update(call.interpret(original))
    return record


async def _attempt(call: Call, provider: Provider | None, policy: RetryPolicy,
                   rng: random.Random, on_backoff: Callable[[int], None] | None = None,
                   cache: CallCache | None = None, is_done: Callable[[Record], bool] | None = None) -> Record:
    prepared = call.prepare()
    record: Record = {"key": call.key, "endpoint": call.endpoint, **prepared.fields}
    if prepared.request is None:
        record.setdefault("attempts", 0)
        return record
    if provider is None:
        raise RuntimeError(f"{call.key}: needs a model call but no endpoint {call.endpoint!r} is configured")
    lookup = cache.lookup(call, provider, prepared.request) if cache is not None else None
    if lookup is not None and cache is not None and (reused := cache.reuse(lookup)) is not None:
        hit = reused_record(dict(record), call, reused)
        if is_done is None or is_done(hit):
            return hit
    started = time.time()
    outcome = await call_with_retries(provider, prepared.request, policy, rng, on_backoff)
    record.update(attempts=outcome.attempts, waits=[round(w, 3) for w in outcome.waits],
                  started_at=started, elapsed_s=round(time.time() - started, 3))
    if outcome.retried_errors:   # a call that succeeded after retries shows why it needed them
        record["retried_errors"] = outcome.retried_errors
    if outcome.failed_usage:   # what its failed attempts may have cost (the spending ceiling counts it)
        record["failed_attempt_usage"] = outcome.failed_usage
    if outcome.completion is not None:
        record.update(completion_fields(outcome.completion))
        record.update(call.interpret(outcome.completion))
        if lookup is not None and cache is not None and (is_done is None or is_done(record)):
            cache.keep(lookup, outcome.completion, started)   # a final answer only: never a failure
    else:
        assert outcome.error is not None
        record.update(status=f"failed_{outcome.error.kind}", text=None,
                      error=outcome.error.as_dict())
    return record


async def run_calls(calls: Sequence[Call], pool: Mapping[str, Provider], store: JsonlStore,
                    policy: RetryPolicy, *, is_done: Callable[[Record], bool], desc: str,
                    concurrency: int, stage: str | None = None,
                    stopped: Stopped | None = None, cache: CallCache | None = None) -> collections.Counter[str]:
    """Run every call whose latest stored record is not done; return the new statuses.

    At most ``concurrency`` calls are in flight at once across all providers, and at most
    each provider's own ``concurrency`` for that provider. ``stage``: the name the command's
    terminal shows (default ``desc``). An endpoint's first endpoint failure stops
    its calls (:mod:`evalnb.execution.endpoint_gate`); the calls it did not make stay without a
    record. ``stopped``: the stage's stopped endpoints, when the stage runs calls in more than one
    round (batch mode): an endpoint already in it sends nothing, and one that stops here is added.
    ``cache``: the response cache, looked up before each call is sent and given its final answer.
    """
    stage = stage or desc
    gates = {role: EndpointGate(provider, role, stopped) for role, provider in pool.items()}
    done = store.load()
    queues: dict[str, collections.deque[Call]] = collections.defaultdict(collections.deque)
    for call in calls:
        if call.key not in done or not is_done(done[call.key]):
            queues[call.endpoint].append(call)
    pending = sum(len(q) for q in queues.values())
    statuses: collections.Counter[str] = collections.Counter()
    rng = random.Random()
    # Offline: no call's endpoint reaches a model (none configured, or an offline baseline).
    offline = all(endpoint not in pool or makes_no_model_call(pool[endpoint]) for endpoint in {c.endpoint for c in calls})
    progress = StageProgress(stage, total=len(calls), pending=pending, desc=desc, offline=offline)
    in_flight = asyncio.Semaphore(concurrency)
    not_sent: list[str] = []   # refused by the spending ceiling: the stage takes no new call

    async def worker(endpoint: str) -> None:
        queue, provider = queues[endpoint], gates.get(endpoint)
        while True:
            async with in_flight:
                if not queue or not_sent or (provider is not None and provider.stopped is not None):
                    return   # emptied by another worker meanwhile, the ceiling reached, or the endpoint stopped
                call = queue.popleft()
                try:
                    record = await _run_one(call, provider, policy, rng, progress.backoff, cache, is_done)
                except EndpointStopped:   # its endpoint stopped meanwhile: no record, pending
                    statuses["not_sent"] += 1
                    return
                except NotSent:   # stays resumable work: no record
                    not_sent.append(call.key)
                    statuses["not_sent"] += 1
                    return
            store.append(record)
            if not FIRST_REPLY.is_set():   # set() takes a lock: once, not per call
                FIRST_REPLY.set()
            statuses[record["status"]] += 1
            progress.finished(record["status"])

    # A paced provider, also inside another wrapper (the spending ceiling's), shows its quota waits.
    paced = [pacer for p in gates.values() if isinstance(pacer := getattr(p, "pacer", None), Pacer)]
    ticker = asyncio.create_task(_show_quota_waits(progress, paced)) if paced and pending else None
    try:
        async with asyncio.TaskGroup() as group:
            for endpoint, queue in queues.items():
                # Calls decided without a model (no provider) need no parallelism.
                limit = gates[endpoint].concurrency if endpoint in gates else 1
                for _ in range(min(limit, len(queue))):
                    group.create_task(worker(endpoint))
    finally:
        if ticker is not None:
            ticker.cancel()
        progress.close()
        store.close()
    if left := sum(len(q) for q in queues.values()):   # never taken: the ceiling, or a stopped endpoint
        statuses["not_sent"] += left
    return statuses


def reuse_cached(calls: Sequence[Call], pool: Mapping[str, Provider], store: JsonlStore, cache: CallCache,
                 is_done: Callable[[Record], bool]) -> collections.Counter[str]:
    """Before batches are made: every pending call the cache answers, recorded as a live hit
    would be (batch mode sends only what the cache cannot answer)."""
    done = store.load()
    statuses: collections.Counter[str] = collections.Counter()
    for call in calls:
        provider = pool.get(call.endpoint)
        if provider is None or (call.key in done and is_done(done[call.key])):
            continue
        prepared = call.prepare()
        lookup = cache.lookup(call, provider, prepared.request) if prepared.request is not None else None
        if lookup is None or (reused := cache.reuse(lookup)) is None:
            continue
        record = reused_record({"key": call.key, "endpoint": call.endpoint, **prepared.fields}, call, reused)
        if is_done(record):
            store.append(record)
            statuses[record["status"]] += 1
    return statuses


async def _show_quota_waits(progress: StageProgress, pacers: Sequence[Pacer]) -> None:
    """The progress says when calls are held back by a rate limit, not by the endpoint."""
    while True:
        progress.quota([p.name for p in pacers if p.waiting])
        await asyncio.sleep(0.5)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to the end, from plain Python or from inside a running event loop.

    Jupyter runs cells inside an event loop, where ``asyncio.run`` is refused; there the
    coroutine gets a loop of its own in a worker thread. An interrupt (Kernel > Interrupt
    Kernel) reaches only the cell's thread: it cancels the coroutine in the worker and waits
    for it to unwind (calls in flight are dropped, to be redone on a resume), so that nothing
    is written once the stage has raised and let go of the run directory.
    """
    def run(coroutine: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(coroutine)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run(make())
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    interrupted = threading.Event()

    async def cancellable() -> T:
        task = asyncio.current_task()
        assert task is not None
        started.append((asyncio.get_running_loop(), task))
        if interrupted.is_set():
            raise asyncio.CancelledError
        return await make()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run, cancellable())
        try:
            return future.result()
        except KeyboardInterrupt:
            interrupted.set()
            for loop, task in started:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:   # the loop has just finished
                    pass
            while not future.done():
                try:
                    concurrent.futures.wait([future])
                except KeyboardInterrupt:   # a second interrupt: the first is still unwinding
                    continue
            raise


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where available: about a tenth less CPU per call than asyncio's own loop (bench/)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
