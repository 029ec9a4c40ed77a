"""When the calls were made, from the stores' own records (each call's ``started_at`` and
``elapsed_s``): the first and the last call of each stage and endpoint.

Every time shown as "when the calls were made" (the paper render's provenance block) comes
from here, not from when a stage notebook last ran: a rerun with nothing to do runs no call,
and a stage resumed days later shows both dates. Every line a store holds counts, a failed
attempt an invocation later redid included: it was a call made then. A record with no call
(an answer imported from a file, a task out of context) has no time and is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalnb.records.stores import read_lines
from evalnb.core.types import CALL_STAGES


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def call_times(stores: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{stage: {endpoint: {"first_call": ISO, "last_call": ISO, "calls": n}}}``: the first
    call's start and the last call's end (UTC, to the second), over each stage's records."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage, records in stores.items():
        spans: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        for record in records:
            start = record.get("started_at")
            if not isinstance(start, (int, float)) or isinstance(start, bool):
                continue
            end = start + float(record.get("elapsed_s") or 0.0)
            endpoint = str(record.get("endpoint", "?"))
            span = spans.setdefault(endpoint, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
            counts[endpoint] = counts.get(endpoint, 0) + 1
        if spans:
            out[stage] = {e: {"first_call": _iso(a), "last_call": _iso(b), "calls": counts[e]}
                          for e, (a, b) in sorted(spans.items())}
    return out


def run_call_times(run_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`call_times` of a run directory's stores, read only (a torn last line is skipped,
    never healed: a record being rendered or verified is not written)."""
    return call_times({stage: read_lines(run_dir / f"{stage}.jsonl") for stage in CALL_STAGES})


def call_times_text(times: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """``generate model 2026-03-01T10:00:00+00:00 to 2026-03-01T10:05:12+00:00 (12 calls); ...``"""
    return "; ".join(f"{stage} {endpoint} {t['first_call']} to {t['last_call']} ({t['calls']} call"
                     f"{'s' if t['calls'] != 1 else ''})"
                     for stage, endpoints in times.items() for endpoint, t in endpoints.items()) or "no call made"
