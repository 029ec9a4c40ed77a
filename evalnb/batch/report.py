"""Batch mode in the report notebook: which stages ran through provider batch APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.batch.journal import read_only

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["stage", "endpoint", "provider", "model", "batch_id", "state", "calls", "submitted_at",
           "finished_at", "collected_at", "results"]


def batches_table(run: Any) -> pd.DataFrame:
    """One row per batch the run submitted (none when every endpoint ran live): its id, state,
    calls, submit and finish times, and the statuses its results were recorded with."""
    import pandas as pd

    from evalnb.tables import readable

    rows = []
    for entry in read_only(run.dir):
        row = {c: entry.get(c) for c in COLUMNS}
        results = entry.get("results")
        row["results"] = ", ".join(f"{k}: {v}" for k, v in results.items()) if results else None
        rows.append(row)
    return readable(pd.DataFrame(rows, columns=COLUMNS))
