"""Standard errors with clusters, the cluster bootstrap, paired differences, Holm, ranks and power, each against an independent computation: statsmodels (cluster-robust OLS,
multipletests), scipy (bootstrap, pearsonr, rankdata-free brute force), closed forms, and a seeded
coverage simulation on clustered data with a known mean."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from evalnb.stats import clustered, metrics, pairwise, power, intervals as stats
from evalnb.stats.ranks import rank_summaries
from evalnb.core.types import Metric


def clustered_scores(n_clusters: int, size: int, rng: np.random.Generator, mean: float = 0.6,
                     between: float = 0.2, within: float = 0.15) -> tuple[np.ndarray, list[str]]:
    """Scores sharing a cluster effect (an intra-cluster correlation of between² / (between² + within²))."""
    effect = rng.normal(0, between, n_clusters)
    scores = mean + np.repeat(effect, size) + rng.normal(0, within, n_clusters * size)
    return scores, [f"doc{c}" for c in np.repeat(np.arange(n_clusters), size)]


def form(values: np.ndarray, fn=None, strata: list[str] | None = None) -> clustered.RatioForm:
    groups = stats.strata_columns(strata, values.shape[-1])
    found = clustered.form_of(fn or metrics.mean(), values, groups)
    assert found is not None
    return found


# --- standard errors -------------------------------------------------------------------------------

def test_se_is_the_textbook_one_and_the_clustered_se_is_statsmodels_cluster_robust() -> None:
    rng = np.random.default_rng(1)
    scores, labels = clustered_scores(12, 3, rng)
    scores = np.concatenate([scores, [0.1, 0.9]])         # two clusters of one: unequal sizes
    labels += ["lone1", "lone2"]
    got = clustered.uncertainty(form(scores[None, :]), clustered.Design.of(len(scores), labels))
    assert got.se == pytest.approx(np.std(scores, ddof=1) / np.sqrt(len(scores)))
    ols = sm.OLS(scores, np.ones(len(scores))).fit(cov_type="cluster", cov_kwds={"groups": np.unique(labels, return_inverse=True)[1]})
    # statsmodels' small-sample factor for a constant alone is G/(G-1) · (N-1)/(N-1): the finite-cluster correction
    assert got.clustered_se == pytest.approx(float(ols.bse[0]), rel=1e-10)
    assert (got.n, got.n_clusters) == (38, 14)
    assert got.design_effect == pytest.approx((got.clustered_se / got.se) ** 2) and got.design_effect > 1.5


def test_zero_one_scores_and_excluded_cells() -> None:
    hits = np.array([1, 0, 1, 1, 0, 1, 1, 1, np.nan, np.nan])
    scored = clustered.uncertainty(form(hits[None, :], metrics.mean()), clustered.Design.of(10))
    p, n = 6 / 8, 8                                        # NaN left out: a mean over 8 items
    assert scored.n == 8 and scored.se == pytest.approx(np.sqrt(p * (1 - p) / n) * np.sqrt(n / (n - 1)))
    all_tasks = clustered.uncertainty(form(hits[None, :], metrics.mean(missing="zero")), clustered.Design.of(10))
    assert all_tasks.n == 10 and all_tasks.se == pytest.approx(np.std(np.nan_to_num(hits), ddof=1) / np.sqrt(10))


def test_strata_and_repeats_closed_forms() -> None:
    rng = np.random.default_rng(2)
    values = rng.random((3, 30))                          # 3 repeats: the item is the unit, its mean the score
    strata = ["K=1"] * 10 + ["K=2"] * 12 + ["K=3"] * 8
    design = clustered.Design.of(30, None, strata)
    item = values.mean(axis=0)
    parts = [item[np.array(strata) == k] for k in ("K=1", "K=2", "K=3")]
    se_k = [np.std(p, ddof=1) / np.sqrt(len(p)) for p in parts]
    overall = clustered.uncertainty(form(values, metrics.mean(), strata), design)
    assert overall.se == pytest.approx(np.sqrt(sum((len(p) / 30) ** 2 * s ** 2 for p, s in zip(parts, se_k))))
    macro = clustered.uncertainty(form(values, metrics.macro_mean(), strata), design)
    assert macro.se == pytest.approx(np.sqrt(sum(s ** 2 for s in se_k)) / 3)
    one = clustered.uncertainty(form(values, metrics.stratum_mean("K=2"), strata), design)
    assert one.se == pytest.approx(se_k[1]) and one.n == 12


def test_forms_give_the_metrics_values_and_the_item_bootstrap_when_clusters_are_items() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((1, 40))
    values[0, [2, 9, 17]] = np.nan
    strata = ["a"] * 15 + ["b"] * 25
    declared = [Metric("all", "", metrics.mean(missing="zero")), Metric("scored", "", metrics.mean()),
                Metric("macro", "", metrics.macro_mean()), Metric("b", "", metrics.stratum_mean("b")),
                Metric("coverage", "", metrics.share_scored())]
    protocol = stats.metric_intervals(values, declared, strata=strata, n_boot=1500, seed=9)
    design = clustered.Design.of(40, None, strata)
    for metric in declared:
        f = form(values, metric.fn, strata)
        assert f.value() == pytest.approx(protocol[metric.name].mean)
        low, high = clustered.percentile_interval(clustered.bootstrap_draws({0: f}, design, n_boot=1500, seed=9)[0])
        assert (low, high) == pytest.approx((protocol[metric.name].low, protocol[metric.name].high), abs=1e-12)
    assert clustered.form_of(metrics.count_scored(), values, {}) is None    # a count has no standard error


def test_cluster_bootstrap_is_the_documented_gather_and_agrees_with_scipy_over_cluster_means() -> None:
    rng = np.random.default_rng(4)
    scores, labels = clustered_scores(15, 4, rng)
    design = clustered.Design.of(60, labels)
    draws = clustered.bootstrap_draws({0: form(scores[None, :])}, design, n_boot=3000, seed=5)[0]
    # the documented procedure by hand: draw cluster numbers, gather their items, take the mean
    again = np.random.default_rng(5).integers(0, 15, size=(3000, 15))
    by_cluster = scores.reshape(15, 4)
    assert draws == pytest.approx(np.array([by_cluster[row].mean() for row in again]))
    theirs = scipy_stats.bootstrap((by_cluster.mean(axis=1),), np.mean, n_resamples=3000, method="percentile",
                                   random_state=np.random.default_rng(0)).confidence_interval
    ours = clustered.percentile_interval(draws)
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.015)


def test_coverage_on_clustered_data_with_a_known_mean() -> None:
    """Intervals resampling tasks are too narrow when tasks share documents; those resampling
    documents (and the clustered SE) cover near 95 %."""
    rng = np.random.default_rng(2024)
    replicates, truth = 300, 0.6
    covered = {"task bootstrap": 0, "cluster bootstrap": 0, "clustered se": 0, "task se": 0}
    for r in range(replicates):
        scores, labels = clustered_scores(30, 6, rng, mean=truth)
        f, design = form(scores[None, :]), clustered.Design.of(180, labels)
        task = stats.bootstrap_ci(list(scores), n_boot=400, seed=r)
        cluster = clustered.percentile_interval(clustered.bootstrap_draws({0: f}, design, n_boot=400, seed=r)[0])
        u = clustered.uncertainty(f, design)
        covered["task bootstrap"] += task.low <= truth <= task.high
        covered["cluster bootstrap"] += cluster[0] <= truth <= cluster[1]
        covered["clustered se"] += abs(f.value() - truth) <= 1.96 * u.clustered_se
        covered["task se"] += abs(f.value() - truth) <= 1.96 * u.se
    share = {k: v / replicates for k, v in covered.items()}
    print(share)
    assert share["cluster bootstrap"] >= 0.89 and share["clustered se"] >= 0.90, share
    assert share["task bootstrap"] <= 0.80 and share["task se"] <= 0.80, share


# --- paired differences, Holm, verdicts ----------------------------------------------------------

def test_paired_difference_against_closed_forms() -> None:
    rng = np.random.default_rng(6)
    base = rng.random(50)
    a, b = np.clip(base + rng.normal(0.05, 0.1, 50), 0, 1), np.clip(base + rng.normal(0, 0.1, 50), 0, 1)
    design = clustered.Design.of(50)
    fa, fb = form(a[None, :]), form(b[None, :])
    draws = clustered.bootstrap_draws({"a": fa, "b": fb}, design, n_boot=4000, seed=1)
    pair = pairwise.paired_difference("m", "A", "B", fa, fb, design, draws["a"], draws["b"])
    d = a - b
    assert pair.delta == pytest.approx(a.mean() - b.mean())
    assert pair.se_delta == pytest.approx(np.std(d, ddof=1) / np.sqrt(50))
    assert pair.rho == pytest.approx(scipy_stats.pearsonr(a, b)[0])
    se_a, se_b = np.std(a, ddof=1) / np.sqrt(50), np.std(b, ddof=1) / np.sqrt(50)
    assert pair.se_delta ** 2 == pytest.approx(se_a ** 2 + se_b ** 2 - 2 * pair.rho * se_a * se_b)
    # the same resample for both models: the interval is the bootstrap of the item differences
    by_hand = stats.bootstrap_ci(list(d), n_boot=4000, seed=1)
    assert (pair.ci_low, pair.ci_high) == pytest.approx((by_hand.low, by_hand.high), abs=1e-12)
    replicate_d = draws["a"] - draws["b"]
    expected_p = min(1, 2 * min(1 + (replicate_d <= 0).sum(), 1 + (replicate_d >= 0).sum()) / 4001)
    assert pair.p == pytest.approx(expected_p)
    assert (pair.p < 0.05) == (pair.ci_low > 0 or pair.ci_high < 0)
    same = pairwise.paired_difference("m", "A", "A", fa, fa, design, draws["a"], draws["a"])
    assert same.delta == 0 and same.p == 1.0 and pairwise.verdict(0.0, 1.0, "A", "A") == "indistinguishable"


def test_common_difference_with_items_as_clusters_is_the_item_bootstrap() -> None:
    """Exact (to rounding), not within Monte-Carlo error: with every item its own cluster the
    cluster resampler draws the same random stream as stats.paired_bootstrap_ci (per stratum,
    sorted labels, rng.integers(0, n_s, size=(rows, n_s))), counted instead of gathered."""
    rng = np.random.default_rng(11)
    a, b = rng.random(45), rng.random(45)
    strata = ["K=2"] * 20 + ["K=1"] * 25
    for labels in (None, strata):
        ours = pairwise.common_difference(list(a - b), strata=labels, n_boot=3000, seed=4)
        item = stats.paired_bootstrap_ci(list(a), list(b), n_boot=3000, seed=4, strata=labels)
        assert ours.mean == pytest.approx(item.mean)
        assert (ours.low, ours.high) == pytest.approx((item.low, item.high), abs=1e-12)
        assert (ours.n, ours.n_clusters) == (45, 45)
    empty = pairwise.common_difference([], n_boot=100)
    assert (empty.mean, empty.low, empty.high, empty.n, empty.n_clusters) == (None, None, None, 0, 0)


def test_common_difference_resamples_clusters_and_covers_where_the_item_bootstrap_does_not() -> None:
    """Seeded simulation: item differences that share a cluster effect (intra-cluster correlation
    0.64, six items a cluster). The interval resampling clusters covers the true mean difference
    near 95 %; the item bootstrap over the same differences (the table's former interval) does not."""
    rng = np.random.default_rng(31)
    replicates, truth = 300, 0.05
    covered = {"clusters": 0, "items": 0}
    for r in range(replicates):
        d, labels = clustered_scores(30, 6, rng, mean=truth)
        ours = pairwise.common_difference(list(d), clusters=labels, n_boot=400, seed=r)
        item = stats.paired_bootstrap_ci(list(d), [0.0] * len(d), n_boot=400, seed=r)
        assert ours.n_clusters == 30 and ours.mean == pytest.approx(d.mean())
        covered["clusters"] += ours.low <= truth <= ours.high
        covered["items"] += item.low <= truth <= item.high
    share = {k: v / replicates for k, v in covered.items()}
    print(share)
    assert share["clusters"] >= 0.89 and share["items"] <= 0.80, share


def test_holm_agrees_with_statsmodels() -> None:
    rng = np.random.default_rng(7)
    for m in (1, 3, 10, 190):
        p = list(rng.uniform(0, 0.2, m))
        p[: m // 3] = [p[0]] * (m // 3)                    # ties
        assert pairwise.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert pairwise.holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])


