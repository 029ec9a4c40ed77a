"""Power and planning: which difference a task set can detect, and how many items it takes.

Two-sided test at level α with power 1 − β, normal approximation (Miller 2024, §5):

- minimum detectable effect: MDE = (z_{1−α/2} + z_{1−β}) · SE_Δ  (α 0.05, power 0.8: 2.80 · SE_Δ);
- items needed to detect δ: n = (z_{1−α/2} + z_{1−β})² · Var(d) / δ² · deff, Var(d) the variance of
  the item-level differences and deff the design effect of clustering (1 when items are
  independent); clusters needed = n / (items per cluster);
- repeats: with K_A, K_B answers (or verdicts) per item, Var(d) = ω² + σ_A²/K_A + σ_B²/K_B,
  ω² the variance of the items' true differences and σ² each model's mean within-item variance.

These assume a pilot's variances hold for the planned set and that differences are roughly
normal at that n; they say nothing about a task set drawn from another distribution.
"""

from __future__ import annotations

import math
from typing import Any

ALPHA = 0.05
POWER = 0.8


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1−α/2} + z_{1−β}."""
    from scipy.stats import norm

    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie strictly between 0 and 1 (got {alpha}, {power})")
    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def mde(se_delta: float | None, alpha: float = ALPHA, power: float = POWER, df: int | None = None) -> float | None:
    """(z_{1−α/2} + z_{1−β}) · SE_Δ; with ``df`` (few clusters) Student t's quantiles on df in place
    of the normal's, the usual approximation to the noncentral t. None where SE_Δ is undefined
    or 0 (an MDE of 0 would claim any difference detectable)."""
    if se_delta is None or not se_delta > 0:
        return None
    if df is None:
        return z_sum(alpha, power) * se_delta
    from scipy.stats import t

    z_sum(alpha, power)   # checks alpha and power
    return float((t.ppf(1 - alpha / 2, df) + t.ppf(power, df)) * se_delta)


def items_needed(var_d: float, delta: float, alpha: float = ALPHA, power: float = POWER,
                 design_effect: float = 1.0) -> float:
    """n = (z_{1−α/2} + z_{1−β})² · Var(d) / δ² · deff (not rounded)."""
    if delta <= 0:
        raise ValueError(f"delta must be positive (got {delta})")
    return z_sum(alpha, power) ** 2 * var_d / delta ** 2 * design_effect


def var_with_repeats(omega2: float, sigma2_a: float, k_a: int, sigma2_b: float, k_b: int) -> float:
    """Var(d) = ω² + σ_A²/K_A + σ_B²/K_B."""
    return omega2 + sigma2_a / k_a + sigma2_b / k_b


def within_item_variance(matrix: Any) -> tuple[float | None, int]:
    """σ²: the mean, over items with two or more scored repeats, of the sample variance (ddof 1)
    across an item's repeats, from a repeats x items matrix (NaN: not scored); and how many items
    it is over. None with fewer than two repeats or no such item."""
    import numpy as np

    values = np.asarray(matrix, dtype=float)
    counts = (~np.isnan(values)).sum(axis=0) if values.ndim == 2 else np.zeros(0)
    if values.ndim != 2 or values.shape[0] < 2 or not (counts >= 2).any():
        return None, 0
    kept = values[:, counts >= 2]
    present = ~np.isnan(kept)
    means = np.where(present, kept, 0.0).sum(axis=0) / present.sum(axis=0)
    per_item = np.where(present, (kept - means) ** 2, 0.0).sum(axis=0) / (present.sum(axis=0) - 1)
    return float(np.mean(per_item)), int(kept.shape[1])


def whole(n: float) -> int:
    """A count needed, rounded up."""
    return int(math.ceil(n - 1e-9))
