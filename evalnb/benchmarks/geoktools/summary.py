"""GeoKTools' numbers as scores.json lays them out: the headline keys it has always had, and
each repeat's numbers beside their mean and s.d. across repeats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalnb.benchmarks.base import metric_ci, metric_value
from evalnb.benchmarks.geoktools.cases import K_VALUES
from evalnb.core.types import ItemResults, Metric
from evalnb.stats import intervals as stats


def headline_keys(body: Mapping[str, Any], counts: Mapping[int, int]) -> dict[str, Any]:
    """The headline keys scores.json has always had, from the declared metrics."""
    if not body["complete"]:
        return {"overall": None, "n": sum(counts.values()), "by_k": None, "macro_over_k": None, "ci": None}
    return {"overall": metric_value(body, "overall"), "n": sum(counts.values()),
            "by_k": {str(k): {"mean": metric_value(body, f"K={k}"), "n": counts.get(k, 0)} for k in K_VALUES},
            "macro_over_k": metric_value(body, "macro_over_k"),
            "ci": {"overall": metric_ci(body, "overall"), "macro_over_k": metric_ci(body, "macro_over_k"),
                   "by_k": {str(k): metric_ci(body, f"K={k}") for k in K_VALUES}}}


def repeat_summary(results: ItemResults, metrics: Sequence[Metric]) -> dict[str, Any]:
    """Each repeat's numbers alone, and their mean and s.d. across repeats."""
    strata = [results.strata[i] for i in results.ids]
    per_metric = {m.name: stats.per_repeat(m, results.values, strata) for m in metrics}
    heads = [{"overall": per_metric["overall"][r], "macro_over_k": per_metric["macro_over_k"][r],
              "by_k": {str(k): per_metric[f"K={k}"][r] for k in K_VALUES}} for r in range(results.repeats)]
    return {"per_repeat": heads, "overall": stats.mean_sd(per_metric["overall"]),
            "macro_over_k": stats.mean_sd(per_metric["macro_over_k"]),
            "by_k": {str(k): stats.mean_sd(per_metric[f"K={k}"]) for k in K_VALUES}}
