"""Prediction-powered estimates and agreement with reference labels, each checked against an
independent computation: ``ppi_py`` (the authors' package) without clusters, statsmodels'
cluster-robust OLS on a constant, scipy, scikit-learn, the ``krippendorff`` package, and a
seeded simulation for coverage."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
import statsmodels.api as sm
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from evalnb.stats import ppi
from evalnb.stats.reference import agreement, raters_alpha


def _sample(rng: np.random.Generator, n_items: int = 600, labelled: float = 0.15,
            clusters: int | None = None) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """Judge scores on every item, reference scores on a random share (NaN elsewhere)."""
    if clusters is None:
        y = rng.normal(0.6, 0.25, n_items)
        groups = None
    else:
        doc = rng.integers(0, clusters, n_items)
        y = rng.normal(0.6, 0.12, clusters)[doc] + rng.normal(0, 0.2, n_items)
        groups = [f"d{d}" for d in doc]
    f = 0.8 * y + 0.2 + rng.normal(0, 0.1, n_items)   # a biased, noisy judge
    reference = np.where(rng.random(n_items) < labelled, y, np.nan)
    return f, reference, groups


@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_unclustered_estimate_and_interval_equal_ppi_py(lam: float | None) -> None:
    f, y, _ = _sample(np.random.default_rng(7))
    have = ~np.isnan(y)
    ours = ppi.ppi_mean(f, y, lam=lam)
    point = ppi_mean_pointestimate(y[have], f[have], f[~have], lam=lam)
    low, high = ppi_mean_ci(y[have], f[have], f[~have], alpha=0.05, lam=lam)
    assert ours.value == pytest.approx(float(np.squeeze(point)), abs=1e-6)
    assert ours.ci_low == pytest.approx(float(np.squeeze(low)), abs=1e-6)
    assert ours.ci_high == pytest.approx(float(np.squeeze(high)), abs=1e-6)
    if lam is None:
        assert 0 < ours.lam[0] <= 1


def test_labels_only_with_clusters_is_statsmodels_cluster_robust_mean() -> None:
    f, y, groups = _sample(np.random.default_rng(3), n_items=900, labelled=0.3, clusters=40)
    assert groups is not None
    have = ~np.isnan(y)
    ours = ppi.labels_only(f, y, clusters=groups)
    labelled_groups = np.asarray(groups)[have]
    fit = sm.OLS(y[have], np.ones(int(have.sum()))).fit(
        cov_type="cluster", cov_kwds={"groups": np.unique(labelled_groups, return_inverse=True)[1],
                                      "use_correction": False})
    c = len(set(labelled_groups))
    assert ours.n_clusters == c
    assert ours.value == pytest.approx(float(fit.params[0]), abs=1e-12)
    # statsmodels without its correction is Σ_c (Ψ_c)² exactly; evalnb adds C/(C − 1)
    assert ours.se == pytest.approx(float(fit.bse[0]) * np.sqrt(c / (c - 1)), rel=1e-10)
    half = sps.t.ppf(0.975, c - 1) * ours.se
    assert ours.ci_high - ours.ci_low == pytest.approx(2 * half, rel=1e-12)


def test_ppi_with_clusters_is_the_cluster_robust_variance_of_its_two_means() -> None:
    """An independent form of the same variance: the estimate is λ·mean_U(f) + mean_L(Y − λf);
    its cluster-robust variance from per-cluster sums of each part's deviations, written out."""
    f, y, groups = _sample(np.random.default_rng(11), n_items=800, labelled=0.2, clusters=30)
    assert groups is not None
    est = ppi.ppi_mean(f, y, clusters=groups, lam=0.7)
    have = ~np.isnan(y)
    g = np.asarray(groups)
    rect = y[have] - 0.7 * f[have]
    totals: dict[str, float] = {}
    for gi, r in zip(g[have], rect):
        totals[gi] = totals.get(gi, 0.0) + (r - rect.mean()) / have.sum()
    for gi, v in zip(g[~have], f[~have]):
        totals[gi] = totals.get(gi, 0.0) + 0.7 * (v - f[~have].mean()) / (~have).sum()
    t = np.asarray(list(totals.values()))
    c = len(t)
    assert est.value == pytest.approx(0.7 * f[~have].mean() + rect.mean(), abs=1e-12)
    assert est.se == pytest.approx(np.sqrt(c / (c - 1) * ((t - t.mean()) ** 2).sum()), rel=1e-10)


