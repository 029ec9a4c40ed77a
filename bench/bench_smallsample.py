"""The small-sample simulation at a reviewer's size: the cells ``tests/test_smallsample.py``
checks with fewer datasets, each with 1,000 seeded datasets.

Two models of equal true accuracy (probit scores: a document effect both share, SD 0.5, and a
document-by-model effect, SD 0.3; 20 tasks a document; accuracy 0.7 before the effects) on
1, 2, 3, 5, 10, 20 and 40 documents. Per cell: how often the percentile cluster bootstrap alone
would call a winner (p < 0.05, the former rule), how often evalnb's verdict does (withheld
below five documents; otherwise the larger of the bootstrap p and the t p), and the coverage
of the t interval and of the percentile cluster bootstrap of one model's accuracy (the truth in
closed form). Then Wilson's interval on the effective n at accuracy 0.95, 30 items (exact
binomial coverage) and with 10 documents of 5 tasks; then the retest study's SD interval at 20 to
400 answers (300 datasets each). Prints one line per cell; a few minutes on one core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalnb.stats import clustered, metrics, pairwise   # noqa: E402


def form(y: np.ndarray) -> clustered.RatioForm:
    found = clustered.form_of(metrics.mean(), y[None, :], {"": np.arange(len(y))})
    assert found is not None
    return found


def cell(n_docs: int, datasets: int, n_boot: int) -> dict[str, float]:
    rng = np.random.default_rng(1000 + n_docs)
    base = sps.norm.ppf(0.7)
    truth = float(sps.norm.cdf(base / np.sqrt(1 + 0.5 ** 2 + 0.3 ** 2)))
    counts = {"bootstrap alone": 0.0, "verdict": 0.0, "withheld": 0.0, "t coverage": 0.0, "bootstrap coverage": 0.0}
    for r in range(datasets):
        doc = rng.normal(0, 0.5, n_docs)
        effect = [np.repeat(doc + rng.normal(0, 0.3, n_docs), 20) for _ in range(2)]
        ya, yb = ((rng.random(20 * n_docs) < sps.norm.cdf(base + e)).astype(float) for e in effect)
        labels = [f"d{d}" for d in np.repeat(np.arange(n_docs), 20)]
        design = clustered.Design.of(len(ya), labels)
        fa, fb = form(ya), form(yb)
        draws = clustered.bootstrap_draws({"a": fa, "b": fb}, design, n_boot=n_boot, seed=r)
        found = pairwise.with_holm([pairwise.paired_difference("m", "A", "B", fa, fb, design, draws["a"], draws["b"],
                                                               noun="document")])[0]
        counts["bootstrap alone"] += (found.p or 1) < 0.05
        counts["verdict"] += bool(found.verdict and found.verdict.endswith("ahead"))
        counts["withheld"] += bool(found.withheld)
        t_ci = clustered.small_sample(fa, design, clustered.uncertainty(fa, design), "document")["t_ci"]
        counts["t coverage"] += t_ci["low"] is not None and t_ci["low"] <= truth <= t_ci["high"]
        low, high = clustered.percentile_interval(draws["a"])
        counts["bootstrap coverage"] += low is not None and high is not None and low <= truth <= high
    return {k: v / datasets for k, v in counts.items()}


def wilson_cells(datasets: int) -> dict[str, float]:
    exact = 0.0
    for k in range(31):
        y = np.array([1.0] * k + [0.0] * (30 - k))
        design = clustered.Design.of(30)
        ci = clustered.small_sample(form(y), design, clustered.uncertainty(form(y), design), "task")["bounded_ci"]
        exact += sps.binom.pmf(k, 30, 0.95) * (ci["low"] <= 0.95 <= ci["high"])
    rng = np.random.default_rng(9)
    mu, sd = sps.norm.ppf(0.95), 0.4
    truth = float(sps.norm.cdf(mu / np.sqrt(1 + sd ** 2)))
    labels = [f"d{i // 5}" for i in range(50)]
    design = clustered.Design.of(50, labels)
    covered = 0
    for _ in range(datasets):
        y = (rng.random(50) < sps.norm.cdf(mu + np.repeat(rng.normal(0, sd, 10), 5))).astype(float)
        ci = clustered.small_sample(form(y), design, clustered.uncertainty(form(y), design), "document")["bounded_ci"]
        covered += ci["low"] <= truth <= ci["high"]
    return {"wilson 30 items exact": exact, "wilson 10 documents x 5": covered / datasets}


def retest_cells(datasets: int) -> dict[int, float]:
    """The retest study's SD interval: four verdicts an answer, judge noise N(0, 0.05)."""
    from evalnb.stats import reliability

    rng = np.random.default_rng(1)
    out = {}
    for answers in (20, 50, 100, 200, 400):
        covered = 0
        for r in range(datasets):
            x = rng.beta(2, 2, answers)[:, None] + rng.normal(0, 0.05, (answers, 4))
            got = reliability.retest(x, n_boot=500, seed=r)["retest_sd"]
            covered += got.low is not None and got.high is not None and got.low <= 0.05 <= got.high
        out[answers] = covered / datasets
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--n-boot", type=int, default=500)
    args = parser.parse_args()
    for n_docs in (1, 2, 3, 5, 10, 20, 40):
        got = cell(n_docs, args.datasets, args.n_boot)
        print(f"{n_docs:>3} documents: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()), flush=True)
    for k, v in wilson_cells(args.datasets).items():
        print(f"{k}: coverage {v:.3f}")
    for answers, v in retest_cells(300).items():
        print(f"retest SD interval, {answers} answers x 4 verdicts: coverage {v:.3f}")


if __name__ == "__main__":
    main()
