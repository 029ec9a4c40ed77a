"""Small samples: few documents, scores near 0 or 1. Seeded simulations with a known truth
(probit scores with a document effect shared by both models and a document-by-model effect),
the truth computed in closed form, never from the code under test; the t quantiles against
scipy, Wilson's interval against statsmodels' ``proportion_confint``.

Sized to run in seconds; ``bench/bench_smallsample.py`` runs the same cells with more datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

from evalnb.stats import bounded, clustered, metrics, pairwise, smallsample
from evalnb.stats.ranks import rank_summaries

TASKS_PER_DOCUMENT = 20
BASE, SHARED, INTERACTION = 0.7, 0.5, 0.3


def documents(rng: np.random.Generator, n_docs: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Two models' 0/1 scores on ``n_docs`` documents of 20 tasks (``shift``: B's probit offset)."""
    base, doc = scipy_stats.norm.ppf(BASE), rng.normal(0, SHARED, n_docs)
    size = n_docs * TASKS_PER_DOCUMENT
    a = np.repeat(doc + rng.normal(0, INTERACTION, n_docs), TASKS_PER_DOCUMENT)
    b = np.repeat(doc + rng.normal(0, INTERACTION, n_docs), TASKS_PER_DOCUMENT) + shift
    ya = (rng.random(size) < scipy_stats.norm.cdf(base + a)).astype(float)
    yb = (rng.random(size) < scipy_stats.norm.cdf(base + b)).astype(float)
    return ya, yb, [f"doc{d}" for d in np.repeat(np.arange(n_docs), TASKS_PER_DOCUMENT)]


def true_accuracy() -> float:
    """E Φ(μ + u), u ~ N(0, s²) = Φ(μ / √(1 + s²))."""
    return float(scipy_stats.norm.cdf(scipy_stats.norm.ppf(BASE) / np.sqrt(1 + SHARED ** 2 + INTERACTION ** 2)))


def form(scores: np.ndarray) -> clustered.RatioForm:
    found = clustered.form_of(metrics.mean(), scores[None, :], {"": np.arange(len(scores))})
    assert found is not None
    return found


def pair(ya: np.ndarray, yb: np.ndarray, labels: list[str], seed: int, n_boot: int = 200) -> pairwise.PairedDifference:
    design = clustered.Design.of(len(ya), labels)
    fa, fb = form(ya), form(yb)
    draws = clustered.bootstrap_draws({"a": fa, "b": fb}, design, n_boot=n_boot, seed=seed)
    found = pairwise.paired_difference("m", "A", "B", fa, fb, design, draws["a"], draws["b"], noun="document")
    return pairwise.with_holm([found])[0]


@pytest.mark.parametrize("n_docs", [1, 2, 3, 5, 10])
def test_equal_models_get_a_verdict_at_most_seven_percent_of_the_time(n_docs: int) -> None:
    rng = np.random.default_rng(100 + n_docs)
    datasets = 250
    said = [pair(*documents(rng, n_docs), seed=r).verdict for r in range(datasets)]
    ahead = sum(v is not None and v.endswith("ahead") for v in said) / datasets
    withheld = sum(v is not None and v.startswith("withheld") for v in said) / datasets
    assert ahead <= 0.07, (n_docs, ahead)
    if n_docs < smallsample.MIN_CLUSTERS:   # too few documents: no verdict, and the row says why
        assert withheld == 1.0 and said[0] == f"withheld: {n_docs} document{'s' if n_docs > 1 else ''} (at least 5 are needed)"


def test_a_real_difference_is_still_found_with_enough_documents() -> None:
    rng = np.random.default_rng(7)
    said = [pair(*documents(rng, 40, shift=-0.8), seed=r).verdict for r in range(40)]
    assert sum(v == "A ahead" for v in said) >= 30


