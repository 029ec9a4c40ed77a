"""The headline table: every metric a scores.json declares, headline metrics first, each with
its interval and the number of items it rests on (what the aggregate stage returns, the report
shows first and the exports write)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def metric_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared metrics of a scores.json, headline metrics first."""
    metrics = scores.get("metrics") or {}
    rows = [{"metric": name, "label": m["label"], "headline": m["headline"], "value": m["value"],
             "ci_low": (m.get("ci") or {}).get("low"), "ci_high": (m.get("ci") or {}).get("high"),
             "n": m["n"] if m.get("n") is not None else (m.get("ci") or {}).get("n")}
            for name, m in metrics.items()]
    return sorted(rows, key=lambda r: not r["headline"])


def headline_table(scores: Mapping[str, Any]) -> pd.DataFrame:
    """Every metric the benchmark declares, headline metrics first, each with its interval."""
    import pandas as pd

    from evalnb.views.tables import HEADLINE_LAYOUT, readable

    columns = ["metric", "label", "headline", "value", "ci_low", "ci_high", "n"]
    return readable(pd.DataFrame(metric_rows(scores), columns=columns).set_index("metric"), HEADLINE_LAYOUT)
