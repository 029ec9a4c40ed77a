"""What a design of few clusters can support, and the small-sample correction evalnb uses.

With few clusters (documents, cases, queries) the percentile cluster bootstrap is too narrow
and its p-value too small: two models of equal accuracy with 20 tasks a document were called
different in most datasets of one or two documents and in about one in ten at ten documents.
A seeded simulation (``bench/bench_smallsample.py``, ``tests/test_smallsample.py``) shows that
the clustered standard error with a Student t quantile on C − S degrees of freedom (C clusters
holding a counted item, S strata holding one: C − 1 without strata) keeps its level and covers
near 95 % from three clusters on. So:

- **Verdicts** need at least :data:`MIN_CLUSTERS` clusters and two in every stratum (else the
  SE is undefined): below that the verdict is *withheld*, with the reason in the row. Where a
  verdict is given it needs both the bootstrap p-value and the t p-value (:func:`t_p`) below
  α after Holm: a verdict rests on the larger of the two.
- **Intervals** from the cluster bootstrap (percentile) are marked *approximate* below
  :data:`APPROXIMATE_BELOW` clusters: beside them, the t interval (:func:`t_interval`) is the
  one whose coverage the simulation supports at small C.
- **Rank intervals and P(first)** come from the bootstrap alone: withheld below
  :data:`MIN_CLUSTERS` clusters, approximate below :data:`APPROXIMATE_BELOW`.

Assumes the cluster totals are roughly normal (the t correction is exact for normal totals of
equal size) and clusters independent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_CLUSTERS = 5          # below this, no verdict, rank interval or P(first)
APPROXIMATE_BELOW = 30    # below this, the percentile cluster bootstrap is labelled approximate


@dataclass(frozen=True)
class Support:
    """How many clusters a statistic rests on, its t degrees of freedom, and what it may show."""

    n_clusters: int
    df: int | None             # clusters − strata; None when a stratum holds a single cluster
    withheld: str | None       # why no verdict (None: a verdict may be given)
    approximate: bool          # fewer clusters than APPROXIMATE_BELOW


def support(cluster_stratum: np.ndarray, live: np.ndarray, noun: str = "cluster") -> Support:
    """From each cluster's stratum code and whether it holds a counted item."""
    strata, per = np.unique(cluster_stratum[live], return_counts=True)
    c = int(live.sum())
    lone = bool((per < 2).any())
    df = None if lone or c == 0 else c - len(strata)
    nouns = plural(noun, c)
    if c < MIN_CLUSTERS:
        reason: str | None = f"withheld: {c} {nouns} (at least {MIN_CLUSTERS} are needed)"
    elif lone:
        reason = f"withheld: a stratum holds a single {noun} (its spread is unknown)"
    else:
        reason = None
    return Support(c, df, reason, c < APPROXIMATE_BELOW)


def plural(noun: str, count: int) -> str:
    return noun if count == 1 else (noun[:-1] + "ies" if noun.endswith("y") else noun + "s")


def t_quantile(p: float, df: int | None) -> float:
    """Student t's quantile on ``df`` degrees of freedom (the normal's when None)."""
    from scipy.stats import norm, t

    return float(norm.ppf(p) if df is None else t.ppf(p, df))


def t_p(delta: float | None, se: float | None, df: int | None) -> float | None:
    """Two-sided p-value of Δ / SE on t(df); None when it is undefined (no SE, or SE 0)."""
    from scipy.stats import t

    if delta is None or se is None or df is None or df < 1 or not se > 0:
        return None
    return float(min(1.0, 2 * t.sf(abs(delta) / se, df)))


def t_interval(value: float | None, se: float | None, df: int | None, confidence: float = 0.95
               ) -> tuple[float | None, float | None]:
    """value ± t_{(1+confidence)/2, df} · SE; (None, None) when undefined."""
    if value is None or se is None or df is None or df < 1 or not math.isfinite(se):
        return None, None
    half = t_quantile((1 + confidence) / 2, df) * se
    return value - half, value + half


def zero_width_note(low: float | None, high: float | None, what: str = "every resample gave the same value"
                    ) -> str | None:
    """Why an interval has no width (the reader must not take it for certainty), else None."""
    if low is None or high is None or low != high:
        return None
    return f"zero width: {what}; the data cannot show its uncertainty"