def test_t_intervals_cover_at_ten_documents_and_the_bootstrap_is_marked_approximate() -> None:
    rng = np.random.default_rng(11)
    truth, datasets, covered = true_accuracy(), 300, {"mean": 0, "difference": 0}
    for r in range(datasets):
        ya, yb, labels = documents(rng, 10)
        design = clustered.Design.of(len(ya), labels)
        fa = form(ya)
        entry = clustered.small_sample(fa, design, clustered.uncertainty(fa, design), "document")
        t_ci = entry["t_ci"]
        assert t_ci["df"] == 9 and t_ci["approximate"] is True
        covered["mean"] += t_ci["low"] <= truth <= t_ci["high"]
        found = pair(ya, yb, labels, seed=r, n_boot=50)
        covered["difference"] += found.t_low <= 0 <= found.t_high
        assert found.note is not None and found.note.startswith("approximate bootstrap interval: 10 documents")
    share = {k: v / datasets for k, v in covered.items()}
    assert min(share.values()) >= 0.93, share


def test_t_interval_and_p_are_student_t_on_clusters_minus_strata() -> None:
    stratum = np.array([0, 0, 0, 1, 1, 1, 1])
    held = smallsample.support(stratum, np.ones(7, bool))
    assert (held.n_clusters, held.df, held.withheld) == (7, 5, None)
    assert smallsample.t_p(0.1, 0.04, 5) == pytest.approx(2 * scipy_stats.t.sf(2.5, 5))
    low, high = smallsample.t_interval(0.5, 0.1, 5)
    assert (low, high) == pytest.approx((0.5 - 0.1 * scipy_stats.t.ppf(0.975, 5), 0.5 + 0.1 * scipy_stats.t.ppf(0.975, 5)))
    lone = smallsample.support(np.array([0, 0, 0, 0, 0, 1]), np.ones(6, bool), "case")
    assert lone.df is None and lone.withheld == "withheld: a stratum holds a single case (its spread is unknown)"


def test_a_stratum_of_one_cluster_prints_no_cluster_interval() -> None:
    values = np.array([[1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]])
    strata = ["K=1"] * 10 + ["K=2"]
    labels = ["d1", "d1", "d2", "d2", "d3", "d3", "d4", "d4", "d5", "d5", "d6"]
    metric = metrics_mean()
    got = clustered.metric_uncertainty(values, [metric], strata=strata, clusters=labels, cluster_noun="document",
                                       n_boot=100, seed=0)["metrics"]["mean"]
    assert got["clustered_se"] is None
    assert got["cluster_ci"]["low"] is None and "single document" in got["cluster_ci"]["note"]


def metrics_mean():  # type: ignore[no-untyped-def]
    from evalnb.core.types import Metric

    return Metric("mean", "mean", metrics.mean())


def results(scores: np.ndarray, labels: list[str]):  # type: ignore[no-untyped-def]
    from evalnb.core.types import ItemResults

    ids = tuple(f"t{i}" for i in range(len(scores)))
    return ItemResults(ids, [list(scores)], dict(zip(ids, scores)), {i: "ok" for i in ids}, {i: True for i in ids},
                       clusters=dict(zip(ids, labels)))


@pytest.mark.parametrize(("n_docs", "shown"), [(3, "withheld"), (12, "approximate"), (40, None)])
def test_ranks_and_p_first_withheld_or_approximate_by_the_number_of_documents(n_docs: int, shown: str | None) -> None:
    from evalnb.comparison import joint

    rng = np.random.default_rng(n_docs)
    ya, yb, labels = documents(rng, n_docs)
    found = joint.joint_bootstrap(type("Bench", (), {"CLUSTER_NOUN": "document"}),
                                  [("A", results(ya, labels)), ("B", results(yb, labels))], [metrics_mean()],
                                  n_boot=200, seed=0)
    ranks = joint.ranks(found, "mean")
    plain = rank_summaries({k: found.forms[(k, "mean")].value() for k in "AB"},
                           {k: found.draws[(k, "mean")] for k in "AB"})
    for k in "AB":
        assert ranks[k].rank == plain[k].rank
        if shown == "withheld":
            assert ranks[k].p_first is None and ranks[k].interval_text == "withheld"
            assert ranks[k].note == "withheld: 3 documents (at least 5 are needed)"
        else:
            assert ranks[k].p_first == plain[k].p_first and ranks[k].interval_text == plain[k].interval_text
            assert (ranks[k].note is not None) == (shown == "approximate")


# --- scores near the bounds -------------------------------------------------------------------------

def test_wilson_is_statsmodels_wilson() -> None:
    for k, n in ((29, 30), (30, 30), (0, 10), (7, 12)):
        assert bounded.wilson(k / n, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)


