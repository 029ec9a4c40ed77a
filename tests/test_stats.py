"""Seeded percentile bootstrap, checked against scipy; per-K resampling."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from evalnb.stats.intervals import bootstrap_ci, mean_sd, paired_bootstrap_ci


def sample(n: int = 60, seed: int = 3) -> list[float]:
    return list(np.random.default_rng(seed).beta(2, 3, size=n))


def test_agrees_with_scipy_percentile_bootstrap() -> None:
    data = sample()
    ours = bootstrap_ci(data, n_boot=10_000, seed=0)
    theirs = scipy_stats.bootstrap((np.array(data),), np.mean, n_resamples=10_000, method="percentile",
                                   confidence_level=0.95, random_state=np.random.default_rng(12345))
    # Different random streams: agreement within Monte-Carlo error (a few thousandths here).
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=0.01)
    assert ours.mean == pytest.approx(np.mean(data))
    assert (ours.n, ours.n_boot, ours.seed, ours.confidence) == (60, 10_000, 0, 0.95)


def test_same_seed_same_interval_other_seed_other_interval() -> None:
    data = sample()
    assert bootstrap_ci(data, seed=7) == bootstrap_ci(data, seed=7)
    assert bootstrap_ci(data, seed=7).low != bootstrap_ci(data, seed=8).low


def test_interval_is_reproducible_from_numpy_directly() -> None:
    # The documented procedure, rebuilt independently: PCG64(seed), n_boot x n indices.
    data = np.array(sample(25))
    rng = np.random.default_rng(0)
    means = data[rng.integers(0, 25, size=(2000, 25))].mean(axis=1)
    expected = np.quantile(means, [0.025, 0.975])
    ours = bootstrap_ci(list(data), n_boot=2000, seed=0)
    assert (ours.low, ours.high) == pytest.approx(tuple(expected))


def test_degenerate_inputs() -> None:
    assert bootstrap_ci([]).low is None
    one = bootstrap_ci([0.25])
    assert (one.low, one.high, one.mean) == (0.25, 0.25, 0.25)


def test_paired_difference_resamples_items() -> None:
    a, b = sample(40, 1), sample(40, 2)
    diff = paired_bootstrap_ci(a, b, seed=0)
    direct = bootstrap_ci([x - y for x, y in zip(a, b)], seed=0)
    assert (diff.low, diff.high) == (direct.low, direct.high)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0], [1.0, 2.0])


def test_mean_sd_uses_sample_sd() -> None:
    assert mean_sd([0.5, 0.7, 0.9]) == {"mean": pytest.approx(0.7), "sd": pytest.approx(0.2), "n": 3}
    assert mean_sd([0.5]) == {"mean": 0.5, "sd": None, "n": 1}
