"""How sure a leaderboard's order is: rank intervals and the probability of ranking first.

From one joint cluster bootstrap (every model's replicate on the same resample of clusters,
:func:`evalnb.stats.clustered.bootstrap_draws`): on each replicate the models are ranked, highest
value first, ties sharing their average rank (:func:`average_ranks`, the one rank function:
``scipy.stats.rankdata(method="average")``). A model's rank interval runs from the lower
(1 − confidence)/2 quantile of its ranks (taken down to an observed rank) to the upper one
(taken up); P(first) is the share of replicates in which it ranks first, a tie for first
counting 1/k for each of the k tied (so the P(first) sum to 1). Replicates on which some
model's value is undefined are left out.

:func:`weighted_ranks` is the same average rank on a bootstrap replicate given as item weights
(the judges' length bias ranks every replicate that way, without expanding the sample).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalnb.stats import intervals as stats


@dataclass(frozen=True)
class RankSummary:
    rank: float | None          # on the data, average ranks for ties
    rank_low: float | None
    rank_high: float | None
    p_first: float | None
    n_boot: int                 # replicates used
    note: str | None = None     # withheld or approximate, and why (few clusters)

    @property
    def interval_text(self) -> str:
        if self.rank_low is None or self.rank_high is None:
            return "withheld" if self.note else "-"
        return f"{self.rank_low:g}" if self.rank_low == self.rank_high else f"{self.rank_low:g}-{self.rank_high:g}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"rank_interval": self.interval_text}


def average_ranks(values: Any, *, axis: int = 0, highest_first: bool = False) -> np.ndarray:
    """Ranks along ``axis``, 1 for the lowest value (the highest with ``highest_first``), tied
    values sharing their average rank (``scipy.stats.rankdata(method="average")``; NaN
    anywhere along the axis makes that slice NaN). Every unweighted rank in evalnb is this one."""
    from scipy.stats import rankdata

    data = np.asarray(values, dtype=float)
    return np.asarray(rankdata(-data if highest_first else data, axis=axis, method="average"))


def weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``weights``, each value's average rank (lowest first) in the sample where value
    i appears ``weights[r, i]`` times: :func:`average_ranks` of that expanded sample, without
    expanding it (the bootstrap's replicates as item weights)."""
    if not len(values):
        return np.zeros_like(weights)
    unique, group = np.unique(values, return_inverse=True)   # each item's tie group, groups in value order
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(len(unique)))
    per_group = np.add.reduceat(weights[:, order], starts, axis=1)   # each tie group's total weight
    below = np.cumsum(per_group, axis=1) - per_group
    return (below + (per_group + 1) / 2)[:, group]


def rank_summaries(values: Mapping[str, float | None], draws: Mapping[str, np.ndarray],
                   confidence: float = stats.CONFIDENCE) -> dict[str, RankSummary]:
    """Each model's rank, rank interval and P(first) (module doc)."""
    names = list(values)
    point = np.array([np.nan if values[n] is None else values[n] for n in names], dtype=float)
    point_ranks = average_ranks(point, highest_first=True) if np.isfinite(point).all() and names else np.full(len(names), np.nan)
    if not names:
        return {}
    matrix = np.stack([np.asarray(draws[n], dtype=float) for n in names])
    matrix = matrix[:, np.isfinite(matrix).all(axis=0)]
    if not matrix.shape[1]:
        return {n: RankSummary(None if np.isnan(r) else float(r), None, None, None, 0)
                for n, r in zip(names, point_ranks)}
    ranks = average_ranks(matrix, highest_first=True)
    top = matrix == matrix.max(axis=0)
    p_first = (top / top.sum(axis=0)).mean(axis=1)
    alpha = (1 - confidence) / 2
    low = np.quantile(ranks, alpha, axis=1, method="lower")
    high = np.quantile(ranks, 1 - alpha, axis=1, method="higher")
    return {n: RankSummary(None if np.isnan(point_ranks[i]) else float(point_ranks[i]), float(low[i]),
                           float(high[i]), float(p_first[i]), matrix.shape[1]) for i, n in enumerate(names)}
