"""One joint cluster bootstrap over the runs of a comparison: every model's headline metrics on
the same resample of clusters, from which the paired differences (:mod:`evalnb.stats.pairwise`)
and the rank intervals (:mod:`evalnb.stats.ranks`) are read.

The runs compared share their task set (the ``tasks`` fingerprint part), so the first run's
items, strata and clusters are every run's; a run lacking one of its items (which a matching
fingerprint rules out) has that item unscored (NaN), never dropped from the others.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from evalnb.benchmarks.base import cluster_labels, cluster_noun
from evalnb.stats import clustered, pairwise, power, smallsample, intervals as stats
from evalnb.stats.ranks import RankSummary, rank_summaries
from evalnb.core.types import ItemResults, Metric


@dataclass
class Joint:
    labels: list[str]
    metrics: list[Metric]                           # those with a ratio form (the mean metrics)
    design: clustered.Design
    cluster_noun: str
    forms: dict[tuple[str, str], clustered.RatioForm]   # (label, metric) ->
    draws: dict[tuple[str, str], np.ndarray]
    n_boot: int
    seed: int


def aligned(results: ItemResults, ids: Sequence[str], channel: str | None = None) -> np.ndarray:
    """The run's repeats x items matrix (or that of one of its named channels), its columns in
    the order of ``ids``."""
    matrix = np.asarray(results.values if channel is None else results.channels[channel], dtype=float)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    where = {item: j for j, item in enumerate(results.ids)}
    out = np.full((matrix.shape[0], len(ids)), np.nan)
    for j, item in enumerate(ids):
        if item in where:
            out[:, j] = matrix[:, where[item]]
    return out


@dataclass
class Forms:
    """Every run's mean metrics as ratio forms over the first run's items, and their design."""

    ids: list[str]
    design: clustered.Design
    forms: dict[tuple[str, str], clustered.RatioForm]   # (label, metric) ->
    metrics: list[Metric]                                # those every run has a form for


def forms_of(runs: Sequence[tuple[str, ItemResults]], metrics: Sequence[Metric]) -> Forms:
    first = runs[0][1]
    ids = list(first.ids)
    strata = [first.strata.get(i, "") for i in ids]
    design = clustered.Design.of(len(ids), cluster_labels(first), strata)
    groups = stats.strata_columns(strata, len(ids))
    forms: dict[tuple[str, str], clustered.RatioForm] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for label, results in runs:
            matrix = aligned(results, ids)
            channels = {name: aligned(results, ids, name) for name in results.channels}
            for metric in metrics:
                form = clustered.form_of(metric.fn, matrix, groups, channels) if ids else None
                if form is not None:
                    forms[(label, metric.name)] = form
    kept = [m for m in metrics if all((label, m.name) in forms for label, _ in runs)]
    return Forms(ids, design, forms, kept)


def joint_bootstrap(bench: type, runs: Sequence[tuple[str, ItemResults]], metrics: Sequence[Metric], *,
                    n_boot: int = stats.N_BOOT, seed: int = 0) -> Joint:
    """Every run's ``metrics`` (those with a ratio form) on one seeded cluster bootstrap."""
    found = forms_of(runs, metrics)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = clustered.bootstrap_draws(found.forms, found.design, n_boot=n_boot, seed=seed)
    # What a resampled unit is, as every table heads its count: the benchmark's cluster where the
    # results declare clusters, else its item (each item its own cluster).
    noun = cluster_noun(bench) if runs and runs[0][1].clusters else str(getattr(bench, "ITEM_NOUN", "item"))
    return Joint([label for label, _ in runs], found.metrics, found.design, noun, found.forms, draws, n_boot, seed)


def ranks(joint: Joint, metric: str) -> dict[str, RankSummary]:
    """Each model's rank, rank interval and P(first) on ``metric``: withheld (the rank alone)
    below the minimum of clusters, marked approximate below the threshold
    (:mod:`evalnb.stats.smallsample`)."""
    got = rank_summaries({label: joint.forms[(label, metric)].value() for label in joint.labels},
                         {label: joint.draws[(label, metric)] for label in joint.labels})
    used = np.zeros(len(joint.design.item_cluster), bool)
    for label in joint.labels:
        used |= joint.forms[(label, metric)].used()
    held = smallsample.support(joint.design.cluster_stratum, joint.design.totals(used.astype(float)) > 0,
                               joint.cluster_noun)
    if held.withheld:
        return {k: replace(r, rank_low=None, rank_high=None, p_first=None, note=held.withheld) for k, r in got.items()}
    if held.approximate:
        note = (f"approximate: {held.n_clusters} {smallsample.plural(joint.cluster_noun, held.n_clusters)} "
                f"(under {smallsample.APPROXIMATE_BELOW})")
        return {k: replace(r, note=note) for k, r in got.items()}
    return got


def pairs(joint: Joint, order: Sequence[str], *, alpha: float = pairwise.ALPHA,
          power_: float = power.POWER) -> list[pairwise.PairedDifference]:
    """Every pair (in leaderboard ``order``: A above B) on every metric, Holm within each metric,
    verdicts at ``alpha``, and the MDE at ``alpha`` and ``power_``."""
    out = []
    for metric in joint.metrics:
        for a, b in itertools.combinations(order, 2):
            pair = pairwise.paired_difference(metric.name, a, b, joint.forms[(a, metric.name)],
                                              joint.forms[(b, metric.name)], joint.design,
                                              joint.draws[(a, metric.name)], joint.draws[(b, metric.name)],
                                              noun=joint.cluster_noun)
            out.append(pair)
    adjusted = pairwise.with_holm(out, alpha, joint.n_boot)
    return [replace(p, mde=None if p.withheld else power.mde(p.se_delta, alpha, power_, p.df)) for p in adjusted]
