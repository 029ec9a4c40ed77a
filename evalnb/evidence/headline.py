"""The headline table: every metric a scores.json declares, headline metrics first, each with
its interval and the number of items it rests on (what the aggregate stage returns, the report
shows first and the exports write)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def metric_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared metrics of a scores.json, headline metrics first; where items share clusters
    (the run's ``uncertainty`` has a cluster interval for the metric), the cluster interval
    beside the protocol's: the clustered SE with Student t (``t_ci``)."""
    metrics = scores.get("metrics") or {}
    spread = (scores.get("uncertainty") or {}).get("metrics") or {}
    rows = [{"metric": name, "label": m["label"], "headline": m["headline"], "value": m["value"],
             "ci_low": (m.get("ci") or {}).get("low"), "ci_high": (m.get("ci") or {}).get("high"),
             "n": m["n"] if m.get("n") is not None else (m.get("ci") or {}).get("n"), **cluster_cells(m, spread.get(name))}
            for name, m in metrics.items()]
    for row in rows:   # a zero-width interval is never shown without saying why
        if row["ci_low"] is not None and row["ci_low"] == row["ci_high"]:
            row["note"] = "zero-width interval: every resample gave the same value (the items show no spread)"
    return sorted(rows, key=lambda r: not r["headline"])


def cluster_cells(metric: Mapping[str, Any], entry: Mapping[str, Any] | None) -> dict[str, Any]:
    if not entry or "cluster_ci" not in entry or not entry.get("t_ci"):
        return {}
    return {"cluster": metric["value"], "cluster_low": entry["t_ci"]["low"], "cluster_high": entry["t_ci"]["high"]}


def headline_table(scores: Mapping[str, Any]) -> pd.DataFrame:
    """Every metric the benchmark declares, headline metrics first, each with its interval."""
    import pandas as pd

    from dataclasses import replace

    from evalnb.views.labels import CLUSTER_CI
    from evalnb.views.tables import HEADLINE_LAYOUT, Estimate, readable

    rows = metric_rows(scores)
    columns = ["metric", "label", "headline", "value", "ci_low", "ci_high", "n"]
    layout = HEADLINE_LAYOUT
    if any("note" in r for r in rows):
        columns.append("note")
    if any("cluster" in r for r in rows):   # the cluster interval beside the protocol's
        columns += ["cluster", "cluster_low", "cluster_high"]
        layout = replace(layout, estimates=layout.estimates + (Estimate(CLUSTER_CI, "cluster", "cluster_low",
                                                                        "cluster_high"),))
    return readable(pd.DataFrame(rows, columns=columns).set_index("metric"), layout)
