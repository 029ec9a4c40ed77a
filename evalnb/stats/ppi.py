"""Prediction-powered estimates of a mean: the judge's score on every item, corrected by
reference labels on a few.

Every item i of a run has the protocol's (judge's) score f_i; a subset L of them also has a
reference score Y_i (people, or a reference grader). The estimand is the mean of Y over the
benchmark's items. Three estimates, side by side:

- **judge only**: mean of f over all items. Its interval is valid for the judge's mean, not for
  Y's: the judge's bias is in it.
- **labels only**: mean of Y over the labelled items (λ = 0 below): unbiased, but rests on n.
- **PPI++** (Angelopoulos, Duchi & Zrnic 2023, "PPI++: efficient prediction-powered inference"):
  within each labelling stratum h, with L_h its labelled items and U_h the rest,

      θ_h = λ_h · mean_{U_h}(f) + mean_{L_h}(Y − λ_h f),      θ = Σ_h W_h θ_h,  W_h = N_h / N,

  unbiased for any λ whatever the judge's bias (the labelled items measure it). The tuned
  λ_h = Cov_L(Y, f) / ((1 + n_h/|U_h|) · Var_{L∪U}(f)) minimises the variance (clipped to
  [0, 1], so it is never worse than the labels alone in large samples); λ = 1 is the original
  PPI (Angelopoulos et al., Science 2023). With one stratum this is exactly ``ppi_py``'s
  ``ppi_mean_pointestimate`` / ``ppi_mean_ci`` (checked in the tests to 1e-6). Strata are the
  stratified labelling design of Fisch et al. 2024 ("Stratified prediction-powered inference
  for hybrid language model evaluation"): labels drawn at random within each stratum, at rates
  that may differ; the weights W_h undo the unequal rates.

**Variance.** Each estimate is linear in per-item influences ψ_i (for i in L_h:
W_h (Y_i − λ_h f_i − m_{L_h}) / n_h; for i in U_h: W_h λ_h (f_i − m_{U_h}) / |U_h|), so its
variance is the sum of their squares without clusters, which is ``ppi_py``'s (population
standard deviations, normal quantile). With clusters (items about one document) labelled and
unlabelled items of a cluster move together, and the variance is the cluster-robust
C/(C − 1) · Σ_c (Ψ_c − Ψ̄)², Ψ_c the sum of ψ over cluster c, with a t(C − 1) quantile: the
small-sample form whose coverage the seeded simulation in tests/test_ppi.py checks. λ is tuned
as without clusters (a choice of efficiency, not of validity). A difference of two models'
estimates is the same sum over ψ_A − ψ_B on shared clusters (:func:`difference`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
PPI = "PPI++"
LABELS_ONLY = "labels only"
JUDGE_ONLY = "judge only"


@dataclass(frozen=True)
class MeanEstimate:
    """One estimate of the reference mean, with its interval and what it rests on."""

    method: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n_items: int
    n_labelled: int
    n_clusters: int | None          # None: every item its own cluster
    lam: tuple[float, ...] = ()     # λ per labelling stratum (PPI++ only)
    influence: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "se": self.se, "n": self.n_items, "n_labelled": self.n_labelled, "n_clusters": self.n_clusters,
                "lambda": list(self.lam) or None}


def _codes(labels: Sequence[Any] | None, n: int) -> np.ndarray:
    if labels is None:
        return np.arange(n)
    if len(labels) != n:
        raise ValueError(f"{len(labels)} labels for {n} items")
    return np.unique(np.asarray([str(x) for x in labels]), return_inverse=True)[1]


def _spread(influence: np.ndarray, clusters: Sequence[Any] | None, confidence: float,
            used: np.ndarray | None = None) -> tuple[float | None, int | None, float]:
    """(standard error, clusters, quantile) of a statistic with item influences (module doc).
    ``used``: the items the statistic reads; a cluster holding none of them is not counted
    (the labels alone do not rest on a document none of whose items is labelled)."""
    if clusters is None:
        return math.sqrt(float((influence ** 2).sum())), None, float(sps.norm.ppf(0.5 + confidence / 2))
    codes = _codes(clusters, len(influence))
    totals = np.bincount(codes, weights=influence)
    if used is not None:
        totals = totals[np.bincount(codes, weights=used.astype(float), minlength=len(totals)) > 0]
    c = len(totals)
    if c < 2:   # one cluster says nothing about the spread between clusters
        return None, c, math.nan
    variance = c / (c - 1) * float(((totals - totals.mean()) ** 2).sum())
    return math.sqrt(variance), c, float(sps.t.ppf(0.5 + confidence / 2, c - 1))


def _estimate(method: str, value: float, influence: np.ndarray, n_labelled: int, clusters: Sequence[Any] | None,
              lam: tuple[float, ...] = (), confidence: float = CONFIDENCE,
              used: np.ndarray | None = None) -> MeanEstimate:
    se, c, q = _spread(influence, clusters, confidence, used)
    low, high = (value - q * se, value + q * se) if se is not None else (None, None)
    return MeanEstimate(method, value, low, high, se, len(influence), n_labelled, c, lam, influence)


def tuned_lambda(y: np.ndarray, f_labelled: np.ndarray, f_unlabelled: np.ndarray) -> float:
    """The variance-minimising λ of PPI++ for a mean, clipped to [0, 1] (``ppi_py``'s rule)."""
    n, big_n = len(y), len(f_unlabelled)
    if n < 2 or big_n < 1:
        return 0.0
    cov = float(((y - y.mean()) * (f_labelled - f_labelled.mean())).mean())
    var = float(np.var(np.concatenate([f_labelled, f_unlabelled]), ddof=1))
    if var <= 0:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def _checked(judge: Any, reference: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f = np.asarray(judge, dtype=float)
    y = np.asarray(reference, dtype=float)
    if f.shape != y.shape or f.ndim != 1:
        raise ValueError(f"judge and reference scores differ in shape: {f.shape} and {y.shape}")
    if not np.isfinite(f).all():
        raise ValueError("every item needs the judge's score (a prediction-powered estimate rests on all of them)")
    return f, y, np.isfinite(y)


def ppi_mean(judge: Any, reference: Any, *, clusters: Sequence[Any] | None = None,
             strata: Sequence[Any] | None = None, lam: float | None = None,
             confidence: float = CONFIDENCE) -> MeanEstimate:
    """The PPI++ estimate of the reference mean (module doc). ``judge``: the score of every
    item; ``reference``: the label, NaN where an item has none; ``strata``: the labelling
    strata (labels drawn at random within each); ``lam``: a fixed λ for every stratum (None:
    tuned per stratum; 0: labels only; 1: plain PPI)."""
    f, y, labelled = _checked(judge, reference)
    codes = np.zeros(len(f), dtype=int) if strata is None else _codes(strata, len(f))
    influence = np.zeros(len(f))
    used = labelled.copy()
    value, lams = 0.0, []
    for h in np.unique(codes):
        in_h = codes == h
        lab, unl = in_h & labelled, in_h & ~labelled
        n_h, u_h = int(lab.sum()), int(unl.sum())
        if n_h == 0:
            raise ValueError(f"labelling stratum {h} has no reference label: its mean cannot be estimated")
        w = in_h.sum() / len(f)
        lam_h = tuned_lambda(y[lab], f[lab], f[unl]) if lam is None else float(lam)
        if u_h == 0:
            lam_h = 0.0 if lam is None else lam_h   # every item labelled: the judge adds nothing
        rect = y[lab] - lam_h * f[lab]
        imputed = f[unl].mean() if u_h else 0.0
        value += w * (lam_h * imputed + rect.mean())
        influence[lab] = w * (rect - rect.mean()) / n_h
        if u_h:
            influence[unl] = w * lam_h * (f[unl] - imputed) / u_h
            used |= unl & (lam_h > 0)
        lams.append(lam_h)
    method = LABELS_ONLY if lam == 0 else PPI
    return _estimate(method, value, influence, int(labelled.sum()), clusters, tuple(lams), confidence, used)


def labels_only(judge: Any, reference: Any, **options: Any) -> MeanEstimate:
    """The reference labels alone (PPI++ at λ = 0), weighted by the labelling strata."""
    return ppi_mean(judge, reference, lam=0.0, **options)


def mean_of(values: Any, *, clusters: Sequence[Any] | None = None, method: str = JUDGE_ONLY, n_labelled: int = 0,
            confidence: float = CONFIDENCE) -> MeanEstimate:
    """A plain mean with its (cluster-robust) interval, by the same rule as the estimates."""
    v = np.asarray(values, dtype=float)
    if not len(v):
        return MeanEstimate(method, None, None, None, None, 0, n_labelled, None)
    return _estimate(method, float(v.mean()), (v - v.mean()) / len(v), n_labelled, clusters, (), confidence)


def judge_only(judge: Any, reference: Any | None = None, *, clusters: Sequence[Any] | None = None,
               confidence: float = CONFIDENCE) -> MeanEstimate:
    """The judge's mean over every item, with its interval: the judge's number, bias included."""
    labelled = 0 if reference is None else int(np.isfinite(np.asarray(reference, dtype=float)).sum())
    return mean_of(judge, clusters=clusters, n_labelled=labelled, confidence=confidence)


def difference(a: MeanEstimate, b: MeanEstimate, units_a: Sequence[Any], units_b: Sequence[Any], *,
               clustered: bool, confidence: float = CONFIDENCE) -> MeanEstimate:
    """θ_A − θ_B of two models' estimates, paired: ``units_*`` name each item's cluster (its
    own id when ``clustered`` is False), and the influences ψ_A − ψ_B are summed per unit, so
    what the two models share is counted once."""
    codes = _codes([str(u) for u in (*units_a, *units_b)], len(units_a) + len(units_b))
    totals = np.bincount(codes, weights=np.concatenate([a.influence, -b.influence]))
    value = (a.value or 0.0) - (b.value or 0.0)
    units = list(range(len(totals))) if clustered else None
    return _estimate(f"{a.method} difference", value, totals, a.n_labelled + b.n_labelled, units, (), confidence)


def p_value(est: MeanEstimate) -> float | None:
    """Two-sided p of θ = 0 from the estimate's own reference distribution (normal without
    clusters, t(C − 1) with them)."""
    if est.se is None or est.value is None or est.se == 0:
        return None
    t = est.value / est.se
    if est.n_clusters is None:
        return float(2 * sps.norm.sf(abs(t)))
    return float(2 * sps.t.sf(abs(t), est.n_clusters - 1))


def labels_needed(half_width: float, sd_reference: float, rho: float, n_items: int, *,
                  confidence: float = CONFIDENCE) -> dict[str, int | None]:
    """How many random reference labels reach an interval half-width ``half_width`` for the
    PPI++ estimate and for the labels alone, from a pilot's reference SD and judge-reference
    correlation ρ. With the tuned λ, Var = σ_Y² (1 − ρ² N' / (N' + n)) / n, N' = N − n the
    unlabelled items (derived from the PPI++ variance; the labels alone: σ_Y² / n). None: not
    reachable with the benchmark's items."""
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    target = (half_width / z) ** 2
    labels = math.ceil(sd_reference ** 2 / target)

    def ppi_variance(n: int) -> float:
        rest = n_items - n
        return sd_reference ** 2 * (1 - rho ** 2 * rest / (rest + n)) / n

    ppi = next((n for n in range(2, n_items + 1) if ppi_variance(n) <= target), None)
    return {"ppi": ppi, "labels_only": labels if labels <= n_items else None}
