"""How long calls took, from their records: per stage and model, the median and 90th
percentile of each latency figure, and the measured figures an estimate can use.

Every call made live records ``latency: {total_s, first_token_s, output_tokens_per_s}`` (its
final attempt; the last two only where it streamed). A batched call has none of its own
(``latency`` null: a batch's time is the batch's), and a record decided without a call has no
attempt; neither counts here. Percentiles interpolate linearly between order statistics (the
"inclusive" method of :func:`statistics.quantiles`, numpy's default); one value is its own
median and 90th percentile.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from evalnb.core.types import Record

FIGURES = ("total_s", "first_token_s", "output_tokens_per_s")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: list[float]) -> dict[str, Any]:
    """Median and 90th percentile (None without a value), and how many values."""
    if not values:
        return {"n": 0, "median": None, "p90": None}
    return {"n": len(values), "median": round(statistics.median(values), 4),
            "p90": round(percentile(values, 0.9), 4)}


def timed(records: Iterable[Record]) -> list[Record]:
    """The records of calls made live: those with a latency."""
    return [r for r in records if r.get("attempts") and isinstance(r.get("latency"), Mapping)]


def latency_summary(names: Mapping[str, str], stores: Mapping[str, Mapping[str, Record]]
                    ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per stage (``stores``: stage -> its records) and model (``names``: endpoint -> model):
    calls timed, how many streamed, and each figure's median and 90th percentile."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage, records in stores.items():
        by_model: dict[str, list[Record]] = defaultdict(list)
        for record in timed(records.values()):
            by_model[names.get(str(record["endpoint"]), str(record["endpoint"]))].append(record)
        out[stage] = {model: {"calls": len(rows), "streamed": sum(1 for r in rows if r.get("streamed")),
                              **{f: spread([r["latency"][f] for r in rows if r["latency"].get(f) is not None])
                                 for f in FIGURES}}
                      for model, rows in sorted(by_model.items())}
    return out


def latency_rows(summary: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Flat rows (stage, model, calls, streamed, each figure's median and p90) for a table."""
    rows = []
    for stage, per_model in summary.items():
        for model, row in per_model.items():
            flat: dict[str, Any] = {"stage": stage, "model": model, "calls": row["calls"], "streamed": row["streamed"]}
            for figure in FIGURES:
                flat[f"{figure} median"] = row[figure]["median"]
                flat[f"{figure} p90"] = row[figure]["p90"]
            rows.append(flat)
    return rows


def measured(records: Iterable[Record]) -> dict[str, Any] | None:
    """What finished calls of one stage and model say about the calls still to make: their
    median time and their mean reported output tokens (None when no call was timed)."""
    rows = timed(records)
    if not rows:
        return None
    outputs = [(r.get("usage") or {}).get("output_tokens") for r in rows]
    reported = [o for o in outputs if isinstance(o, (int, float))]
    return {"calls": len(rows), "median_s": statistics.median(r["latency"]["total_s"] for r in rows),
            "output_tokens": statistics.fmean(reported) if reported else None}


def measured_estimate(to_make: int, records: Iterable[Record], parallel: int) -> dict[str, Any]:
    """An estimate's columns from this run's own finished calls of one stage and model: how
    many were timed, their median time, the minutes the calls still to make would take at
    that median with ``parallel`` in flight, and their output tokens at the measured mean
    (all None where no call was timed yet)."""
    found = measured(records)
    if found is None:
        return {"measured_calls": 0, "measured_median_s": None, "est_minutes_measured": None,
                "est_output_tokens_measured": None}
    tokens = found["output_tokens"]
    return {"measured_calls": found["calls"], "measured_median_s": round(found["median_s"], 3),
            "est_minutes_measured": round(to_make * found["median_s"] / max(1, parallel) / 60, 2),
            "est_output_tokens_measured": round(to_make * tokens) if tokens is not None else None}
