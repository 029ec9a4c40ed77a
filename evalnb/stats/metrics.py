"""Metric combinators: each returns a metric function ``(values, strata) -> array`` over a
(..., repeats, items) matrix, which :mod:`evalnb.stats.intervals` evaluates on the data and on
every bootstrap replicate (in the spirit of rliable's ``metrics.py`` and inspect's
``grouped``). A benchmark declares its metrics with these instead of writing adapters:

    Metric("all_tasks", "...", mean(missing="zero"))
    Metric("K=1", "...", stratum_mean("K=1"))
    Metric("macro_over_k", "...", macro_mean())

NaN cells are items without a score of their own; ``missing`` says whether a mean leaves
them out (``"exclude"``) or counts them as 0 (``"zero"``).

Each mean also carries its ``ratio_form`` (:class:`evalnb.stats.clustered.RatioForm`): the same
number as sums of per-item numerators and denominators, from which its standard errors, clustered
standard error and cluster bootstrap are computed (a count has none).

A metric over named per-item channels (``correct``, ``attempted``) declares the channels it
reads, and says what it is (``channel_ratio``; :func:`evalnb.stats.clustered.channel_form` gives
its form):

    Metric("correct_given_attempted", "...", ratio("correct", "attempted"),
           channels=("correct", "attempted"))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from evalnb.stats import intervals as stats
from evalnb.stats.clustered import RatioForm, cells
from evalnb.core.types import ChannelMetricFn, MetricFn


def _with_form(fn: MetricFn, form: Callable[[np.ndarray, Mapping[str, np.ndarray]], RatioForm]) -> MetricFn:
    fn.ratio_form = form   # type: ignore[attr-defined]  # read by evalnb.stats.clustered.form_of
    return fn


def mean(*, missing: str = "exclude") -> MetricFn:
    """The mean over every repeat and item."""
    def mean_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.cell_mean(values, missing=missing)
    return _with_form(mean_fn, lambda values, strata: RatioForm((cells(values, missing=missing),), values.shape[-1]))


def item_mean() -> MetricFn:
    """The mean over items (with a score) of each item's mean over its scored repeats: the unit
    is the item whatever its number of scored repeats (Miller 2024 §4). With one repeat it is
    exactly ``mean(missing="exclude")``, computed the same way."""
    def item_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        if values.shape[-2] == 1:
            return stats.cell_mean(values, missing="exclude")
        return stats.cell_mean(_repeat_means(values)[..., None, :], missing="exclude")

    def form(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> RatioForm:
        if values.shape[-2] == 1:
            return RatioForm((cells(values),), values.shape[-1])
        means = _repeat_means(values)
        present = ~np.isnan(means)
        return RatioForm(((np.where(present, means, 0.0), present.astype(float)),), values.shape[-1])
    return _with_form(item_fn, form)


def _repeat_means(values: np.ndarray) -> np.ndarray:
    """Each item's mean over its scored repeats (NaN for an item with none)."""
    present = ~np.isnan(values)
    count = present.sum(axis=-2)
    total = np.where(present, values, 0.0).sum(axis=-2)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def stratum_mean(label: str, *, missing: str = "exclude") -> MetricFn:
    """The mean over the items of one stratum (NaN when it has none)."""
    def stratum_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        columns = strata.get(label)
        if columns is None or not len(columns):
            return np.full(values.shape[:-2], np.nan)
        return stats.cell_mean(values, columns, missing=missing)

    def form(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> RatioForm:
        columns = strata.get(label)
        return RatioForm((cells(values, columns, missing=missing),) if columns is not None and len(columns) else (),
                         values.shape[-1])
    return _with_form(stratum_fn, form)


def macro_mean(*, missing: str = "exclude") -> MetricFn:
    """The mean of the per-stratum means, over the strata that have items."""
    def macro_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.macro_mean(values, strata, missing=missing)

    def form(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> RatioForm:
        return RatioForm(tuple(cells(values, idx, missing=missing) for idx in strata.values() if len(idx)),
                         values.shape[-1])
    return _with_form(macro_fn, form)


def share_scored() -> MetricFn:
    """The share of cells that hold a score."""
    def share_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return stats.share_present(values)

    def form(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> RatioForm:
        present = (~np.isnan(values)).sum(axis=0).astype(float)
        return RatioForm(((present, np.full(values.shape[-1], float(values.shape[0]))),), values.shape[-1])
    return _with_form(share_fn, form)


def count_scored() -> MetricFn:
    """How many cells hold a score (a count: shown without an interval)."""
    def count_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return (~np.isnan(values)).sum(axis=(-2, -1)).astype(float)
    return count_fn


def count_items_scored() -> MetricFn:
    """How many items hold a score in at least one repeat (a count; with one repeat the same
    number as :func:`count_scored`)."""
    def count_fn(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
        return (~np.isnan(values)).any(axis=-2).sum(axis=-1).astype(float)
    return count_fn


# --- metrics over named per-item channels (Metric.channels; ItemResults.channels) -------------------

def channel_mean(channel: str, *, missing: str = "exclude") -> ChannelMetricFn:
    """The mean of one channel over every repeat and item: declare it with
    ``Metric(..., channel_mean("correct"), channels=("correct",))``."""
    def channel_mean_fn(values: np.ndarray, strata: Mapping[str, np.ndarray], **channels: np.ndarray) -> np.ndarray:
        return stats.cell_mean(channels[channel], missing=missing)
    channel_mean_fn.channel_ratio = (channel, None)   # type: ignore[attr-defined]  # see ratio()
    return channel_mean_fn


def ratio(numerator: str, denominator: str) -> ChannelMetricFn:
    """sum(numerator) / sum(denominator) over every repeat and item (cells where either is NaN
    left out; NaN when the denominator sums to 0): e.g. correct given attempted,
    ``Metric(..., ratio("correct", "attempted"), channels=("correct", "attempted"))``. A ratio
    of sums, not a mean of per-item ratios, and resampled as one: its interval comes from the
    same bootstrap replicates as every other metric."""
    def ratio_fn(values: np.ndarray, strata: Mapping[str, np.ndarray], **channels: np.ndarray) -> np.ndarray:
        top, bottom = channels[numerator], channels[denominator]
        present = ~(np.isnan(top) | np.isnan(bottom))
        total = np.where(present, top, 0.0).sum(axis=(-2, -1))
        base = np.where(present, bottom, 0.0).sum(axis=(-2, -1))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(base > 0, total / np.where(base > 0, base, 1.0), np.nan)
    # What the function is, for a reader that needs its form rather than its value (a standard
    # error, a clustered design): sum(numerator cells) / sum(denominator cells); a channel mean
    # says (channel, None): its present cells over their count.
    ratio_fn.channel_ratio = (numerator, denominator)   # type: ignore[attr-defined]
    return ratio_fn
