"""Paired differences between two models on the same items, per declared metric.

For metric f and models A, B scored on one task set: Δ = f(A) − f(B), the difference of the two
leaderboard numbers. Everything else is computed from one joint cluster bootstrap
(:func:`evalnb.stats.clustered.bootstrap_draws`): both models' replicates come from the same
resample of clusters, so the interval is paired.

- **interval**: the percentile interval of Δ* = f(A*) − f(B*);
- **SE_Δ**: the clustered standard error of the difference, from the item influences
  z_A − z_B (:func:`evalnb.stats.clustered.design_se`, finite-cluster correction), and the same
  with every item its own cluster (``se_delta_items``); with every item its own cluster and the
  same items counted for both, SE_Δ² = SE_A² + SE_B² − 2 ρ SE_A SE_B;
- **ρ**: Pearson's correlation of the two models' item scores (each item's mean over its
  counted cells) over the items both count;
- **p**: two-sided paired-bootstrap p-value, the interval inverted:
  p = min(1, 2 · min(1 + #{Δ* ≤ 0}, 1 + #{Δ* ≥ 0}) / (B + 1)) (Davison & Hinkley's +1 keeps
  it off 0), so p < α exactly when 0 lies outside the (1 − α) percentile interval, up to that +1;
- **Holm**: :func:`holm` over every pair of the leaderboard, one family per metric (statsmodels'
  ``multipletests(method="holm")``, checked in the tests; written out here to keep runtime
  dependencies light);
- **verdict** at α on the Holm-adjusted p: ``A ahead``, ``B ahead`` or ``indistinguishable``.

Small samples (:mod:`evalnb.stats.smallsample`): ``p_t`` is the two-sided t test of Δ / SE_Δ on
C − S degrees of freedom (``df``), ``t_low``/``t_high`` the matching t interval; Holm and the
verdict use the larger of ``p`` and ``p_t``, so a verdict needs both; with fewer clusters than
the minimum, or a stratum of one cluster, the verdict is withheld and ``note`` says why (and
says when the bootstrap interval is approximate, or the SE is 0).

Beside the verdicts, :func:`common_difference` is a sensitivity view, not a verdict: the mean of
the per-item differences d_i = s_A,i − s_B,i over the items both models attempted (a per-model
context cap can leave them different item sets), with the percentile interval of the same
cluster bootstrap (whole clusters of those items resampled within strata; with every item its
own cluster, exactly the item bootstrap of :func:`evalnb.stats.intervals.paired_bootstrap_ci`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from evalnb.stats import intervals as stats, smallsample
from evalnb.stats.clustered import Design, RatioForm, bootstrap_draws, design_se, percentile_interval

ALPHA = 0.05
INDISTINGUISHABLE = "indistinguishable"
P_METHOD = "two-sided paired cluster bootstrap, 2·min(1+#{Δ*≤0}, 1+#{Δ*≥0})/(B+1)"


@dataclass(frozen=True)
class PairedDifference:
    metric: str
    model_a: str
    model_b: str
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    se_delta: float | None          # clustered
    se_delta_items: float | None    # every item its own cluster
    rho: float | None
    p: float | None
    n: int                          # items either model counts
    n_clusters: int
    p_holm: float | None = None
    verdict: str | None = None
    mde: float | None = None        # at the chosen α and power, from the clustered SE_Δ
    df: int | None = None           # t degrees of freedom: clusters − strata
    p_t: float | None = None        # t test of Δ / SE_Δ on df
    t_low: float | None = None      # Δ ± t · SE_Δ
    t_high: float | None = None
    withheld: str | None = None     # why no verdict is given
    note: str | None = None         # what a reader must know about this row

    @property
    def p_verdict(self) -> float | None:
        """The p a verdict rests on: the larger of the bootstrap's and the t test's."""
        present = [p for p in (self.p, self.p_t) if p is not None]
        return max(present) if present else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def item_scores(form: RatioForm) -> np.ndarray:
    """Each item's score for the metric: its counted cells' mean (NaN when it counts in none)."""
    top, bottom = np.zeros(form.n), np.zeros(form.n)
    for y, m in form.terms:
        top, bottom = top + y, bottom + m
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    both = np.isfinite(a) & np.isfinite(b)
    if both.sum() < 3 or np.std(a[both]) == 0 or np.std(b[both]) == 0:
        return None
    return float(np.corrcoef(a[both], b[both])[0, 1])


def bootstrap_p(replicates: np.ndarray) -> float | None:
    """The two-sided p-value of the module doc from replicates of Δ*."""
    finite = replicates[np.isfinite(replicates)]
    if not len(finite):
        return None
    below, above = int((finite <= 0).sum()), int((finite >= 0).sum())
    return min(1.0, 2 * min(1 + below, 1 + above) / (len(finite) + 1))


def paired_difference(metric: str, a: str, b: str, form_a: RatioForm, form_b: RatioForm, design: Design,
                      draws_a: np.ndarray, draws_b: np.ndarray, confidence: float = stats.CONFIDENCE,
                      noun: str = "cluster") -> PairedDifference:
    """One pair on one metric (module doc); ``draws_*`` from one joint bootstrap; ``noun``:
    what a cluster is, for the note."""
    value_a, value_b = form_a.value(), form_b.value()
    delta = value_a - value_b if value_a is not None and value_b is not None else None
    replicates = draws_a - draws_b
    low, high = percentile_interval(replicates, confidence)
    z, used = form_a.influence() - form_b.influence(), form_a.used() | form_b.used()
    se, n_clusters = design_se(z, used, design)
    se_items, _ = design_se(z, used, design.singletons())
    held = smallsample.support(design.cluster_stratum, design.totals(used.astype(float)) > 0, noun)
    t_low, t_high = smallsample.t_interval(delta, se, held.df, confidence)
    return PairedDifference(metric, a, b, delta, low, high, se, se_items,
                            correlation(item_scores(form_a), item_scores(form_b)),
                            bootstrap_p(replicates) if delta is not None else None, int(used.sum()), n_clusters,
                            df=held.df, p_t=smallsample.t_p(delta, se, held.df), t_low=t_low, t_high=t_high,
                            withheld=held.withheld, note=row_note(held, se, noun))


def row_note(held: smallsample.Support, se: float | None, noun: str) -> str | None:
    """The reader's caveat for one pair: no verdict and why, an SE of 0, an approximate interval."""
    if held.withheld:
        return f"verdict {held.withheld}"
    if se == 0:
        return "no MDE: SE 0 (the difference is the same in every cluster), so the data show no spread"
    if held.approximate:
        return (f"approximate bootstrap interval: {held.n_clusters} {smallsample.plural(noun, held.n_clusters)} "
                f"(under {smallsample.APPROXIMATE_BELOW}); the t interval is the better guide")
    return None


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not in the family)."""
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))   # monotone: never below an earlier one
        out[i] = running
    return out


def verdict(delta: float | None, p_adjusted: float | None, a: str, b: str, alpha: float = ALPHA) -> str | None:
    if delta is None or p_adjusted is None:
        return None
    if p_adjusted >= alpha or delta == 0:
        return INDISTINGUISHABLE
    return f"{a} ahead" if delta > 0 else f"{b} ahead"


def replicates_needed(pairs: int, alpha: float = ALPHA) -> int:
    """The fewest bootstrap replicates B at which a Holm-adjusted p can fall below ``alpha`` over
    ``pairs`` comparisons: the smallest p is 2/(B + 1), the smallest adjusted one pairs × that."""
    return max(1, math.floor(2 * pairs / alpha + 1e-9))   # the tolerance: 2m/α is often a whole number


def unresolvable(pairs: int, n_boot: int | None, alpha: float = ALPHA) -> str | None:
    """Why no verdict is possible at all with ``n_boot`` replicates over ``pairs``, or None."""
    if n_boot is None or not pairs or pairs * 2 / (n_boot + 1) < alpha:
        return None
    return (f"withheld: {n_boot} resamples cannot resolve a Holm-adjusted p below {alpha:g} over {pairs} pairs "
            f"(at least {replicates_needed(pairs, alpha)} are needed)")


def with_holm(pairs: Sequence[PairedDifference], alpha: float = ALPHA, n_boot: int | None = None
              ) -> list[PairedDifference]:
    """Holm over the pairs of each metric (on each pair's :attr:`~PairedDifference.p_verdict`;
    withheld pairs stay in the family, so the others pay for them), and each pair's verdict at
    ``alpha``: the reason where it is withheld, also where ``n_boot`` replicates are too few
    for any adjusted p to fall below ``alpha`` (:func:`unresolvable`)."""
    out = list(pairs)
    for metric in dict.fromkeys(p.metric for p in pairs):
        where = [i for i, p in enumerate(pairs) if p.metric == metric]
        adjusted = holm([pairs[i].p_verdict for i in where])
        too_few = unresolvable(len(where), n_boot, alpha)
        for i, p_adj in zip(where, adjusted):
            pair = pairs[i]
            said = pair.withheld or too_few or verdict(pair.delta, p_adj, pair.model_a, pair.model_b, alpha)
            out[i] = replace(pair, p_holm=p_adj, verdict=said)
    return out


@dataclass(frozen=True)
class CommonDifference:
    """The mean item difference over the common items, its cluster-bootstrap interval, and how
    many items and clusters it rests on."""

    mean: float | None
    low: float | None
    high: float | None
    n: int
    n_clusters: int


def common_difference(differences: Sequence[float], *, clusters: Sequence[str] | None = None,
                      strata: Sequence[str] | None = None, n_boot: int = stats.N_BOOT, seed: int = 0,
                      confidence: float = stats.CONFIDENCE) -> CommonDifference:
    """The mean of ``differences`` (one per common item) with the percentile interval of the
    cluster bootstrap of :mod:`evalnb.stats.clustered` over those items: ``clusters`` labels them
    (None: every item its own), clusters drawn within ``strata``; the mean on each replicate is
    Σ_c w_c D_c / Σ_c w_c n_c (D_c a cluster's sum of differences, n_c its items)."""
    d = np.asarray(differences, dtype=float)
    design = Design.of(len(d), clusters, strata)
    form = RatioForm(((d, np.ones(len(d))),), len(d))
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = bootstrap_draws({0: form}, design, n_boot=n_boot, seed=seed)[0]
    low, high = percentile_interval(draws, confidence)
    return CommonDifference(form.value(), low, high, len(d), design.n_clusters)
