"""The judges' bias, as numbers: self-preference (a judge from a contestant's family) and
length (does a judge reward long responses), each with a paired bootstrap interval.

Both are written as weighted sums over items so that one replicate of
:func:`evalnb.stats.resample.cluster_counts` (whole clusters drawn with replacement, one
resample shared by every model: "paired") is the statistic of the resampled data set, for all
replicates at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evalnb.stats.intervals import Interval
from evalnb.stats.ranks import average_ranks, weighted_ranks
from evalnb.stats.reliability import interval, weighted_mean
from evalnb.stats.resample import Resample, cluster_counts

BLOCK_CELLS = 1_000_000   # replicate x item cells ranked at once


def self_preference(family: Any, others: Any, *, n_boot: int, seed: int,
                    clusters: Sequence[Any] | None = None, unit: str = "item") -> dict[str, Interval]:
    """``family``: per item, (the judge's score - the other judges' mean) on the contestant of
    the judge's family (NaN: not judged); ``others``: the same differences, contestants x items,
    on the contestants of other families, items aligned. The self-preference is
    mean(family) - mean(others pooled), every replicate resampling the items once for all."""
    own = np.asarray(family, dtype=float)
    rest = np.asarray(others, dtype=float).reshape(-1, len(own)) if len(own) else np.zeros((1, 0))
    def parts(rs: Resample) -> tuple[np.ndarray, np.ndarray]:
        present = ~np.isnan(rest)
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = rs.total(np.where(present, rest, 0.0).sum(axis=0)) / rs.total(present.sum(axis=0))
        return weighted_mean(own, rs), pooled

    point_own, point_rest = parts(Resample.identity(len(own)))
    reps_own, reps_rest = parts(cluster_counts(len(own), n_boot, seed, clusters))
    n = int((~np.isnan(own)).sum())
    return {"self_preference": interval(point_own[0] - point_rest[0], reps_own - reps_rest, n, n_boot, seed, unit),
            "own_family_gap": interval(point_own[0], reps_own, n, n_boot, seed, unit),
            "other_contestants_gap": interval(point_rest[0], reps_rest, int((~np.isnan(rest)).sum()), n_boot,
                                              seed, unit)}


# --- length ------------------------------------------------------------------------------------------

def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r per row, x and y given per row (or shared), each item counted its weight."""
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (weights * x).sum(axis=1, keepdims=True) / total, (weights * y).sum(axis=1, keepdims=True) / total
        dx, dy = x - mx, y - my
        return (weights * dx * dy).sum(axis=1) / np.sqrt((weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1))


def weighted_slope(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The least-squares slope of y on x per row of weights."""
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (weights * x).sum(axis=1, keepdims=True) / total, (weights * y).sum(axis=1, keepdims=True) / total
        return (weights * (x - mx) * (y - my)).sum(axis=1) / (weights * (x - mx) ** 2).sum(axis=1)


def length_bias(scores: Any, lengths: Any, *, n_boot: int, seed: int, clusters: Sequence[Any] | None = None,
                unit: str = "item") -> dict[str, Interval]:
    """Spearman's rho between a judge's scores and the responses' lengths in characters, and
    the slope of score on log(length), each with an interval. ``clusters`` labels each score
    (pooled over models: the item's cluster, so one draw carries every model's answer to it)."""
    s, n_chars = np.asarray(scores, dtype=float), np.asarray(lengths, dtype=float)
    keep = ~np.isnan(s) & (n_chars > 0)
    s, log_len = s[keep], np.log(n_chars[keep])
    labels = None if clusters is None else [c for c, k in zip(clusters, keep) if k]
    rs = cluster_counts(len(s), n_boot, seed, labels)
    ones = np.ones((1, len(s)))
    blocks = np.array_split(np.arange(n_boot), max(1, n_boot * len(s) // BLOCK_CELLS))

    def over_blocks(fn: Any) -> np.ndarray:   # item weights a block of replicates at a time
        return np.concatenate([fn(rs.item_weights(rows)) for rows in blocks])

    def rho(w: np.ndarray) -> np.ndarray:
        return weighted_pearson(weighted_ranks(s, w), weighted_ranks(log_len, w), w)

    def slope(w: np.ndarray) -> np.ndarray:
        return weighted_slope(log_len, s, w)
    enough = len(s) > 2
    # on the data itself the ranks are the plain ones, every item counted once
    point_rho = weighted_pearson(average_ranks(s), average_ranks(log_len), ones)[0] if enough else np.nan
    return {"spearman_rho": interval(point_rho, over_blocks(rho), len(s), n_boot, seed, unit),
            "slope_per_log_char": interval(slope(ones)[0] if enough else np.nan, over_blocks(slope), len(s), n_boot,
                                           seed, unit)}