def bounded_of(y: np.ndarray, labels: list[str] | None = None) -> dict:  # type: ignore[type-arg]
    design = clustered.Design.of(len(y), labels)
    f = form(y)
    return clustered.small_sample(f, design, clustered.uncertainty(f, design), "task")["bounded_ci"]


def test_wilson_on_the_effective_n_covers_at_095_with_30_items_where_the_percentile_does_not() -> None:
    """Coverage exactly, over every possible count k of 30 independent items (binomial weights),
    and the percentile bootstrap beside it by seeded simulation."""
    from evalnb.stats import intervals

    exact = 0.0
    for k in range(31):
        ci = bounded_of(np.array([1.0] * k + [0.0] * (30 - k)))
        assert ci["high"] > ci["low"]   # never of zero width, even where every item scored 1
        exact += scipy_stats.binom.pmf(k, 30, 0.95) * (ci["low"] <= 0.95 <= ci["high"])
    assert exact >= 0.93, exact
    rng = np.random.default_rng(5)
    datasets, percentile, zero_width = 300, 0, 0
    for r in range(datasets):
        boot = intervals.bootstrap_ci(list((rng.random(30) < 0.95).astype(float)), n_boot=200, seed=r)
        percentile += boot.low <= 0.95 <= boot.high
        zero_width += boot.low == boot.high
    assert percentile / datasets < 0.9 and zero_width > 0   # what the protocol's interval does here


def test_wilson_on_clustered_scores_near_the_bound_covers() -> None:
    """Ten documents of five tasks, accuracy about 0.95 with a document effect: the interval on
    the effective n (items / design effect) covers the closed-form truth."""
    rng = np.random.default_rng(9)
    mu, sd = scipy_stats.norm.ppf(0.95), 0.4
    truth = float(scipy_stats.norm.cdf(mu / np.sqrt(1 + sd ** 2)))
    labels = [f"d{i // 5}" for i in range(50)]
    datasets, covered = 400, 0
    for _ in range(datasets):
        y = (rng.random(50) < scipy_stats.norm.cdf(mu + np.repeat(rng.normal(0, sd, 10), 5))).astype(float)
        ci = bounded_of(y, labels)
        covered += ci["low"] <= truth <= ci["high"]
    assert covered / datasets >= 0.93, covered / datasets


def test_all_equal_scores_get_a_wilson_interval_on_the_clusters_and_no_mde() -> None:
    ones = np.ones(40)
    labels = [f"d{i // 4}" for i in range(40)]
    design = clustered.Design.of(40, labels)
    f = form(ones)
    found = clustered.uncertainty(f, design)
    entry = clustered.small_sample(f, design, found, "document")
    assert found.clustered_se == 0 and entry["bounded_ci"]["n_effective"] == 10
    assert entry["bounded_ci"]["low"] == pytest.approx(proportion_confint(10, 10, method="wilson")[0])
    from evalnb.stats import power

    assert power.mde(0.0) is None and power.mde(None) is None


# --- repeats ----------------------------------------------------------------------------------------

def test_whole_item_bootstrap_is_the_item_mean_bootstrap_and_covers_at_k3() -> None:
    """With ``resample_repeats=False`` a drawn item brings all its K answers: exactly the
    bootstrap of item means (numpy, from the recipe); over seeded datasets it covers the true
    mean near 95 %, while resampling the repeats again within items is wider than it."""
    from evalnb.stats import intervals

    rng = np.random.default_rng(21)
    n, k, datasets = 60, 3, 200
    covered, ratio = 0, []
    for r in range(datasets):
        quality = rng.beta(2, 2, n)   # true mean 0.5
        answers = (rng.random((k, n)) < quality).astype(float)
        got = intervals.interval_estimates(answers, {"m": lambda v, s: intervals.cell_mean(v)}, n_boot=300, seed=r,
                                           resample_repeats=False)["m"]
        again = intervals.interval_estimates(answers, {"m": lambda v, s: intervals.cell_mean(v)}, n_boot=300,
                                             seed=r)["m"]
        if r == 0:
            means = answers.mean(axis=0)
            draws = means[np.random.default_rng(0).integers(0, n, size=(300, n))].mean(axis=1)
            assert (got.low, got.high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])), abs=1e-12)
        covered += got.low <= 0.5 <= got.high
        assert got.low is not None and got.high is not None and again.low is not None and again.high is not None
        ratio.append((again.high - again.low) / (got.high - got.low))
    print({"coverage": covered / datasets, "width ratio": float(np.mean(ratio))})
    assert covered / datasets >= 0.93, covered / datasets
    assert np.mean(ratio) > 1.08, np.mean(ratio)


