"""Paired differences of declared metrics between two runs of one benchmark.

For two runs' :class:`~evalnb.core.types.ItemResults` and a declared :class:`Metric`, the
difference ``metric(a) - metric(b)`` on the items both runs hold, with its seeded percentile
bootstrap interval: each replicate draws the items once (within strata) and evaluates the
metric on both runs' scores and channels at those items, so the pairing is kept, and a ratio
metric's difference is a difference of ratios, not a mean of per-item differences. This is
the primitive a per-metric comparison reads (compare's tables, the statistics' pairwise
verdicts); it holds no opinion about significance.

Both runs' matrices must have the same number of repeats to be resampled together; when
they differ, each item's mean over its repeats stands for it (one row each).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evalnb.core import stats
from evalnb.core.types import ItemResults, Metric


def _columns(results: ItemResults, ids: Sequence[str], rows: int | None) -> dict[str, np.ndarray]:
    """The scores (under "") and every channel at ``ids``, as repeats x items (or item means)."""
    where = [results.ids.index(i) for i in ids]
    layers = {"": results.values, **results.channels}
    out = {}
    for name, layer in layers.items():
        matrix = np.asarray(layer, dtype=float).reshape(-1, len(results.ids))[:, where]
        if rows is None:   # each item's mean over its repeats (NaN when it has none)
            present = ~np.isnan(matrix)
            count = present.sum(axis=0, keepdims=True)
            total = np.where(present, matrix, 0.0).sum(axis=0, keepdims=True)
            matrix = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        out[name] = matrix
    return out


def _difference(metric: Metric) -> Any:
    def diff_fn(values: np.ndarray, strata: Any, **layers: np.ndarray) -> np.ndarray:
        a = metric.fn(layers["a:"], strata, **{c: layers[f"a:{c}"] for c in metric.channels})
        b = metric.fn(layers["b:"], strata, **{c: layers[f"b:{c}"] for c in metric.channels})
        return np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return diff_fn


def paired_metric_intervals(a: ItemResults, b: ItemResults, metrics: Sequence[Metric], *, n_boot: int = stats.N_BOOT,
                            seed: int = 0) -> tuple[list[str], dict[str, stats.Interval]]:
    """The items both runs hold, and for each metric (those with ``interval``; a count has no
    paired difference) ``metric(a) - metric(b)`` on them with its paired bootstrap interval."""
    common = [i for i in a.ids if i in set(b.ids)]
    rows = a.repeats if a.repeats == b.repeats else None
    layers = {f"a:{k}": v for k, v in _columns(a, common, rows).items()}
    layers |= {f"b:{k}": v for k, v in _columns(b, common, rows).items()}
    chosen = [m for m in metrics if m.interval]
    diffs = {m.name: _difference(m) for m in chosen}
    reads = {m.name: tuple(layers) for m in chosen}
    out = stats.interval_estimates(layers["a:"], diffs, strata=[a.strata.get(i, "") for i in common], n_boot=n_boot,
                                   seed=seed, channels=layers, reads=reads)
    return common, out
