"""The judges' numbers: Krippendorff's alpha, each judge's offset from the panel, test-retest
noise, Kendall's tau between two orders, and the weighted moments the bias statistics use.

Every interval here comes from one resampler, :func:`resample_weights`: a replicate is a
vector of item weights, each item weighted by how many times its cluster was drawn (whole
clusters resampled with replacement; each item its own cluster by default). A statistic
written as weighted sums over items is then exactly the statistic of the resampled data set,
computed for all replicates at once (``weights @ per_item``), with no copy of the data per
replicate. The interval is the 95 % percentile interval of the replicates, numpy's PCG64
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
from typing import Any

import numpy as np

from evalnb.core.stats import CONFIDENCE, Interval

CLUSTER_METHOD = "percentile bootstrap over {unit}s (whole {unit}s resampled, one resample shared by every number)"


def resample_weights(n_items: int, n_boot: int, seed: int, clusters: Sequence[Any] | None = None) -> np.ndarray:
    """``(n_boot, n_items)`` item weights: per replicate, the clusters are drawn with
    replacement (as many draws as clusters: a multinomial count per cluster) and each item is
    weighted by its cluster's count. ``clusters`` labels each item (None: each item its own
    cluster). Read-only, and kept for the next statistic over the same items and settings."""
    return _weights(n_items, n_boot, seed, None if clusters is None else tuple(clusters))


@functools.lru_cache(maxsize=4)
def _weights(n_items: int, n_boot: int, seed: int, clusters: tuple[Any, ...] | None) -> np.ndarray:
    labels = list(range(n_items)) if clusters is None else list(clusters)
    if len(labels) != n_items:
        raise ValueError(f"{len(labels)} cluster labels for {n_items} items")
    order = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    c = len(order)
    if c == 0:
        return np.zeros((n_boot, 0))
    counts = np.random.default_rng(seed).multinomial(c, np.full(c, 1 / c), size=n_boot).astype(float)
    weights = counts if clusters is None else counts[:, [order[label] for label in labels]]
    weights.setflags(write=False)
    return weights


def percentile(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    finite = np.round(np.asarray(values, dtype=float), 12)   # no -8e-18 where a replicate is 0
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)


def finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def interval(point: Any, replicates: np.ndarray, n: int, n_boot: int, seed: int, unit: str = "item") -> Interval:
    """An :class:`~evalnb.core.stats.Interval` from a point value and its replicates."""
    low, high = percentile(replicates)
    return Interval(low, high, finite(point), n, n_boot, seed, method=CLUSTER_METHOD.format(unit=unit))


def _ones(n: int) -> np.ndarray:
    return np.ones((1, n))


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


def alpha_weighted(matrix: Any, weights: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha (interval metric) of units x coders ``matrix`` (NaN: no value),
    each unit counted ``weights`` times; one alpha per row of ``weights``.

    D_o = (1/n) sum_u sum_{c != k in u} (c - k)^2 / (m_u - 1), D_e = sum over all pairs of
    pairable values of (c - k)^2 / (n (n - 1)), alpha = 1 - D_o / D_e (Krippendorff 2011,
    "Computing Krippendorff's alpha-reliability")."""
    m, s1, s2, within = _alpha_parts(np.asarray(matrix, dtype=float))
    n = weights @ m
    total1, total2 = weights @ s1, weights @ s2
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (weights @ within) / n
        expected = 2 * (n * total2 - total1 * total1) / (n * (n - 1))
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def krippendorff_alpha(matrix: Any) -> float | None:
    """Alpha on the data itself (interval level); None when undefined (no variation)."""
    data = np.asarray(matrix, dtype=float)
    return finite(alpha_weighted(data, _ones(len(data)))[0])


def alpha_interval(matrix: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
                   unit: str = "item") -> Interval:
    data = np.asarray(matrix, dtype=float)
    weights = resample_weights(len(data), n_boot, seed, clusters)
    return interval(krippendorff_alpha(data) if len(data) else math.nan, alpha_weighted(data, weights),
                    len(data), n_boot, seed, unit)


# --- each judge against the panel ------------------------------------------------------------------

def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``weights``, the weighted mean of ``values`` over its non-NaN entries."""
    present = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ np.where(present, values, 0.0)) / (weights @ present.astype(float))


def judge_offsets(matrix: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
                  unit: str = "item") -> list[Interval]:
    """For each judge (column), the mean over items every judge scored of (its score - the
    panel mean of that item): its systematic offset from the panel, with an interval."""
    data = np.asarray(matrix, dtype=float)
    complete = ~np.isnan(data).any(axis=1)
    deviations = data - data.mean(axis=1, keepdims=True)   # NaN on every row a judge did not score
    weights = resample_weights(len(data), n_boot, seed, clusters)
    n = int(complete.sum())
    return [interval(weighted_mean(deviations[:, j], _ones(len(data)))[0] if n else math.nan,
                     weighted_mean(deviations[:, j], weights), n, n_boot, seed, unit)
            for j in range(data.shape[1])]


# --- test-retest: a one-way random-effects decomposition ----------------------------------------------

def _variance_components(verdicts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(within-answer variance MSW, between-answer variance component) per row of weights,
    from the one-way ANOVA of ``verdicts`` (answers x repeats, NaN: none) by answer, unbalanced
    repeats allowed (k0 of Searle, Casella and McCulloch 1992, section 3.6)."""
    present = ~np.isnan(verdicts)
    k = present.sum(axis=1).astype(float)
    x = np.where(present, verdicts, 0.0)
    means = np.where(k > 0, x.sum(axis=1) / np.maximum(k, 1), 0.0)
    ss_within = np.where(present, (verdicts - means[:, None]) ** 2, 0.0).sum(axis=1)
    answers = weights @ (k > 0).astype(float)
    total_n = weights @ k
    with np.errstate(invalid="ignore", divide="ignore"):
        msw = (weights @ ss_within) / (total_n - answers)
        grand = (weights @ (k * means)) / total_n
        ss_between = weights @ (k * means ** 2) - total_n * grand ** 2
        msb = ss_between / (answers - 1)
        k0 = (total_n - (weights @ (k * k)) / total_n) / (answers - 1)
        between = np.maximum(0.0, (msb - msw) / k0)
    return msw, between


def retest(verdicts: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
           unit: str = "answer") -> dict[str, Interval]:
    """One judge's repeated verdicts (answers x repeats): its test-retest standard deviation
    sqrt(MSW), and the share of its score variance that is judge noise, MSW / (MSW + sigma_b^2),
    each with an interval over answers."""
    data = np.asarray(verdicts, dtype=float)
    point_w, point_b = _variance_components(data, _ones(len(data)))
    weights = resample_weights(len(data), n_boot, seed, clusters)
    reps_w, reps_b = _variance_components(data, weights)
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

    def share(weights: np.ndarray) -> np.ndarray:
        noise = sum(_variance_components(np.asarray(v, dtype=float), weights)[0] for v in per_judge) / J ** 2
        present = ~np.isnan(scores)
        x = np.where(present, scores, 0.0)
        n = weights @ present.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (weights @ (x * x) - (weights @ x) ** 2 / n) / (n - 1)
            return noise / var
    return interval(share(_ones(len(scores)))[0], share(resample_weights(len(scores), n_boot, seed, clusters)),
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
