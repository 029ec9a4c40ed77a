"""Metric combinators: each returns a metric function ``(values, strata) -> array`` over a
(..., repeats, items) matrix, which :mod:`evalnb.core.stats` evaluates on the data and on
every bootstrap replicate (in the spirit of rliable's ``metrics.py`` and inspect's
``grouped``). A benchmark declares its metrics with these instead of writing adapters:

    Metric("all_tasks", "...", mean(missing="zero"))
    Metric("K=1", "...", stratum_mean("K=1"))
    Metric("macro_over_k", "...", macro_mean())

NaN cells are items without a score of their own; ``missing`` says whether a mean leaves
them out (``"exclude"``) or counts them as 0 (``"zero"``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evalnb.core import stats
from evalnb.core.types import MetricFn


def mean(*, missing: str = "exclude") -> MetricFn:
    """The mean over every repeat and item."""
    def mean_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.cell_mean(values, missing=missing)
    return mean_fn


def stratum_mean(label: str, *, missing: str = "exclude") -> MetricFn:
    """The mean over the items of one stratum (NaN when it has none)."""
    def stratum_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        columns = strata.get(label)
        if columns is None or not len(columns):
            return np.full(values.shape[:-2], np.nan)
        return stats.cell_mean(values, columns, missing=missing)
    return stratum_fn


def macro_mean(*, missing: str = "exclude") -> MetricFn:
    """The mean of the per-stratum means, over the strata that have items."""
    def macro_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.macro_mean(values, strata, missing=missing)
    return macro_fn


def share_scored() -> MetricFn:
    """The share of cells that hold a score."""
    def share_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.share_present(values)
    return share_fn


def count_scored() -> MetricFn:
    """How many cells hold a score (a count: shown without an interval)."""
    def count_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return (~np.isnan(values)).sum(axis=(-2, -1)).astype(float)
    return count_fn
