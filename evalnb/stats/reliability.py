"""The judges' numbers: Krippendorff's alpha, each judge's offset from the panel, test-retest
noise, Kendall's tau between two orders, and the weighted moments the bias statistics use.

Every interval here comes from the one resampler's cluster counts
(:func:`evalnb.stats.resample.cluster_counts`, here also called :func:`resample`): a replicate
counts how many times each cluster was drawn (whole clusters resampled with replacement; each
item its own cluster by default), and each item counts its cluster's count. A statistic
written as sums over items is then exactly the statistic of the resampled data set, computed
for all replicates at once (:meth:`Resample.total`: per-cluster sums, then one matrix
product), with no copy of the data per replicate. The interval is the 95 % percentile
interval of the replicates, numpy's PCG64 seeded with ``seed``; replicates where a statistic
is undefined are left out.

Krippendorff's alpha is computed here (interval level), not by the ``krippendorff`` package
at run time: the weighted form makes a 10,000-replicate interval one matrix product, and
evalnb gains no run-time dependency. ``tests/test_reliability_stats.py`` checks it against
the package, on the data and on an explicitly resampled replicate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalnb.stats.intervals import CONFIDENCE, Interval
from evalnb.stats.ranks import average_ranks
from evalnb.stats.resample import Resample, cluster_counts

CLUSTER_METHOD = "percentile bootstrap over {unit}s (whole {unit}s resampled, one resample shared by every number)"


# the names the judges' views and tests call: the one resampler's cluster counts
resample = cluster_counts


# Below this many resampled units (items, or their clusters) the bootstrap interval of
# Krippendorff's alpha is labelled approximate: a seeded simulation (three judges, interval-level
# verdicts on a 0.1 grid, judge noise SD 0.15, 300 datasets a size, the truth from the
# ``krippendorff`` package on 20,000 items) covers 0.90 at 30 items, 0.95 at 100 and 0.94 at 200
# (``tests/test_smallsample.py`` checks the 30 and 100 cells).
ALPHA_APPROXIMATE_BELOW = 100


# Below this many answers the retest study's interval of the test-retest SD is labelled
# approximate: a seeded simulation (four verdicts an answer, judge noise N(0, 0.05), 300 datasets
# a size) covers 0.89 at 20 answers (the study's default), 0.90-0.93 from 50 to 100, and 0.93-0.96 at
# 200 and 400 (``bench/bench_smallsample.py`` prints it).
RETEST_APPROXIMATE_BELOW = 200


def retest_note(answers: int) -> str | None:
    if answers < RETEST_APPROXIMATE_BELOW:
        return f"approximate interval: {answers} answers (under {RETEST_APPROXIMATE_BELOW})"
    return None


def alpha_note(units: int) -> str | None:
    """The reader's caveat for an alpha interval over ``units`` resampled units, or None."""
    if units < ALPHA_APPROXIMATE_BELOW:
        return f"approximate interval: {units} resampled units (under {ALPHA_APPROXIMATE_BELOW})"
    return None


def percentile(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The percentile interval of :mod:`evalnb.stats.clustered`, of values rounded to 12
    decimals first (no -8e-18 where a replicate is 0)."""
    from evalnb.stats.clustered import percentile_interval
    return percentile_interval(np.round(np.asarray(values, dtype=float), 12), confidence)


def finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def interval(point: Any, replicates: np.ndarray, n: int, n_boot: int, seed: int, unit: str = "item") -> Interval:
    """An :class:`~evalnb.stats.intervals.Interval` from a point value and its replicates."""
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
    """Rank 1 for the highest value; tied values share their average rank
    (:func:`evalnb.stats.ranks.average_ranks`, the one rank function)."""
    return average_ranks(values, highest_first=True)