def test_stratified_labelling_weights_each_stratum_by_its_size() -> None:
    rng = np.random.default_rng(5)
    n = 1000
    stratum = np.where(np.arange(n) < 700, "easy", "hard")
    y = np.where(stratum == "easy", rng.normal(0.8, 0.1, n), rng.normal(0.3, 0.2, n))
    f = y + np.where(stratum == "easy", 0.05, 0.2) + rng.normal(0, 0.05, n)
    rate = np.where(stratum == "easy", 0.05, 0.3)   # the hard items labelled six times as often
    ref = np.where(rng.random(n) < rate, y, np.nan)
    est = ppi.ppi_mean(f, ref, strata=list(stratum))
    parts = []
    for h, share in (("easy", 0.7), ("hard", 0.3)):
        m = stratum == h
        have = m & ~np.isnan(ref)
        parts.append(share * float(np.squeeze(ppi_mean_pointestimate(ref[have], f[have], f[m & np.isnan(ref)]))))
    assert est.value == pytest.approx(sum(parts), abs=1e-6)
    naive = ppi.ppi_mean(f, ref)   # one stratum: overweights the hard items' labels
    assert abs(est.value - y.mean()) < abs(naive.value - y.mean())


def _coverage(replicates: int, *, stratified: bool) -> dict[str, float]:
    """Share of seeded datasets whose interval covers the true mean 0.6, and mean widths."""
    rng = np.random.default_rng(20261203)
    hits = {"ppi": 0, "labels": 0, "judge": 0}
    widths = {"ppi": 0.0, "labels": 0.0}
    for _ in range(replicates):
        n, docs = 1200, 60
        doc = rng.integers(0, docs, n)
        y = 0.6 + rng.normal(0, 0.1, docs)[doc] + rng.normal(0, 0.2, n)
        f = 0.8 * y + 0.2 + rng.normal(0, 0.08, n)            # bias 0.08 at the mean
        groups = [str(d) for d in doc]
        strata = None
        if stratified:
            strata = ["a" if d < docs // 2 else "b" for d in doc]
            rate = np.where(doc < docs // 2, 0.05, 0.15)
        else:
            rate = np.full(n, 0.10)
        ref = np.where(rng.random(n) < rate, y, np.nan)
        for name, est in (("ppi", ppi.ppi_mean(f, ref, clusters=groups, strata=strata)),
                          ("labels", ppi.labels_only(f, ref, clusters=groups, strata=strata)),
                          ("judge", ppi.judge_only(f, ref, clusters=groups))):
            assert est.ci_low is not None and est.ci_high is not None
            hits[name] += est.ci_low <= 0.6 <= est.ci_high
            if name in widths:
                widths[name] += (est.ci_high - est.ci_low) / replicates
    return {**{k: v / replicates for k, v in hits.items()}, **{f"width_{k}": v for k, v in widths.items()}}


@pytest.mark.parametrize("stratified", [False, True], ids=["random 10%", "stratified 5%/15%"])
def test_ppi_interval_covers_where_the_judge_alone_does_not(stratified: bool) -> None:
    seen = _coverage(300, stratified=stratified)
    print(f"coverage over 300 seeded datasets (60 documents, 1200 items): {seen}")
    assert 0.93 <= seen["ppi"] <= 0.97
    assert seen["judge"] < 0.5                      # the judge's bias is outside its own interval
    assert seen["width_ppi"] < seen["width_labels"]  # the judge correlates with the reference


def test_labels_needed_reaches_the_width_it_promises() -> None:
    rng = np.random.default_rng(9)
    plan = ppi.labels_needed(0.03, sd_reference=0.25, rho=0.8, n_items=5000)
    assert plan["labels_only"] == int(np.ceil((0.25 * sps.norm.ppf(0.975) / 0.03) ** 2))
    assert plan["ppi"] is not None and plan["ppi"] < plan["labels_only"]
    widths = []
    for _ in range(200):   # realised half-width at the planned n, judge with that correlation
        y = rng.normal(0.5, 0.25, 5000)
        f = 0.8 * y + rng.normal(0, 0.25 * 0.6, 5000)   # corr(y, f) = 0.8
        ref = np.full(5000, np.nan)
        chosen = rng.choice(5000, plan["ppi"], replace=False)
        ref[chosen] = y[chosen]
        est = ppi.ppi_mean(f, ref)
        widths.append((est.ci_high - est.ci_low) / 2)
    assert np.mean(widths) == pytest.approx(0.03, rel=0.05)


def test_agreement_equals_independent_computations() -> None:
    rng = np.random.default_rng(2)
    ref = rng.integers(0, 3, 150).astype(float)
    judge = np.clip(ref + rng.choice([-1, 0, 0, 0, 1], 150), 0, 2)
    judge[:5] = np.nan                       # items the judge did not score are left out
    seen = agreement(judge, ref, levels=[0, 1, 2])
    both = ~np.isnan(judge)
    f, y = judge[both], ref[both]
    assert seen.n == both.sum()
    assert seen.bias.value == pytest.approx((f - y).mean(), abs=1e-12)
    assert seen.mean_abs_diff == pytest.approx(np.abs(f - y).mean(), abs=1e-12)
    assert seen.pearson_r == pytest.approx(np.corrcoef(f, y)[0, 1], abs=1e-12)
    assert seen.spearman_rho == pytest.approx(np.corrcoef(sps.rankdata(f), sps.rankdata(y))[0, 1], abs=1e-12)
    assert seen.alpha == pytest.approx(krippendorff.alpha(np.vstack([y, f]), level_of_measurement="interval"),
                                       abs=1e-12)
    assert np.array_equal(np.asarray(seen.confusion), confusion_matrix(y, f, labels=[0, 1, 2]))
    assert seen.kappa_quadratic == pytest.approx(cohen_kappa_score(y, f, weights="quadratic"), abs=1e-12)
    half = sps.norm.ppf(0.975) * np.std(f - y) / np.sqrt(len(f))
    assert seen.bias.ci_high - seen.bias.ci_low == pytest.approx(2 * half, rel=1e-10)


def test_raters_alpha_is_krippendorffs_and_off_scale_scores_are_refused() -> None:
    rng = np.random.default_rng(4)
    matrix = rng.integers(0, 3, (40, 3)).astype(float)
    matrix[rng.random((40, 3)) < 0.2] = np.nan
    assert raters_alpha(matrix) == pytest.approx(krippendorff.alpha(matrix.T, level_of_measurement="interval"),
                                                 abs=1e-12)
    with pytest.raises(ValueError, match=r"not among the scale's levels"):
        agreement([0, 1, 3], [0, 1, 2], levels=[0, 1, 2])


def test_a_difference_between_models_counts_a_shared_document_once() -> None:
    rng = np.random.default_rng(8)
    f_a, y_a, groups = _sample(rng, n_items=600, labelled=0.2, clusters=25)
    f_b = f_a - 0.05 + rng.normal(0, 0.05, 600)
    y_b = np.where(np.isnan(y_a), np.nan, y_a - 0.05)
    assert groups is not None
    a = ppi.ppi_mean(f_a, y_a, clusters=groups, lam=1.0)
    b = ppi.ppi_mean(f_b, y_b, clusters=groups, lam=1.0)
    d = ppi.difference(a, b, groups, groups, clustered=True)
    # the same as one estimate over ψ_A − ψ_B on the shared documents
    per_doc: dict[str, float] = {}
    for g, psi in zip(groups * 2, np.concatenate([a.influence, -b.influence])):
        per_doc[g] = per_doc.get(g, 0.0) + psi
    t = np.asarray(list(per_doc.values()))
    assert d.value == pytest.approx(a.value - b.value, abs=1e-12)
    assert d.se == pytest.approx(np.sqrt(len(t) / (len(t) - 1) * ((t - t.mean()) ** 2).sum()), rel=1e-10)
    assert d.se < np.hypot(a.se, b.se)   # the models share documents: pairing narrows it
    assert ppi.p_value(d) == pytest.approx(2 * sps.t.sf(abs(d.value / d.se), len(t) - 1), rel=1e-12)
