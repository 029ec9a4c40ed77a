"""The statistics a reviewer asks for, as the report and compare notebooks show them:
standard errors with clusters (a run), paired differences with corrected verdicts and minimum
detectable differences (a comparison). The numbers are those of :mod:`evalnb.stats.clustered`,
:mod:`evalnb.stats.pairwise`, :mod:`evalnb.stats.ranks` and :mod:`evalnb.stats.power`; the raw
values are in ``scores.json`` (``uncertainty``) and ``compare.json`` (``tables.pairwise``); the
tables here keep them raw and show each estimate with its interval through a
:class:`evalnb.views.tables.Layout` (:data:`UNCERTAINTY_LAYOUT`,
:func:`evalnb.views.pairwise.pairwise_layout`).
A view that does not apply returns None (the notebook cell shows nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from evalnb.stats.pairwise import P_METHOD, PairedDifference
from evalnb.views.labels import metric_words
from evalnb.views.pairwise import pairwise_frame
from evalnb.views.tables import intervals_layout, readable
from evalnb.views.words import plural
from evalnb.comparison import compare, joint as joint_stats, leaderboard
from evalnb.pipeline.run import Run, scores as run_scores


# The protocol's estimate with its n, (when items share clusters) the cluster-bootstrap interval, the
# clustered SE's t interval and, for a bounded mean, Wilson's interval on the effective n.
UNCERTAINTY_LAYOUT = intervals_layout(["value", "cluster_bootstrap", "clustered_t", "bounded"], n={"value": "n"},
                                      fractions=("within_item_variance",))


def uncertainty_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per metric with standard errors: value and protocol interval, SE, n, clustered
    SE, clusters, design effect and (when items share clusters) the cluster-bootstrap interval."""
    block = scores.get("uncertainty") or {}
    declared = scores.get("metrics") or {}
    rows = []
    for name, entry in (block.get("metrics") or {}).items():
        metric = declared.get(name) or {}
        ci = metric.get("ci") or {}
        # n beside each estimate (the one table style): the items beside the value, the clusters
        # beside the cluster-bootstrap interval.
        clusters = plural(block.get("cluster", "cluster"))
        row = {"metric": name, "value": metric.get("value"), "value_low": ci.get("low"), "value_high": ci.get("high"),
               "n": entry["n"], "se": entry["se"], "clustered_se": entry["clustered_se"],
               "design_effect": entry["design_effect"]}
        if "within_item_variance" in entry:   # contestant repeats (a benchmark's repeats: K)
            row["repeats"], row["within_item_variance"] = entry["repeats"], entry["within_item_variance"]
        if "cluster_ci" in entry:
            cluster_ci = entry["cluster_ci"]
            row |= {"cluster_bootstrap": cluster_ci["mean"], "cluster_bootstrap_low": cluster_ci["low"],
                    "cluster_bootstrap_high": cluster_ci["high"]}
        row |= small_sample_cells(metric.get("value"), ci, entry, clusters)
        row[clusters] = entry["n_clusters"]
        rows.append(row)
    return rows


def small_sample_cells(value: Any, ci: Mapping[str, Any], entry: Mapping[str, Any], clusters: str) -> dict[str, Any]:
    """The t interval of the clustered SE, Wilson's for a bounded mean, and a note saying when
    an interval is approximate (few clusters), withheld, or of zero width, and why."""
    row: dict[str, Any] = {}
    t_ci, wilson = entry.get("t_ci") or {}, entry.get("bounded_ci")
    if t_ci:
        row |= {"clustered_t": value, "clustered_t_low": t_ci.get("low"), "clustered_t_high": t_ci.get("high")}
    if wilson:
        row |= {"bounded": value, "bounded_low": wilson["low"], "bounded_high": wilson["high"]}
    notes = [t_ci["note"]] if t_ci.get("note") else []
    if t_ci.get("approximate") and "cluster_ci" in entry and not t_ci.get("note"):
        notes.append(f"cluster bootstrap approximate: {entry['n_clusters']} {clusters}")
    if ci.get("low") is not None and ci.get("low") == ci.get("high"):
        notes.append("protocol interval of zero width: every resample gave the same value"
                     + ("; see Wilson's" if wilson else ""))
    if entry.get("se") == 0:
        notes.append("SE 0: every item scored the same")
    if notes:
        row["note"] = "; ".join(notes)
    return row


def standard_errors(run: Run) -> pd.DataFrame | None:
    """Each mean metric's standard error and n, clustered standard error, number of clusters and
    design effect; for a benchmark whose items share clusters, the interval resampling clusters
    beside the protocol's. None for a scores.json written before these numbers existed."""
    rows = uncertainty_rows(run_scores(run))
    return readable(pd.DataFrame(rows).set_index("metric"), uncertainty_layout(type(run.benchmark))) if rows else None


def uncertainty_layout(bench: Any) -> Any:
    """The standard-errors table's layout, each metric named by its word (the leaderboard's)."""
    from dataclasses import replace

    return replace(UNCERTAINTY_LAYOUT, values={"metric": dict(metric_words(bench.metrics()))})


def pairwise_table(cmp: compare.Comparison) -> pd.DataFrame:
    """Every pair of models on every headline metric, raw numbers (what compare.json keeps)."""
    if "pairwise" not in cmp.tables:
        order = list(leaderboard.ranked(cmp).index)
        joint = leaderboard.joint(cmp)
        pairs = joint_stats.pairs(joint, order, alpha=cmp.alpha, power_=cmp.power)
        built = pd.DataFrame([p.as_dict() for p in pairs], columns=list(PairedDifference.__dataclass_fields__))
        built["alpha"], built["power"], built["cluster"] = cmp.alpha, cmp.power, joint.cluster_noun
        built["p_method"] = P_METHOD
        built["t_delta"] = built["delta"]   # the t interval's own cell (shown beside the bootstrap's)
        cmp.tables["pairwise"] = built
    table: pd.DataFrame = cmp.tables["pairwise"]
    return table


def pairwise(cmp: compare.Comparison) -> pd.DataFrame | None:
    """Per pair and headline metric: Δ (A − B) with its paired cluster-bootstrap interval, SE_Δ,
    ρ, p, Holm-adjusted p, the verdict at α, and the minimum detectable difference at the chosen
    power: the raw rows of ``compare.json``, shown as every view shows them
    (:func:`evalnb.views.pairwise.pairwise_layout`). None with fewer than two runs, or when no
    headline metric is a mean with a ratio form (a metric function of a benchmark's own:
    :mod:`evalnb.stats.clustered`)."""
    if len(cmp.runs) < 2:
        return None
    table = pairwise_table(cmp)
    if not len(table):
        return None
    return pairwise_frame(table, metric_words(cmp.benchmark.metrics()))
