"""A judge against reference labels: how far, how often and in which direction it differs.

For items that carry both the judge's score f and a reference score Y (people's, or a
reference grader's), on the benchmark's own scale:

- **bias**: mean of f − Y, with the same interval rule as the prediction-powered estimates
  (:func:`evalnb.stats.ppi.mean_of`: cluster-robust with a t(C − 1) quantile when items share
  documents); a judge that is biased for one family shows it when this is computed per model;
- **mean absolute difference**, **Pearson's r** and **Spearman's ρ** (scipy's definitions);
- **Krippendorff's α** between the judge and the reference as two raters, interval level
  (:func:`evalnb.stats.reliability.krippendorff_alpha`, checked against the ``krippendorff``
  package in the tests);
- for ordinal scales (a 0/1/2 rating), the **confusion matrix** (rows: reference, columns:
  judge) and **Cohen's κ with quadratic weights**,
  κ_w = 1 − Σ w_ij O_ij / Σ w_ij E_ij, w_ij = (i − j)² / (k − 1)², E the product of the margins
  (the same as scikit-learn's ``cohen_kappa_score(weights="quadratic")``);
- where the reference has several raters, their own α (:func:`raters_alpha`): the ceiling a
  judge can be expected to reach.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from evalnb.stats.ppi import MeanEstimate, mean_of
from evalnb.stats.reliability import krippendorff_alpha


@dataclass(frozen=True)
class Agreement:
    """One judge (or the panel, or the protocol's score) against the reference."""

    n: int
    bias: MeanEstimate
    mean_abs_diff: float | None
    pearson_r: float | None
    spearman_rho: float | None
    alpha: float | None
    levels: tuple[float, ...] = ()
    confusion: tuple[tuple[int, ...], ...] = ()   # rows: reference level, columns: judge level
    kappa_quadratic: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "bias": self.bias.value, "bias_ci_low": self.bias.ci_low,
                "bias_ci_high": self.bias.ci_high, "n_clusters": self.bias.n_clusters,
                "mean_abs_diff": self.mean_abs_diff, "pearson_r": self.pearson_r,
                "spearman_rho": self.spearman_rho, "alpha": self.alpha,
                "kappa_quadratic": self.kappa_quadratic}


def _finite(value: Any) -> float | None:
    v = float(value)
    return v if math.isfinite(v) else None


def _correlation(fn: Any, a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None   # undefined without variation in both
    return _finite(fn(a, b)[0])


def confusion(reference: np.ndarray, judge: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """Counts of (reference level, judge level); a score off ``levels`` is an error."""
    index = {float(level): i for i, level in enumerate(levels)}
    off = sorted({float(v) for v in (*reference, *judge)} - set(index))
    if off:
        raise ValueError(f"scores {off} are not among the scale's levels {list(levels)}")
    table = np.zeros((len(levels), len(levels)), dtype=int)
    np.add.at(table, ([index[float(v)] for v in reference], [index[float(v)] for v in judge]), 1)
    return table


def kappa_quadratic(table: np.ndarray) -> float | None:
    """Cohen's κ with quadratic weights from a confusion matrix; None when undefined."""
    k = len(table)
    total = table.sum()
    if k < 2 or total == 0:
        return None
    i, j = np.indices((k, k))
    weights = (i - j) ** 2 / (k - 1) ** 2
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / total
    denominator = float((weights * expected).sum())
    return None if denominator == 0 else 1 - float((weights * table).sum()) / denominator


def agreement(judge: Any, reference: Any, *, clusters: Sequence[Any] | None = None,
              levels: Sequence[float] | None = None) -> Agreement:
    """The judge's agreement with the reference over the items that have both (NaN: none)."""
    f = np.asarray(judge, dtype=float)
    y = np.asarray(reference, dtype=float)
    both = np.isfinite(f) & np.isfinite(y)
    f, y = f[both], y[both]
    units = None if clusters is None else [c for c, keep in zip(clusters, both) if keep]
    diff = f - y
    bias = mean_of(diff, clusters=units, method="bias", n_labelled=len(diff))
    table = confusion(y, f, levels) if levels else np.zeros((0, 0), dtype=int)
    return Agreement(
        n=len(diff), bias=bias,
        mean_abs_diff=float(np.abs(diff).mean()) if len(diff) else None,
        pearson_r=_correlation(sps.pearsonr, f, y), spearman_rho=_correlation(sps.spearmanr, f, y),
        alpha=krippendorff_alpha(np.column_stack([y, f])) if len(diff) else None,
        levels=tuple(float(v) for v in levels or ()), confusion=tuple(tuple(int(c) for c in row) for row in table),
        kappa_quadratic=kappa_quadratic(table) if levels else None)


def raters_alpha(matrix: Any) -> float | None:
    """Krippendorff's α among the reference's own raters (items × raters, NaN where a rater
    gave no label): the agreement a judge can be expected to reach at best."""
    return krippendorff_alpha(np.asarray(matrix, dtype=float))
