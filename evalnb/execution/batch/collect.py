"""Collecting a stage's batches: an intent looked up at the provider (adopted, or abandoned
when the provider never got it), a submitted batch polled, and a finished batch's results
written into the stage's store.

Each result is one record per call, exactly as the live runner writes it for the same reply,
plus a ``batch`` field naming the batch. A request that failed inside the batch is recorded
like the same failure of a live call (transient: resumable; permanent: final); a request the
batch did not answer, and every call of a batch that failed or expired as a whole, is
transient. A failure of the endpoint's own stops that endpoint for the rest of the stage
(``stopped``, shared with the stage's submissions and live calls).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalnb.core.redaction import redact
from evalnb.execution.batch.backend_base import Backend, Outcome, epoch, lost, management_error
from evalnb.execution.batch.journal import Entry, Journal
from evalnb.execution.endpoint_gate import Stopped
from evalnb.execution.runner import Call, Record, completion_fields, unexpected_failure
from evalnb.providers.base import Completion, ProviderError
from evalnb.providers.streams.base import finish_batch
from evalnb.records.manifest import utc_now
from evalnb.records.stores import JsonlStore


@dataclass
class Collector:
    """The collection side of one stage in one process: the journal, the stage's calls by key,
    and the endpoints stopped (the same mapping the stage's submissions and live calls read)."""

    journal: Journal
    by_key: Mapping[str, Call]
    stopped: Stopped
    cache: Any = None   # the response cache (evalnb.execution.cache.reuse.CallCache), or None

    async def advance(self, entry: Entry, backend: Backend | None, store: JsonlStore, done: Any) -> Counter[str]:
        """Look an intent up, or poll a submitted batch; collect it when it has ended."""
        if backend is None:
            return Counter()   # its endpoint is no longer configured: left as it is
        if entry["state"] == "intent":
            claimed = {e["batch_id"] for e in self.journal.batches() if e.get("batch_id")}
            try:
                found = await backend.find(entry["key"], float(entry["intent_ts"]), entry["calls"], claimed)
            except Exception as error:   # noqa: BLE001 - the provider unreachable: try on the next pass
                self.note_error(entry, error)
                return Counter()
            if found is None:
                self.journal.update(entry, state="abandoned", note="not found at the provider: never submitted; "
                                                                   "its calls go into a new batch")
                return Counter()
            entry = self.journal.update(entry, state="submitted", batch_id=found, adopted=True,
                                        submitted_at=entry["intent_at"], submitted_ts=entry["intent_ts"])
        try:
            poll = await backend.poll(entry["batch_id"])
        except Exception as error:   # noqa: BLE001 - polled again on the next pass
            self.note_error(entry, error)
            return Counter()
        if poll.state == "running":
            # A line per change of state, not per poll: days of --wait keep the journal small.
            if poll.provider_state != entry.get("provider_state") or entry.get("last_error"):
                self.journal.update(entry, provider_state=poll.provider_state, counts=poll.counts, last_error=None)
            return Counter()
        rows = self.journal.calls(entry)
        finished_at = poll.finished_at or utc_now()
        finished = {"provider_state": poll.provider_state, "counts": poll.counts, "finished_at": finished_at}
        if poll.state == "failed":
            failure = ProviderError("transient", f"batch failed as a whole ({poll.provider_state})"
                                    + (f": {poll.error}" if poll.error else ""), code="batch_failed")
            counts = self.write(entry, rows, {}, failure, store, done, finished_at)
            self.journal.update(entry, state="failed", error=failure.message, collected_at=utc_now(),
                                results=dict(counts), **finished)
            return counts
        try:
            results = await backend.results(poll, [r["custom_id"] for r in rows])
        except Exception as error:   # noqa: BLE001 - collected on the next pass
            self.journal.update(entry, last_error=redact(management_error(error).message), **finished)
            return Counter()
        ours = {r["custom_id"] for r in rows}
        if entry.get("adopted") and results and not any(cid in ours for cid, _ in results):
            self.journal.update(entry, state="abandoned", note="adopted by time and size, but its results carry "
                                                               "another batch's ids: not this run's", **finished)
            return Counter()
        # Read as the endpoint reads a live reply (a leading think block included).
        outcomes = {cid: finish_batch(getattr(backend, "live", None), outcome) for cid, outcome in results
                    if cid in ours}
        missing = lost("expired" if "EXPIRED" in poll.provider_state.upper() else "missing",
                       f"no result in batch {entry['batch_id']} ({poll.provider_state})")
        counts = self.write(entry, rows, outcomes, missing, store, done, finished_at, getattr(backend, "live", None))
        self.journal.update(entry, state="collected", collected_at=utc_now(), results=dict(counts), **finished)
        return counts

    def keep(self, call: Call, live: Any, completion: Completion, submitted: float) -> None:
        """A batch result's final answer into the response cache, under its live request's key."""
        if self.cache is None or live is None:
            return
        try:
            request = call.prepare().request
        except Exception:   # noqa: BLE001 - not kept; the record is written all the same
            return
        lookup = self.cache.lookup(call, live, request) if request is not None else None
        if lookup is not None:
            self.cache.keep(lookup, completion, submitted)

    def note_error(self, entry: Entry, error: Exception) -> None:
        """Why a batch could not be looked up or polled (recorded once per new message)."""
        message = redact(management_error(error).message)
        if message != self.journal.entries.get(entry["key"], entry).get("last_error"):
            self.journal.update(entry, last_error=message)

    def write(self, entry: Entry, rows: list[dict[str, Any]], outcomes: Mapping[str, Outcome],
              otherwise: ProviderError, store: JsonlStore, done: Any, finished_at: str,
              live: Any = None) -> Counter[str]:
        """Each call's record, as the live runner would write it for the same reply."""
        stored = store.load()
        counts: Counter[str] = Counter()
        submitted = float(entry.get("submitted_ts") or entry["intent_ts"])
        elapsed = round(max(0.0, epoch(finished_at) - submitted), 3)
        for row in rows:
            call = self.by_key.get(row["key"])
            previous = stored.get(row["key"])
            if call is None or (previous is not None and done(previous)):
                continue   # no longer asked for, or answered meanwhile: nothing to change
            outcome = outcomes.get(row["custom_id"], otherwise)
            record: Record = {"key": call.key, "endpoint": entry["endpoint"], **row["fields"], "attempts": 1,
                              "waits": [], "started_at": submitted, "elapsed_s": elapsed}
            if isinstance(outcome, Completion):
                try:
                    record.update(completion_fields(outcome))
                    record.update(call.interpret(outcome))
                except Exception as error:   # noqa: BLE001 - a failure belongs to its call
                    record.update(unexpected_failure(error))
            else:
                record.update(status=f"failed_{outcome.kind}", text=None, error=outcome.as_dict())
                if outcome.kind == "endpoint":   # no further batch nor live call to it in this stage
                    self.stopped.setdefault(entry["endpoint"], outcome)
            record["batch"] = {"id": entry["batch_id"], "tag": entry["key"], "custom_id": row["custom_id"],
                               "provider": entry["provider"]}
            if isinstance(outcome, Completion) and done(record):
                self.keep(call, live, outcome, submitted)
            store.append(record)
            counts[record["status"]] += 1
        return counts
