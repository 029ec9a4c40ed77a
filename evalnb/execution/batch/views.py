"""What the command line, the manifest and the report show of a run's batches: read-only
views of the journal, safe while another process runs the directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalnb.records.stores import read_json_if_exists
from evalnb.core.run_config import EndpointConfig
from evalnb.execution.batch.journal import IN_FLIGHT, Entry, in_flight, read_only

if TYPE_CHECKING:
    import pandas as pd

def waiting_line(run_dir: Path) -> str | None:
    """One line for a run that still waits for batches, or None."""
    flight = in_flight(run_dir)
    if not flight:
        return None
    calls = sum(e["calls"] for e in flight)
    since = min(e.get("submitted_at") or e["intent_at"] for e in flight)
    stages = ", ".join(sorted({e["stage"] for e in flight}))
    return (f"waiting for {len(flight)} batch{'es' if len(flight) != 1 else ''} ({calls:,} calls; {stages}) "
            f"submitted since {since}; run the same command again to collect")


SUMMARY_KEYS = ("key", "stage", "endpoint", "provider", "model", "batch_id", "state", "provider_state", "calls",
                "intent_at", "submitted_at", "finished_at", "collected_at", "results", "adopted", "error", "note",
                "last_error")


def summary(entry: Entry) -> dict[str, Any]:
    return {k: entry[k] for k in SUMMARY_KEYS if entry.get(k) is not None}


def stage_manifest(run_dir: Path, stage: str, endpoints: Mapping[str, EndpointConfig]) -> dict[str, Any]:
    """The manifest's account of a stage's batches (nothing for a stage that never batched)."""
    entries = [summary(e) for e in read_only(run_dir) if e["stage"] == stage]
    modes = {role: e.mode for role, e in endpoints.items()}
    if not entries and all(m == "live" for m in modes.values()):
        return {}
    return {"modes": modes, "batches": entries}


STATUS_COLUMNS = (("stage", "stage"), ("endpoint", "endpoint"), ("provider", "provider"), ("batch_id", "batch id"),
                  ("state", "state"), ("provider_state", "provider says"), ("calls", "calls"),
                  ("submitted_at", "submitted"), ("finished_at", "finished"), ("results", "results"))


def status_text(run_dir: Path) -> str:
    """``evalnb status``: the run's state and every batch, from the run directory alone."""
    status = read_json_if_exists(run_dir / "status.json")
    lines = [f"run: {run_dir}",
             "state: " + (f"{status['state']} (resumable: {status.get('resumable')}; updated {status.get('updated_at')})"
                          if status else "not aggregated yet")]
    entries = read_only(run_dir)
    if not entries:
        lines.append("batches: none (every endpoint live)")
        return "\n".join(lines)
    flight = [e for e in entries if e["state"] in IN_FLIGHT]
    lines.append(f"batches: {len(entries)}, {len(flight)} in flight ({sum(e['calls'] for e in flight):,} calls)")
    rows = [[_cell(e, key) for key, _ in STATUS_COLUMNS] for e in entries]
    headers = [title for _, title in STATUS_COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    waiting = waiting_line(run_dir)
    if waiting:
        lines.append(waiting)
    return "\n".join(lines)


def _cell(entry: Entry, key: str) -> str:
    value = entry.get(key)
    if key == "submitted_at" and value is None:
        value = f"(intent {entry.get('intent_at')})"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return "-" if value is None else str(value)


COLUMNS = ["stage", "endpoint", "provider", "model", "batch_id", "state", "calls", "submitted_at",
           "finished_at", "collected_at", "results"]


def batches_table(run: Any) -> pd.DataFrame:
    """One row per batch the run submitted (none when every endpoint ran live): its id, state,
    calls, submit and finish times, and the statuses its results were recorded with."""
    import pandas as pd

    from evalnb.views.tables import Layout, readable

    rows = []
    for entry in read_only(run.dir):
        row = {c: entry.get(c) for c in COLUMNS}
        results = entry.get("results")
        row["results"] = ", ".join(f"{k}: {v}" for k, v in results.items()) if results else None
        rows.append(row)
    return readable(pd.DataFrame(rows, columns=COLUMNS), Layout(empty="No batch: every endpoint ran live."))
