"""The statistics every benchmark reuses: one seeded, stratified bootstrap over a matrix of
item scores that gives an interval for any declared metric (in the spirit of rliable's
``get_interval_estimates``), paired differences, and spread across repeats.

The matrix is repeats x items (NaN where an item has no score of its own). One replicate:

1. for each stratum, in sorted label order, draw ``n_s`` of its columns with replacement
   (``rng.integers(0, n_s, size=(rows, n_s))``) and put them in that stratum's positions,
   so every column stays in its stratum (e.g. within K);
2. when there is more than one repeat, draw for every drawn column ``repeats`` of its rows
   with replacement (``rng.integers(0, repeats, size=(rows, repeats, items))``): repeats are
   resampled within their item, not averaged away first (GeoKTools' and GeoExpertQueries'
   protocols). With ``resample_repeats=False`` (a benchmark's ``RESAMPLE_REPEATS = False``:
   WildTrace's contestant repeats) this step is skipped: a drawn item brings all its answers,
   the bootstrap of item means Miller recommends (resampling the repeats again would add their
   variance a second time: 1.19 times as wide at K = 3 in a seeded simulation);
3. every metric is computed on the replicate.

Replicates are drawn by the one resampler, :func:`evalnb.stats.resample.index_draws`, in
blocks of ``rows`` (all ``n_boot`` at once for matrices up to two million cells) from numpy's
PCG64 generator seeded with ``seed``, so the same seed gives the same intervals on every run
and machine. The interval is the 95 % percentile interval of the replicates
(``n_boot = 10000``, seed 0 by default), as the protocols specify; replicates where a metric
is undefined (no item scored) are left out. With one repeat and
one stratum, step 1 is the plain bootstrap of the mean over items.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalnb.core.types import ChannelMetricFn, Metric, MetricFn
from evalnb.stats import resample

N_BOOT = 10_000
CONFIDENCE = 0.95
METHOD = "percentile bootstrap: items resampled within strata, repeats within items"
METHOD_WHOLE_ITEMS = "percentile bootstrap: items resampled within strata with all their repeats"


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None
    mean: float | None          # the metric's value on the data itself
    n: int                      # items
    n_boot: int
    seed: int
    confidence: float = CONFIDENCE
    method: str = METHOD
    repeats: int = 1
    strata: int = 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def strata_columns(strata: Sequence[str] | None, n: int) -> dict[str, np.ndarray]:
    """Stratum label -> the indices of its columns, labels sorted (one stratum "" by default)."""
    labels = np.asarray(list(strata) if strata is not None else [""] * n, dtype=object)
    if len(labels) != n:
        raise ValueError(f"{len(labels)} stratum labels for {n} items")
    return {label: np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()))}


def _draws(repeats: int, n: int, groups: Mapping[str, np.ndarray], n_boot: int, seed: int,
           resample_repeats: bool = True) -> Any:
    """The blocks of draws (:mod:`evalnb.stats.resample`) every matrix of this shape and strata
    is resampled by: the same seed, the same replicates."""
    whole = not resample_repeats and repeats > 1   # whole items: every drawn column keeps all its rows
    return resample.index_draws(resample.generator(seed), n_boot, list(groups.values()), n,
                                repeats=1 if whole else repeats, cells_per_replicate=repeats * n)


def _gather(stack: np.ndarray, draw: resample.IndexDraw, resample_repeats: bool = True) -> np.ndarray:
    """One block of resampled matrices, shape (layers, rows, repeats, items): the score matrix and
    each channel (``stack``'s layers) resampled by the same draw."""
    if not resample_repeats and stack.shape[1] > 1:
        return stack[:, :, draw.columns].transpose(0, 2, 1, 3)
    if draw.repeat_rows is None:
        return stack[:, 0][:, draw.columns][:, :, None, :]
    return stack[:, draw.repeat_rows, draw.columns[:, None, :]]


def _channel_stack(matrix: np.ndarray, channels: Mapping[str, Any] | None) -> tuple[np.ndarray, dict[str, int]]:
    """``matrix`` with every channel stacked under it (same shape), and each channel's layer."""
    named = dict(channels or {})
    layers = [matrix]
    for name, value in named.items():
        layer = np.asarray(value, dtype=float)
        layer = layer[None, :] if layer.ndim == 1 else layer
        if layer.shape != matrix.shape:
            raise ValueError(f"channel {name!r}: shape {layer.shape}, expected {matrix.shape} like the scores")
        layers.append(layer)
    return np.stack(layers), {name: i for i, name in enumerate(named, start=1)}


def _call(fn: Any, sample: np.ndarray, groups: Mapping[str, np.ndarray], reads: Sequence[str],
          layer: Mapping[str, int]) -> Any:
    """``fn`` on one (stacked) sample: the scores, the strata, and the channels it reads by name."""
    return fn(sample[0], groups, **{name: sample[layer[name]] for name in reads})


def interval_estimates(values: Any, metrics: Mapping[str, MetricFn | ChannelMetricFn], *,
                       strata: Sequence[str] | None = None, n_boot: int = N_BOOT, seed: int = 0,
                       confidence: float = CONFIDENCE, channels: Mapping[str, Any] | None = None,
                       reads: Mapping[str, Sequence[str]] | None = None,
                       resample_repeats: bool = True) -> dict[str, Interval]:
    """For each metric, its value on ``values`` (repeats x items, or one row of items) and its
    percentile bootstrap interval, all metrics from the same replicates (see the module doc).
    ``channels`` (name -> a matrix shaped like ``values``) are resampled with it, and a metric
    gets those ``reads`` names for it as keyword arguments. ``resample_repeats``: step 2."""
    return interval_estimates_many([(values, channels)], metrics, strata=strata, n_boot=n_boot, seed=seed,
                                   confidence=confidence, reads=reads, resample_repeats=resample_repeats)[0]


def interval_estimates_many(subjects: Sequence[tuple[Any, Mapping[str, Any] | None]],
                            metrics: Mapping[str, MetricFn | ChannelMetricFn], *, strata: Sequence[str] | None = None,
                            n_boot: int = N_BOOT, seed: int = 0, confidence: float = CONFIDENCE,
                            reads: Mapping[str, Sequence[str]] | None = None,
                            resample_repeats: bool = True) -> list[dict[str, Interval]]:
    """:func:`interval_estimates` of several matrices (``(values, channels)``: the runs of a
    comparison, on one task set) that share their shape and strata, each exactly as alone: the
    same seed draws the same replicates for each, so they are drawn once and every matrix is
    resampled by them (drawing is most of the bootstrap's time). Matrices of other shapes are
    done one by one."""
    if not metrics:
        return [{} for _ in subjects]
    matrices = [np.asarray(values, dtype=float) for values, _ in subjects]
    matrices = [m[None, :] if m.ndim == 1 else m for m in matrices]
    if len({m.shape for m in matrices}) > 1:
        return [interval_estimates_many([subject], metrics, strata=strata, n_boot=n_boot, seed=seed,
                                        confidence=confidence, reads=reads, resample_repeats=resample_repeats)[0]
                for subject in subjects]
    matrix = matrices[0]
    repeats, n = matrix.shape if matrix.size else (max(1, matrix.shape[0]), 0)
    if n == 0:
        return [{name: Interval(None, None, None, 0, n_boot, seed, confidence, repeats=repeats, strata=0)
                 for name in metrics} for _ in subjects]
    groups = strata_columns(strata, n)
    stacks = [_channel_stack(m, channels) for m, (_, channels) in zip(matrices, subjects)]
    reads = reads or {}
    draws: list[dict[str, list[np.ndarray]]] = [{name: [] for name in metrics} for _ in subjects]
    with np.errstate(invalid="ignore", divide="ignore"):
        for draw in _draws(repeats, n, groups, n_boot, seed, resample_repeats):
            for (stack, layer), found in zip(stacks, draws):
                sample = _gather(stack, draw, resample_repeats)
                for name, fn in metrics.items():
                    value = _call(fn, sample, groups, reads.get(name, ()), layer)
                    found[name].append(np.asarray(value, dtype=float).reshape(sample.shape[1]))
        points = [{name: _number(_call(fn, stack, groups, reads.get(name, ()), layer)) for name, fn in metrics.items()}
                  for stack, layer in stacks]
    alpha = (1 - confidence) / 2
    method = METHOD if resample_repeats or repeats == 1 else METHOD_WHOLE_ITEMS
    out = []
    for found, point in zip(draws, points):
        intervals = {}
        for name in metrics:
            reps = np.concatenate(found[name])
            reps = reps[np.isfinite(reps)]
            low, high = (np.quantile(reps, [alpha, 1 - alpha]) if len(reps) else (math.nan, math.nan))
            intervals[name] = Interval(_number(low), _number(high), point[name], n, n_boot, seed, confidence,
                                       method=method, repeats=repeats, strata=len(groups))
        out.append(intervals)
    return out


def check_channels(metrics: Sequence[Metric], channels: Mapping[str, Any] | None) -> None:
    """ValueError naming a metric that reads a channel the results do not have."""
    for metric in metrics:
        if missing := [c for c in metric.channels if c not in (channels or {})]:
            raise ValueError(f"metric {metric.name!r} reads channel(s) {', '.join(missing)}, which the results do "
                             f"not have ({', '.join(channels or {}) or 'none'})")


def metric_value(metric: Metric, values: Any, strata: Sequence[str] | None = None,
                 channels: Mapping[str, Any] | None = None) -> float | None:
    """The value of a declared metric on ``values`` (repeats x items, or one row of items): its
    function called with the strata and, by keyword, the channels it declares (``Metric.channels``,
    taken from ``channels``: the run's ``ItemResults.channels``, each shaped like ``values``), as
    the bootstrap calls it on every replicate; None where it is undefined (no item counted).
    Every view that recomputes a declared metric outside the bootstrap calls this."""
    check_channels([metric], channels)
    matrix = np.asarray(values, dtype=float)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    groups = strata_columns(strata, matrix.shape[-1])
    stack, layer = _channel_stack(matrix, {name: (channels or {})[name] for name in metric.channels})
    with np.errstate(invalid="ignore", divide="ignore"):
        return _number(_call(metric.fn, stack, groups, metric.channels, layer))


def metric_intervals(values: Any, metrics: Sequence[Metric], *, strata: Sequence[str] | None = None,
                     n_boot: int = N_BOOT, seed: int = 0, confidence: float = CONFIDENCE,
                     channels: Mapping[str, Any] | None = None, resample_repeats: bool = True) -> dict[str, Interval]:
    """:func:`interval_estimates` for declared metrics (those with ``interval``); the others get
    their value only (:func:`metric_value`). ``channels``: the run's per-item channels
    (``ItemResults.channels``), of which each metric reads those it declares."""
    return metric_intervals_many([(values, channels)], metrics, strata=strata, n_boot=n_boot, seed=seed,
                                 confidence=confidence, resample_repeats=resample_repeats)[0]


def metric_intervals_many(subjects: Sequence[tuple[Any, Mapping[str, Any] | None]], metrics: Sequence[Metric], *,
                          strata: Sequence[str] | None = None, n_boot: int = N_BOOT, seed: int = 0,
                          confidence: float = CONFIDENCE, resample_repeats: bool = True) -> list[dict[str, Interval]]:
    """:func:`metric_intervals` of several runs on one task set (``(values, channels)`` each),
    their replicates drawn once (:func:`interval_estimates_many`): each run's intervals are
    exactly those it gets alone."""
    subjects = [(values, channels or {}) for values, channels in subjects]
    for _, channels in subjects:
        check_channels(metrics, channels)
    with_ci = {m.name: m.fn for m in metrics if m.interval}
    reads = {m.name: m.channels for m in metrics}
    out = interval_estimates_many(subjects, with_ci, strata=strata, n_boot=n_boot, seed=seed, confidence=confidence,
                                  reads=reads, resample_repeats=resample_repeats)
    for (values, channels), found in zip(subjects, out):
        matrix = np.asarray(values, dtype=float)
        matrix = matrix[None, :] if matrix.ndim == 1 else matrix
        if matrix.size:
            _channel_stack(matrix, channels)   # every channel shaped like the scores, as the bootstrap checks
        groups = strata_columns(strata, matrix.shape[-1]) if matrix.size else {}
        for metric in metrics:
            if not metric.interval:
                value = metric_value(metric, matrix, strata, channels) if matrix.size else None
                found[metric.name] = Interval(None, None, value, matrix.shape[-1] if matrix.size else 0, 0, seed,
                                              confidence, method="no interval", repeats=len(matrix),
                                              strata=len(groups))
    return out


# --- metric building blocks: functions of (..., repeats, items) arrays, safe on empty strata ----------

def cell_mean(values: np.ndarray, columns: np.ndarray | None = None, *, missing: str = "exclude") -> np.ndarray:
    """Mean over repeats and items (of ``columns`` only, when given). ``missing="exclude"``
    leaves NaN cells out (NaN when none is left); ``"zero"`` counts them as 0."""
    part = values if columns is None else values[..., columns]
    if missing == "zero":
        part = np.nan_to_num(part, nan=0.0)
    present = ~np.isnan(part)
    total = np.where(present, part, 0.0).sum(axis=(-2, -1))
    count = present.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def share_present(values: np.ndarray) -> np.ndarray:
    """The share of cells that hold a score."""
    return (~np.isnan(values)).mean(axis=(-2, -1))


def macro_mean(values: np.ndarray, strata: Mapping[str, np.ndarray], *, missing: str = "exclude") -> np.ndarray:
    """The mean of the per-stratum means, over strata that have items."""
    means = [cell_mean(values, idx, missing=missing) for idx in strata.values() if len(idx)]
    if not means:
        return np.full(values.shape[:-2], np.nan)
    stacked = np.stack(means)
    present = ~np.isnan(stacked)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present.any(axis=0), np.where(present, stacked, 0.0).sum(axis=0) / present.sum(axis=0), np.nan)