def test_verdicts_after_holm() -> None:
    pairs = [pairwise.PairedDifference("m", "A", "B", 0.1, 0.02, 0.2, 0.04, 0.04, 0.5, 0.03, 100, 100),
             pairwise.PairedDifference("m", "A", "C", -0.2, -0.3, -0.1, 0.04, 0.04, 0.5, 0.001, 100, 100),
             pairwise.PairedDifference("m", "B", "C", 0.05, -0.1, 0.2, 0.04, 0.04, 0.5, 0.04, 100, 100)]
    got = pairwise.with_holm(pairs)
    assert [p.p_holm for p in got] == pytest.approx([0.06, 0.003, 0.06])   # each alone would pass 0.05
    assert [p.verdict for p in got] == ["indistinguishable", "C ahead", "indistinguishable"]
    assert pairwise.with_holm(pairs[:1])[0].verdict == "A ahead"            # one comparison: p 0.03


# --- ranks ---------------------------------------------------------------------------------------

def test_rank_intervals_and_p_first() -> None:
    rng = np.random.default_rng(8)
    draws = {"far ahead": rng.normal(0.9, 0.01, 2000), "close a": rng.normal(0.5, 0.02, 2000),
             "close b": rng.normal(0.5, 0.02, 2000)}
    got = rank_summaries({"far ahead": 0.9, "close a": 0.51, "close b": 0.49}, draws)
    assert got["far ahead"].interval_text == "1" and got["far ahead"].p_first == 1.0
    assert got["close a"].interval_text == "2-3" and got["close a"].rank == 2.0
    by_hand = np.mean(draws["close a"] > draws["close b"])   # second place: a beats b
    assert np.mean(np.argsort(-np.stack(list(draws.values())), axis=0)[1] == 1) == pytest.approx(by_hand)
    tied = rank_summaries({"x": 0.5, "y": 0.5}, {"x": np.full(10, 0.5), "y": np.full(10, 0.5)})
    assert tied["x"].rank == 1.5 and tied["x"].p_first == 0.5 and tied["x"].interval_text == "1.5"
    assert sum(r.p_first for r in got.values()) == pytest.approx(1.0)


# --- power ---------------------------------------------------------------------------------------

def test_power_closed_forms() -> None:
    z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)
    assert power.z_sum() == pytest.approx(z) and power.mde(0.01) == pytest.approx(0.028, abs=5e-4)
    n = power.items_needed(1 / 9, 0.03)
    assert n == pytest.approx(z ** 2 / 9 / 0.03 ** 2) and power.whole(n) == 969   # "about 970"
    assert power.items_needed(1 / 9, 0.03, design_effect=2.0) == pytest.approx(2 * n)
    assert power.var_with_repeats(0.05, 0.04, 4, 0.08, 2) == pytest.approx(0.05 + 0.01 + 0.04)
    with pytest.raises(ValueError, match="strictly between"):
        power.z_sum(power=1.0)
