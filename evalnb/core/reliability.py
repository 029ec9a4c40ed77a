"""The judges' numbers: Krippendorff's alpha, each judge's offset from the panel, test-retest
noise, Kendall's tau between two orders, and the weighted moments the bias statistics use.

Every interval here comes from one resampler, :func:`resample`: a replicate counts how many
times each cluster was drawn (whole clusters resampled with replacement; each item its own
cluster by default), and each item counts its cluster's count. A statistic written as sums
over items is then exactly the statistic of the resampled data set, computed for all
replicates at once (:meth:`Resample.total`: per-cluster sums, then one matrix product), with
no copy of the data per replicate. The interval is the 95 % percentile interval of the replicates, numpy's PCG64
seeded with ``seed``; replicates where a statistic is undefined are left out.

Lane E's ``core/clustered.py`` may provide the cluster resampler; this one is kept small
(one function) so the two can be unified.

Krippendorff's alpha is computed here (interval level), not by the ``krippendorff`` package
at run time: the weighted form makes a 10,000-replicate interval one matrix product, and
evalnb gains no run-time dependency. ``tests/test_reliability_stats.py`` checks it against
the package, on the data and on an explicitly resampled replicate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalnb.core.stats import CONFIDENCE, Interval

CLUSTER_METHOD = "percentile bootstrap over {unit}s (whole {unit}s resampled, one resample shared by every number)"


@dataclass(frozen=True)
class Resample:
    """Bootstrap replicates as cluster counts: ``weights[r, c]`` is how many times replicate r
    drew cluster c; item i belongs to cluster ``of_item[i]`` and counts its cluster's count.
    Sums over items are taken per cluster first (:meth:`total`), so memory is replicates x
    clusters however many items (a pooled leaderboard of twenty models) the clusters hold."""

    weights: np.ndarray   # (replicates, clusters)
    of_item: np.ndarray   # (items,) -> cluster column

    @classmethod
    def identity(cls, n_items: int) -> Resample:
        """One replicate that counts every item once: the statistic on the data itself."""
        return cls(np.ones((1, n_items)), np.arange(n_items))

    def total(self, per_item: Any) -> np.ndarray:
        """Per replicate, sum_i (its cluster's count) x ``per_item[i]``."""
        values = np.asarray(per_item, dtype=float)
        return self.weights @ np.bincount(self.of_item, weights=values, minlength=self.weights.shape[1])

    def item_weights(self, rows: Any = slice(None)) -> np.ndarray:
        """(replicates, items) item weights, for ``rows`` of the replicates (for statistics that
        are not sums over items: ranks)."""
        return self.weights[rows][:, self.of_item]


def resample(n_items: int, n_boot: int, seed: int, clusters: Sequence[Any] | None = None) -> Resample:
    """``n_boot`` replicates: per replicate, the clusters drawn with replacement (as many draws
    as clusters: a multinomial count per cluster), each item weighted by its cluster's count.
    ``clusters`` labels each item (None: each item its own cluster). Kept for the next
    statistic over the same items and settings (read-only)."""
    return _resample(n_items, n_boot, seed, None if clusters is None else tuple(clusters))


@functools.lru_cache(maxsize=2)
def _resample(n_items: int, n_boot: int, seed: int, clusters: tuple[Any, ...] | None) -> Resample:
    labels = list(range(n_items)) if clusters is None else list(clusters)
    if len(labels) != n_items:
        raise ValueError(f"{len(labels)} cluster labels for {n_items} items")
    order = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    c = len(order)
    counts = (np.random.default_rng(seed).multinomial(c, np.full(c, 1 / c), size=n_boot).astype(float)
              if c else np.zeros((n_boot, 0)))
    of_item = np.array([order[label] for label in labels], dtype=np.intp)
    counts.setflags(write=False)
    of_item.setflags(write=False)
    return Resample(counts, of_item)


def percentile(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The percentile interval of :mod:`evalnb.core.clustered`, of values rounded to 12
    decimals first (no -8e-18 where a replicate is 0)."""
    from evalnb.core.clustered import percentile_interval
    return percentile_interval(np.round(np.asarray(values, dtype=float), 12), confidence)


def finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def interval(point: Any, replicates: np.ndarray, n: int, n_boot: int, seed: int, unit: str = "item") -> Interval:
    """An :class:`~evalnb.core.stats.Interval` from a point value and its replicates."""
    low, high = percentile(replicates)
    return Interval(low, high, finite(point), n, n_boot, seed, method=CLUSTER_METHOD.format(unit=unit))


# --- Krippendorff's alpha, interval level -----------------------------------------------------------

def _alpha_parts(matrix: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per unit (row): m_u, sum of values, sum of squares, and the within-unit disagreement
    sum_{c != k} (c - k)^2 / (m_u - 1); units with fewer than two values are not pairable."""
    present = ~np.isnan(matrix)
    m = present.sum(axis=1).astype(float)
    x = np.where(present, matrix, 0.0)
    s1, s2 = x.sum(axis=1), (x * x).sum(axis=1)
    pairable = m >= 2
    within = np.where(pairable, 2 * (m * s2 - s1 * s1) / np.maximum(m - 1, 1), 0.0)
    keep = pairable.astype(float)
    return m * keep, s1 * keep, s2 * keep, within


def alpha_weighted(matrix: Any, rs: Resample) -> np.ndarray:
    """Krippendorff's alpha (interval metric) of units x coders ``matrix`` (NaN: no value),
    each unit counted as the replicates of ``rs`` say; one alpha per replicate.

    D_o = (1/n) sum_u sum_{c != k in u} (c - k)^2 / (m_u - 1), D_e = sum over all pairs of
    pairable values of (c - k)^2 / (n (n - 1)), alpha = 1 - D_o / D_e (Krippendorff 2011,
    "Computing Krippendorff's alpha-reliability")."""
    m, s1, s2, within = _alpha_parts(np.asarray(matrix, dtype=float))
    n = rs.total(m)
    total1, total2 = rs.total(s1), rs.total(s2)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = rs.total(within) / n
        expected = 2 * (n * total2 - total1 * total1) / (n * (n - 1))
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def krippendorff_alpha(matrix: Any) -> float | None:
    """Alpha on the data itself (interval level); None when undefined (no variation)."""
    data = np.asarray(matrix, dtype=float)
    return finite(alpha_weighted(data, Resample.identity(len(data)))[0])


def alpha_interval(matrix: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
                   unit: str = "item") -> Interval:
    data = np.asarray(matrix, dtype=float)
    rs = resample(len(data), n_boot, seed, clusters)
    return interval(krippendorff_alpha(data) if len(data) else math.nan, alpha_weighted(data, rs),
                    len(data), n_boot, seed, unit)


# --- each judge against the panel ------------------------------------------------------------------

def weighted_mean(values: np.ndarray, rs: Resample) -> np.ndarray:
    """Per replicate, the mean of ``values`` over its non-NaN entries, as resampled."""
    present = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return rs.total(np.where(present, values, 0.0)) / rs.total(present)


def judge_offsets(matrix: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
                  unit: str = "item") -> list[Interval]:
    """For each judge (column), the mean over items every judge scored of (its score - the
    panel mean of that item): its systematic offset from the panel, with an interval."""
    data = np.asarray(matrix, dtype=float)
    complete = ~np.isnan(data).any(axis=1)
    deviations = data - data.mean(axis=1, keepdims=True)   # NaN on every row a judge did not score
    rs = resample(len(data), n_boot, seed, clusters)
    n = int(complete.sum())
    return [interval(weighted_mean(deviations[:, j], Resample.identity(len(data)))[0] if n else math.nan,
                     weighted_mean(deviations[:, j], rs), n, n_boot, seed, unit)
            for j in range(data.shape[1])]


# --- test-retest: a one-way random-effects decomposition ----------------------------------------------

def _variance_components(verdicts: np.ndarray, rs: Resample) -> tuple[np.ndarray, np.ndarray]:
    """(within-answer variance MSW, between-answer variance component) per replicate,
    from the one-way ANOVA of ``verdicts`` (answers x repeats, NaN: none) by answer, unbalanced
    repeats allowed (k0 of Searle, Casella and McCulloch 1992, section 3.6)."""
    present = ~np.isnan(verdicts)
    k = present.sum(axis=1).astype(float)
    x = np.where(present, verdicts, 0.0)
    means = np.where(k > 0, x.sum(axis=1) / np.maximum(k, 1), 0.0)
    ss_within = np.where(present, (verdicts - means[:, None]) ** 2, 0.0).sum(axis=1)
    answers = rs.total(k > 0)
    total_n = rs.total(k)
    with np.errstate(invalid="ignore", divide="ignore"):
        msw = rs.total(ss_within) / (total_n - answers)
        grand = rs.total(k * means) / total_n
        ss_between = rs.total(k * means ** 2) - total_n * grand ** 2
        msb = ss_between / (answers - 1)
        k0 = (total_n - rs.total(k * k) / total_n) / (answers - 1)
        between = np.maximum(0.0, (msb - msw) / k0)
    return msw, between


def retest(verdicts: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
           unit: str = "answer") -> dict[str, Interval]:
    """One judge's repeated verdicts (answers x repeats): its test-retest standard deviation
    sqrt(MSW), and the share of its score variance that is judge noise, MSW / (MSW + sigma_b^2),
    each with an interval over answers."""
    data = np.asarray(verdicts, dtype=float)
    point_w, point_b = _variance_components(data, Resample.identity(len(data)))
    reps_w, reps_b = _variance_components(data, resample(len(data), n_boot, seed, clusters))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"retest_sd": interval(np.sqrt(point_w[0]), np.sqrt(reps_w), len(data), n_boot, seed, unit),
                "noise_share": interval(point_w[0] / (point_w[0] + point_b[0]), reps_w / (reps_w + reps_b),
                                        len(data), n_boot, seed, unit)}


def panel_noise_share(per_judge: Sequence[Any], panel_scores: Any, *, n_boot: int, seed: int,
                      clusters: Sequence[Any] | None = None, unit: str = "answer") -> Interval:
    """The share of the variance of the protocol's item score (the mean of J judges, one verdict
    each) that is judge noise: (sum_j MSW_j / J^2) / Var(item score), noise independent across
    judges. ``per_judge``: each judge's answers x repeats matrix, rows aligned with ``panel_scores``."""
    scores = np.asarray(panel_scores, dtype=float)
    J = len(per_judge)

    def share(rs: Resample) -> np.ndarray:
        noise = sum(_variance_components(np.asarray(v, dtype=float), rs)[0] for v in per_judge) / J ** 2
        present = ~np.isnan(scores)
        x = np.where(present, scores, 0.0)
        n = rs.total(present)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (rs.total(x * x) - rs.total(x) ** 2 / n) / (n - 1)
            return noise / var
    return interval(share(Resample.identity(len(scores)))[0], share(resample(len(scores), n_boot, seed, clusters)),
                    len(scores), n_boot, seed, unit)


# --- orders ----------------------------------------------------------------------------------------

def kendall_tau_b(a: Any, b: Any) -> np.ndarray:
    """Kendall's tau-b between the orders of ``a`` and ``b`` along their last axis (ties
    allowed; NaN when either has no untied pair): sum sign(da) sign(db) / sqrt(n_a n_b)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    i, j = np.triu_indices(x.shape[-1], k=1)
    sa, sb = np.sign(x[..., i] - x[..., j]), np.sign(y[..., i] - y[..., j])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sa * sb).sum(axis=-1) / np.sqrt((sa * sa).sum(axis=-1) * (sb * sb).sum(axis=-1))


def ranks_descending(values: Any) -> np.ndarray:
    """Rank 1 for the highest value; tied values share their average rank."""
    from scipy.stats import rankdata
    return np.asarray(rankdata(-np.asarray(values, dtype=float), method="average"))
