"""How many items an estimate rests on: the ``n`` every table shows beside it.

A bootstrap interval resamples every item of the run (``ci.n``), but a metric may read only
some of them: a mean over the items that have a score (``missing="exclude"``) reads those
(10 of 12, say), a per-stratum mean reads its stratum only, while a mean counting an unscored
item as 0 reads all 12. Printing 12 beside the first told a reader its mean was over 12 items.

A metric with a ratio form (:mod:`evalnb.stats.clustered`) declares the items it reads. Any
other metric is a function of the repeats x items matrix, so which items it reads is found by
asking it: an item counts when leaving it out changes the metric's value, on a copy of the
matrix whose present cells hold distinct seeded random numbers (NaN cells stay NaN, so an
item without a score of its own counts only where the metric counts it, as a mean with
``missing="zero"`` does). A mean excluding missing cells is unchanged when a NaN item leaves;
one counting them as 0 is not; a stratum's mean is unchanged when another stratum's item
leaves. Equal values by chance have probability zero with random cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evalnb.stats import intervals as stats
from evalnb.stats.clustered import form_of
from evalnb.core.types import Metric


def items_read(values: Any, metric: Metric, strata: Sequence[str] | None = None,
               channels: Mapping[str, Any] | None = None) -> int:
    """How many items (columns of ``values``) ``metric`` reads (see the module); the named
    channels a metric reads (``Metric.channels``) are probed the same way."""
    matrix = np.asarray(values, dtype=float)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    n = matrix.shape[-1] if matrix.size else 0
    if n == 0:
        return 0
    labels = list(strata) if strata is not None else [""] * n
    # A metric with a ratio form (every mean, share and stratum mean) says which items it reads:
    # one pass. Probing by leaving items out cannot see a share of scored cells, whose value
    # depends only on which cells are missing (it would read none on a run with none missing).
    form = form_of(metric.fn, matrix, stats.strata_columns(labels, n), channels)
    if form is not None:
        return int(form.used().sum())
    rng = np.random.default_rng(0)

    def probed(cells: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(cells), np.nan, rng.uniform(0.1, 0.9, cells.shape))
    probe = probed(matrix)
    named = {name: probed(np.broadcast_to(np.asarray((channels or {})[name], dtype=float), matrix.shape))
             for name in metric.channels}

    def value(columns: np.ndarray) -> float | None:   # None: undefined on these columns
        return stats.metric_value(metric, probe[:, columns], [labels[i] for i in columns],
                                  {name: cells[:, columns] for name, cells in named.items()})

    everything = value(np.arange(n))
    return sum(1 for j in range(n) if value(np.delete(np.arange(n), j)) != everything)
