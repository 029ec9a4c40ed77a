"""An interval for a score bounded in [0, 1] that keeps its coverage near 0 or 1 and with few items.

Near a bound the percentile bootstrap of a mean misses almost always on the inner side, and on a
small set where every item scored the same it has no width at all. Wilson's score interval
(Wilson 1927; Agresti and Coull 1998) does not: it is the set of p whose score test
|p̂ − p| ≤ z·√(p(1 − p)/n) accepts, so it is never of zero width and never leaves [0, 1].

For a mean of scores in [0, 1] that may share clusters, n is replaced by Kish's effective n,
n_eff = n / deff, deff = (clustered SE / SE)² the design effect, floored at 1 (a negative
within-cluster correlation is not taken to add information): the item count for independent
items, and smaller by the design effect when items share clusters. Using p̂(1 − p̂) rather than
the scores' own variance is cautious for scores between 0 and 1, whose variance is at most
that. Where the design effect is undefined (SE 0: every item the same score) the data say
nothing about the spread, and n_eff is the number of clusters: as if every cluster were one
item, the most cautious count. Decision: only a metric of one term (a mean over items, not a macro mean over
strata) whose items' counted cells sum to between 0 and their number (cells in [0, 1]) gets it.
"""

from __future__ import annotations

import math

import numpy as np

METHOD = "Wilson score interval on the effective number of items (items / design effect)"


def wilson(p_hat: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's interval for a proportion ``p_hat`` on ``n`` (possibly effective) items."""
    from scipy.stats import norm

    z = float(norm.ppf((1 + confidence) / 2))
    centre = (p_hat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(max(0.0, p_hat * (1 - p_hat) / n + z * z / (4 * n * n))) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def effective_n(n: int, se: float | None, clustered_se: float | None, n_clusters: int) -> float | None:
    """n / max(1, deff), or the number of clusters where the design effect is undefined (module doc)."""
    if clustered_se is None or se is None or not math.isfinite(clustered_se):
        return None
    if se == 0:
        return float(n_clusters) if n_clusters else None
    return n / max(1.0, (clustered_se / se) ** 2)


def is_bounded(terms: tuple[tuple[np.ndarray, np.ndarray], ...]) -> bool:
    """Whether a metric qualifies: one term, and per item 0 ≤ y ≤ m (its counted cells sum to
    between 0 and their number: for cells in [0, 1], always)."""
    if len(terms) != 1:
        return False
    y, m = terms[0]
    return bool((m > 0).any()) and bool(((y >= 0) & (y <= m)).all())


def bounded_interval(p_hat: float | None, n: int, se: float | None, clustered_se: float | None, n_clusters: int,
                     confidence: float = 0.95) -> dict[str, float | str] | None:
    """scores.json's ``bounded_ci``: Wilson on the effective n, with that n and the method."""
    if p_hat is None:
        return None
    n_eff = effective_n(n, se, clustered_se, n_clusters)
    if n_eff is None or n_eff <= 0:
        return None
    low, high = wilson(p_hat, n_eff, confidence)
    return {"low": low, "high": high, "n_effective": n_eff, "method": METHOD}