# --- the cluster interval beside the protocol's -------------------------------------------------------

def test_the_leaderboard_its_export_and_the_headline_show_the_cluster_interval_beside_the_protocols(
        tmp_path: Path) -> None:
    import json

    import statsmodels.api as sm

    import evalnb
    from evalnb.comparison.leaderboard import leaderboard_layout
    from evalnb.evidence.headline import headline_table
    from evalnb.stats import intervals
    from evalnb.views.tables import paper_view
    from tests.test_statistics_views import documented_runs

    runs = documented_runs(tmp_path, {"strong": 0.3, "weak": 0.0})
    cmp = evalnb.open_compare(runs, tmp_path / "cmp", n_boot=500, seed=2)
    board = evalnb.leaderboard(cmp)
    scores = np.array([t["score"] for t in json.loads((runs[0] / "scores.json").read_text())["tasks"]])
    # the protocol's interval exactly as before: the item bootstrap of the task scores
    protocol = intervals.bootstrap_ci(list(scores), n_boot=500, seed=2)
    assert (board.loc["strong", "all_tasks_ci_low"], board.loc["strong", "all_tasks_ci_high"]) == pytest.approx(
        (protocol.low, protocol.high), abs=1e-12)
    # beside it: the clustered SE (statsmodels' cluster-robust OLS) with t on 12 - 1 degrees of freedom
    fit = sm.OLS(scores, np.ones(48)).fit(cov_type="cluster", cov_kwds={"groups": np.repeat(np.arange(12), 4)})
    half = scipy_stats.t.ppf(0.975, 11) * float(fit.bse[0])
    assert (board.loc["strong", "all_tasks_cluster_low"], board.loc["strong", "all_tasks_cluster_high"]) == \
        pytest.approx((scores.mean() - half, scores.mean() + half))
    assert board.loc["strong", "all_tasks_clusters"] == 12
    shown = paper_view(board).frame
    assert any(c.endswith("cluster 95% CI") for c in shown.columns)
    evalnb.save_compare(cmp)
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())["tables"]["leaderboard"]
    import pandas as pd

    exported = paper_view(pd.DataFrame(saved), leaderboard_layout(cmp.benchmark, list(saved[0]))).frame
    assert any(c.endswith("cluster 95% CI") for c in exported.columns)
    headline = paper_view(headline_table(json.loads((runs[0] / "scores.json").read_text()))).frame
    assert "estimate [95% CI]" in headline.columns


# --- resolution -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("models", "n_boot"), [(10, 1000), (25, 10_000), (3, 10_000)])
def test_too_few_replicates_for_holm_is_said_with_how_many_are_needed(models: int, n_boot: int) -> None:
    from statsmodels.stats.multitest import multipletests

    m = models * (models - 1) // 2
    smallest = multipletests([2 / (n_boot + 1)] * m, method="holm")[1].min()   # every pair at the smallest p
    reason = pairwise.unresolvable(m, n_boot)
    assert (reason is not None) == (smallest >= 0.05)
    needed = pairwise.replicates_needed(m)
    assert multipletests([2 / (needed + 1)] * m, method="holm")[1].min() < 0.05
    from fractions import Fraction

    assert Fraction(2 * m, needed) >= Fraction(1, 20)   # one fewer is not enough (exactly: m · 2/(B + 1))
    if reason:
        assert reason == (f"withheld: {n_boot} resamples cannot resolve a Holm-adjusted p below 0.05 over {m} pairs "
                          f"(at least {needed} are needed)")
        strong = pairwise.PairedDifference("m", "A", "B", 0.3, 0.2, 0.4, 0.01, 0.01, 0.5, 2 / (n_boot + 1), 400, 40)
        assert pairwise.with_holm([strong] * m, n_boot=n_boot)[0].verdict == reason