# --- the plain cases ------------------------------------------------------------------------------

def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _mean_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    return cell_mean(values)


def bootstrap_ci(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0,
                 confidence: float = CONFIDENCE, strata: Sequence[str] | None = None) -> Interval:
    """Percentile interval of the mean of ``values`` (one score per item)."""
    return interval_estimates(list(values), {"mean": _mean_fn}, strata=strata, n_boot=n_boot, seed=seed,
                              confidence=confidence)["mean"]


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, n_boot: int = N_BOOT,
                        seed: int = 0, confidence: float = CONFIDENCE,
                        strata: Sequence[str] | None = None) -> Interval:
    """Interval of mean(a - b) over paired items, resampling items (not models)."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    return bootstrap_ci([x - y for x, y in zip(a, b)], n_boot=n_boot, seed=seed, confidence=confidence,
                        strata=strata)


def per_repeat(metric: Metric, values: Any, strata: Sequence[str] | None = None,
               channels: Mapping[str, Any] | None = None) -> list[float | None]:
    """The metric on each repeat's row alone (:func:`metric_value` on the row and its channels' rows)."""
    matrix = np.asarray(values, dtype=float)
    stack, layer = _channel_stack(matrix, channels)
    return [metric_value(metric, stack[0, r:r + 1], strata, {name: stack[i, r:r + 1] for name, i in layer.items()})
            for r in range(matrix.shape[0])]


def mean_sd(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean and sample standard deviation (n - 1) across repeats; null entries are skipped."""
    present = [v for v in values if v is not None]
    if not present:
        return {"mean": None, "sd": None, "n": 0}
    sd = float(np.std(present, ddof=1)) if len(present) > 1 else None
    return {"mean": float(np.mean(present)), "sd": sd, "n": len(present)}


def is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
