"""The statistics every benchmark reuses: means, seeded percentile bootstrap intervals,
paired differences, and spread across repeats.

Resampling is vectorised with numpy's PCG64 generator, so the same seed gives the same
interval on every run and machine. Intervals are 95 % percentile intervals of the mean
(``n_boot = 10000``, seed 0 by default), as the GeoKTools report specifies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

N_BOOT = 10_000
CONFIDENCE = 0.95
_CHUNK = 2_000_000   # resampled values per block: bounds memory for large case sets


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None
    mean: float | None
    n: int
    n_boot: int
    seed: int
    confidence: float = CONFIDENCE
    method: str = "percentile bootstrap of the mean"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def bootstrap_means(values: Sequence[float], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` means of samples drawn with replacement from ``values``."""
    data = np.asarray(values, dtype=float)
    n = len(data)
    rows = max(1, _CHUNK // n)
    return np.concatenate([data[rng.integers(0, n, size=(min(rows, n_boot - start), n))].mean(axis=1)
                           for start in range(0, n_boot, rows)])


def bootstrap_ci(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0,
                 confidence: float = CONFIDENCE) -> Interval:
    """Percentile interval of the mean; degenerate inputs give the mean itself or nothing."""
    if len(values) == 0:
        return Interval(None, None, None, 0, n_boot, seed, confidence)
    means = bootstrap_means(values, n_boot, np.random.default_rng(seed))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(low), float(high), mean(values), len(values), n_boot, seed, confidence)


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, n_boot: int = N_BOOT,
                        seed: int = 0, confidence: float = CONFIDENCE) -> Interval:
    """Interval of mean(a - b) over paired items, resampling items (not models)."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    return bootstrap_ci([x - y for x, y in zip(a, b)], n_boot=n_boot, seed=seed, confidence=confidence)


def mean_sd(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean and sample standard deviation (n - 1) across repeats; null entries are skipped."""
    present = [v for v in values if v is not None]
    if not present:
        return {"mean": None, "sd": None, "n": 0}
    sd = float(np.std(present, ddof=1)) if len(present) > 1 else None
    return {"mean": float(np.mean(present)), "sd": sd, "n": len(present)}


def is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