def test_bootstrap_p_and_percentile_interval_agree_away_from_the_boundary() -> None:
    """The p-value inverts the percentile interval up to the +1 and the quantile's interpolation:
    they can disagree only when p lies within a few 1/(B + 1) of alpha (what the docs say)."""
    rng = np.random.default_rng(4)
    b, disagree, near = 200, 0, 0
    for _ in range(3000):
        replicates = rng.normal(rng.normal(0, 0.02), 0.01, b)
        p = pairwise.bootstrap_p(replicates)
        assert p is not None
        low, high = clustered.percentile_interval(replicates)
        assert low is not None and high is not None
        if (p < 0.05) != (low > 0 or high < 0):
            disagree += 1
            near += abs(p - 0.05) <= 4 / (b + 1)
    assert disagree == near


def test_p_first_is_overconfident_for_equal_models_as_the_docs_say() -> None:
    """Two models of equal true accuracy: each is first with probability 0.5, yet the observed
    leader's bootstrap P(first) averages well above it (the calibration limit the docs state)."""
    rng = np.random.default_rng(17)
    leaders = []
    for r in range(150):
        ya, yb, labels = documents(rng, 40)
        design = clustered.Design.of(len(ya), labels)
        fa, fb = form(ya), form(yb)
        draws = clustered.bootstrap_draws({"a": fa, "b": fb}, design, n_boot=200, seed=r)
        got = rank_summaries({"a": fa.value(), "b": fb.value()}, draws)
        leader = "a" if (fa.value() or 0) >= (fb.value() or 0) else "b"
        leaders.append(got[leader].p_first)
    print({"mean P(first) of the observed leader": float(np.mean(leaders))})
    assert 0.65 < float(np.mean(leaders)) < 0.9


# --- the planner ------------------------------------------------------------------------------------------

def test_the_planned_n_reaches_its_power() -> None:
    """Var(d) = 1/9 and δ = 0.03 plan 969 items (closed form); on 969 items with that difference,
    evalnb's verdict ("A ahead") comes out in 0.80 ± 0.02 of seeded datasets."""
    from evalnb.stats import power

    n = power.whole(power.items_needed(1 / 9, 0.03))
    rng = np.random.default_rng(23)
    datasets, found = 1000, 0
    for r in range(datasets):
        base = rng.random(n)
        a, b = base + 0.03 + rng.normal(0, 1 / 3, n), base
        design = clustered.Design.of(n)
        fa, fb = form(a), form(b)
        draws = clustered.bootstrap_draws({"a": fa, "b": fb}, design, n_boot=400, seed=r)
        said = pairwise.with_holm([pairwise.paired_difference("m", "A", "B", fa, fb, design, draws["a"], draws["b"])])
        found += said[0].verdict == "A ahead"
    print({"items": n, "power": found / datasets})
    assert abs(found / datasets - 0.8) <= 0.02, found / datasets


def test_the_pilots_spread_of_n_brackets_the_n_the_truth_needs() -> None:
    """Pilots of 150 items in 15 documents: the 10-90 % interval of N from each pilot's cluster
    bootstrap holds the N the true variance and design effect need in most pilots."""
    from evalnb.stats import plan_spread, power

    sd_doc, sd_item, m, c = 0.15, 0.3, 10, 15
    deff_true = 1 + (m - 1) * sd_doc ** 2 / (sd_doc ** 2 + sd_item ** 2)
    truth = power.items_needed(sd_doc ** 2 + sd_item ** 2, 0.05, design_effect=deff_true)
    rng = np.random.default_rng(29)
    pilots, inside, widths = 60, 0, []
    design = clustered.Design.of(m * c, [f"d{i // m}" for i in range(m * c)])
    for r in range(pilots):
        d = np.repeat(rng.normal(0, sd_doc, c), m) + rng.normal(0, sd_item, m * c)
        f = form(d)
        spread = plan_spread.items_spread(f.influence(), f.used(), design, 0.05, 0.05, 0.8, n_boot=200, seed=r)
        assert spread is not None and spread[0] <= spread[1]
        inside += spread[0] <= truth <= spread[1]
        widths.append(spread[1] / spread[0])
    print({"truth": truth, "inside": inside / pilots, "median 90/10 ratio": float(np.median(widths))})
    assert inside / pilots >= 0.6


def test_a_design_effect_below_one_is_floored_and_few_clusters_flagged() -> None:
    from evalnb.stats import plan_spread

    assert plan_spread.floored_design_effect(0.75, 10) == (
        1.0, "design effect 0.75 floored at 1; design effect from 10 clusters (under 30): approximate")
    assert plan_spread.floored_design_effect(1.4, 40) == (1.4, None)


