"""How sure a leaderboard's order is: rank intervals and the probability of ranking first.

From one joint cluster bootstrap (every model's replicate on the same resample of clusters,
:func:`evalnb.core.clustered.bootstrap_draws`): on each replicate the models are ranked, highest
value first, ties sharing their average rank (``scipy.stats.rankdata(method="average")``). A
model's rank interval runs from the lower (1 − confidence)/2 quantile of its ranks (taken down
to an observed rank) to the upper one (taken up); P(first) is the share of replicates in which
it ranks first, a tie for first counting 1/k for each of the k tied (so the P(first) sum to 1).
Replicates on which some model's value is undefined are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalnb.core import stats


@dataclass(frozen=True)
class RankSummary:
    rank: float | None          # on the data, average ranks for ties
    rank_low: float | None
    rank_high: float | None
    p_first: float | None
    n_boot: int                 # replicates used

    @property
    def interval_text(self) -> str:
        if self.rank_low is None or self.rank_high is None:
            return "-"
        if self.rank_low == self.rank_high:
            return f"{self.rank_low:g}"
        return f"{self.rank_low:g}-{self.rank_high:g}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"rank_interval": self.interval_text}


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along axis 0, highest first, ties averaged."""
    from scipy.stats import rankdata

    return rankdata(-values, axis=0, method="average")


def rank_summaries(values: Mapping[str, float | None], draws: Mapping[str, np.ndarray],
                   confidence: float = stats.CONFIDENCE) -> dict[str, RankSummary]:
    """Each model's rank, rank interval and P(first) (module doc)."""
    names = list(values)
    point = np.array([np.nan if values[n] is None else values[n] for n in names], dtype=float)
    point_ranks = _ranks(point) if np.isfinite(point).all() and names else np.full(len(names), np.nan)
    if not names:
        return {}
    matrix = np.stack([np.asarray(draws[n], dtype=float) for n in names])
    matrix = matrix[:, np.isfinite(matrix).all(axis=0)]
    if not matrix.shape[1]:
        return {n: RankSummary(None if np.isnan(r) else float(r), None, None, None, 0)
                for n, r in zip(names, point_ranks)}
    ranks = _ranks(matrix)
    top = matrix == matrix.max(axis=0)
    p_first = (top / top.sum(axis=0)).mean(axis=1)
    alpha = (1 - confidence) / 2
    low = np.quantile(ranks, alpha, axis=1, method="lower")
    high = np.quantile(ranks, 1 - alpha, axis=1, method="higher")
    return {n: RankSummary(None if np.isnan(point_ranks[i]) else float(point_ranks[i]), float(low[i]),
                           float(high[i]), float(p_first[i]), matrix.shape[1]) for i, n in enumerate(names)}