# --- the judges' studies -----------------------------------------------------------------------------------

def judge_verdicts(rng: np.random.Generator, n: int) -> np.ndarray:
    truth = rng.beta(2, 2, n)
    return np.round(np.clip(truth[:, None] + rng.normal(0, 0.15, (n, 3)), 0, 1), 1)


def test_alpha_interval_covers_from_its_threshold_and_is_labelled_below_it() -> None:
    import krippendorff

    from evalnb.stats import reliability

    rng = np.random.default_rng(0)
    truth = krippendorff.alpha(reliability_data=judge_verdicts(rng, 20_000).T, level_of_measurement="interval")
    share = {}
    for n in (30, reliability.ALPHA_APPROXIMATE_BELOW):
        covered = 0
        for r in range(200):
            got = reliability.alpha_interval(judge_verdicts(rng, n), n_boot=400, seed=r)
            covered += got.low <= truth <= got.high
        share[n] = covered / 200
    print(share)
    assert share[reliability.ALPHA_APPROXIMATE_BELOW] >= 0.93 and share[30] < 0.93, share
    assert reliability.alpha_note(30) == "approximate interval: 30 resampled units (under 100)"
    assert reliability.alpha_note(100) is None and reliability.retest_note(20) is not None


def test_a_zero_width_protocol_interval_is_shown_with_its_reason(tmp_path: Path) -> None:
    import evalnb
    from evalnb.evidence.headline import headline_table
    from tests.test_compare import constructed_run

    runs = [constructed_run(tmp_path, name, {f"t{i}": value for i in range(12)}) for name, value in
            (("perfect", 1.0), ("half", 0.5))]
    cmp = evalnb.open_compare(runs, tmp_path / "cmp", n_boot=200, seed=0)
    board = evalnb.leaderboard(cmp)
    assert board.loc["perfect", "all_tasks_ci_low"] == board.loc["perfect", "all_tasks_ci_high"] == 1.0
    assert "zero-width interval" in board.loc["perfect", "note"]
    # near the bound (and 12 items): Wilson's interval beside the protocol's, on the 12 items (statsmodels)
    assert (board.loc["perfect", "all_tasks_wilson_low"], board.loc["perfect", "all_tasks_wilson_high"]) == \
        pytest.approx(proportion_confint(12, 12, method="wilson"))
    from evalnb.views.tables import paper_view

    assert any(c.endswith("Wilson 95% CI") for c in paper_view(board).frame.columns)
    scores = {"metrics": {"all_tasks": {"label": "all tasks", "headline": True, "value": 1.0, "n": 12,
                                        "ci": {"low": 1.0, "high": 1.0, "n": 12}}}}
    assert "zero-width interval" in headline_table(scores).loc["all_tasks", "note"]


def test_runs_resampled_by_one_set_of_draws_get_exactly_their_own_intervals() -> None:
    """The protocol's bootstrap of several runs on one task set draws the replicates once: each
    run's intervals are equal, to the bit, to those it gets alone (scores, NaN cells, repeats,
    strata, a channel)."""
    from evalnb.core.types import Metric
    from evalnb.stats import intervals

    rng = np.random.default_rng(13)
    declared = [Metric("all", "all", metrics.mean(missing="zero")), Metric("scored", "scored", metrics.mean()),
                Metric("macro", "macro", metrics.macro_mean()), Metric("share", "share", metrics.share_scored()),
                Metric("n", "n", metrics.count_scored(), interval=False)]
    strata = [f"K={i % 3}" for i in range(90)]
    for repeats, whole in ((1, True), (3, True), (3, False)):
        runs = []
        for _ in range(4):
            v = rng.random((repeats, 90))
            v[rng.random(v.shape) < 0.15] = np.nan
            runs.append((v, {"extra": rng.random((repeats, 90))}))
        together = intervals.metric_intervals_many(runs, declared, strata=strata, n_boot=700, seed=5,
                                                   resample_repeats=whole)
        alone = [intervals.metric_intervals(v, declared, strata=strata, n_boot=700, seed=5, channels=c,
                                            resample_repeats=whole) for v, c in runs]
        assert together == alone
