"""The judges' numbers against independent computations: the ``krippendorff`` package, scipy
(spearmanr, kendalltau, linregress), statsmodels' one-way ANOVA, and hand-made data."""

from __future__ import annotations

from pathlib import Path

import krippendorff
import numpy as np
import pytest
from scipy import stats as scipy_stats

from evalnb.stats import judge_bias, reliability


def panel(seed: int, items: int = 40, judges: int = 3, missing: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 1, size=(items, 1))
    data = np.clip(truth + rng.normal(0, 0.15, size=(items, judges)) + [0.0, 0.1, -0.05][:judges], 0, 1)
    data[rng.uniform(size=data.shape) < missing] = np.nan
    return np.round(data, 2)   # the package is slow on many distinct values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alpha_matches_the_krippendorff_package(seed: int) -> None:
    data = panel(seed)
    expected = krippendorff.alpha(reliability_data=data.T, level_of_measurement="interval")
    assert reliability.krippendorff_alpha(data) == pytest.approx(expected, abs=1e-12)


def test_one_replicate_is_alpha_of_the_resampled_data() -> None:
    """The weighted form on a replicate equals the package on the rows that replicate drew."""
    data = panel(3)
    clusters = [i // 3 for i in range(len(data))]   # and with clusters of three items
    for labels in (None, clusters):
        rs = reliability.resample(len(data), 5, seed=7, clusters=labels)
        alphas = reliability.alpha_weighted(data, rs)
        for w, alpha in zip(rs.item_weights(), alphas):
            expanded = np.repeat(data, w.astype(int), axis=0)
            expected = krippendorff.alpha(reliability_data=expanded.T, level_of_measurement="interval")
            assert alpha == pytest.approx(expected, abs=1e-12)


def test_cluster_weights_draw_whole_clusters() -> None:
    clusters = ["d1", "d1", "d2", "d3", "d3", "d3"]
    weights = reliability.resample(6, 200, seed=0, clusters=clusters).item_weights()
    assert (weights[:, 0] == weights[:, 1]).all() and (weights[:, 3] == weights[:, 5]).all()
    per_cluster = weights[:, [0, 2, 3]]
    assert (per_cluster.sum(axis=1) == 3).all()   # as many draws as clusters


def test_alpha_interval_covers_and_is_seeded() -> None:
    data = panel(4, items=80)
    a = reliability.alpha_interval(data, n_boot=2000, seed=1)
    b = reliability.alpha_interval(data, n_boot=2000, seed=1)
    assert a == b and a.low < a.mean < a.high


def test_offsets_by_hand() -> None:
    data = np.array([[0.2, 0.4, 0.6], [1.0, 0.5, 0.0], [0.5, np.nan, 0.5]])
    offsets = reliability.judge_offsets(data, n_boot=500, seed=0)
    # rows 1 and 2 only (row 3 lacks a verdict): deviations (-0.2, 0, 0.2) and (0.5, 0, -0.5)
    assert [o.mean for o in offsets] == pytest.approx([0.15, 0.0, -0.15])
    assert all(o.n == 2 for o in offsets)


def test_retest_components_match_statsmodels_anova() -> None:
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(5)
    verdicts = rng.uniform(0, 1, size=(25, 1)) + rng.normal(0, 0.1, size=(25, 4))
    verdicts[3, 2] = verdicts[7, 0] = np.nan   # unbalanced
    long = pd.DataFrame([(i, v) for i, row in enumerate(verdicts) for v in row if not np.isnan(v)],
                        columns=["answer", "y"])
    table = anova_lm(smf.ols("y ~ C(answer)", data=long).fit())
    msw, msb = table.loc["Residual", "mean_sq"], table.loc["C(answer)", "mean_sq"]
    counts = long.groupby("answer").size().to_numpy()
    k0 = (counts.sum() - (counts ** 2).sum() / counts.sum()) / (len(counts) - 1)
    out = reliability.retest(verdicts, n_boot=500, seed=0)
    assert out["retest_sd"].mean == pytest.approx(np.sqrt(msw), rel=1e-10)
    between = (msb - msw) / k0
    assert out["noise_share"].mean == pytest.approx(msw / (msw + between), rel=1e-10)


def test_retest_recovers_a_known_noise_in_simulation() -> None:
    rng = np.random.default_rng(11)
    verdicts = rng.uniform(0, 1, size=(300, 1)) + rng.normal(0, 0.08, size=(300, 3))
    out = reliability.retest(verdicts, n_boot=1000, seed=0)
    assert out["retest_sd"].low < 0.08 < out["retest_sd"].high
    true_share = 0.08 ** 2 / (0.08 ** 2 + 1 / 12)
    assert out["noise_share"].low < true_share < out["noise_share"].high


def test_kendall_tau_b_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        a, b = rng.integers(0, 4, size=7).astype(float), rng.integers(0, 4, size=7).astype(float)
        expected = scipy_stats.kendalltau(a, b).statistic
        got = reliability.kendall_tau_b(a, b)
        assert (np.isnan(expected) and np.isnan(got)) or got == pytest.approx(expected, abs=1e-12)


def test_weighted_ranks_and_spearman_match_scipy_on_the_expanded_sample() -> None:
    rng = np.random.default_rng(8)
    scores = rng.integers(0, 5, size=30) / 4   # ties
    lengths = rng.integers(100, 3000, size=30).astype(float)
    weights = reliability.resample(30, 4, seed=3).item_weights()
    ranks = judge_bias.weighted_ranks(scores, weights)
    for w, r in zip(weights, ranks):
        keep = w > 0
        expanded = np.repeat(scores, w.astype(int))
        expected = scipy_stats.rankdata(expanded)
        assert np.repeat(r, w.astype(int)) == pytest.approx(expected)
        assert keep.any()
    out = judge_bias.length_bias(scores, lengths, n_boot=500, seed=0)
    assert out["spearman_rho"].mean == pytest.approx(scipy_stats.spearmanr(scores, lengths).statistic, abs=1e-12)
    assert out["slope_per_log_char"].mean == pytest.approx(
        scipy_stats.linregress(np.log(lengths), scores).slope, abs=1e-12)


def test_length_bias_detected_where_built_in_and_not_elsewhere() -> None:
    rng = np.random.default_rng(4)
    lengths = rng.uniform(200, 5000, size=200)
    biased = np.clip(0.1 * np.log(lengths) + rng.normal(0, 0.1, 200) - 0.3, 0, 1)
    fair = rng.uniform(0, 1, 200)
    assert judge_bias.length_bias(biased, lengths, n_boot=1000, seed=0)["spearman_rho"].low > 0
    rho = judge_bias.length_bias(fair, lengths, n_boot=1000, seed=0)["spearman_rho"]
    assert rho.low < 0 < rho.high


def test_self_preference_by_hand() -> None:
    own = np.array([0.3, 0.1, 0.2, np.nan])
    others = np.array([[0.0, 0.1, -0.1, 0.0], [0.1, np.nan, 0.0, -0.1]])
    out = judge_bias.self_preference(own, others, n_boot=500, seed=0)
    assert out["own_family_gap"].mean == pytest.approx(0.2)
    assert out["other_contestants_gap"].mean == pytest.approx(0.0)
    assert out["self_preference"].mean == pytest.approx(0.2)


def test_self_preference_false_detection_rate_near_five_percent() -> None:
    """No bonus: over 300 simulated panels the 95 % paired interval excludes 0 about 5 % of the
    time (a little more: the percentile bootstrap undercovers slightly at 60 items, about 7 % over
    1,000 panels; 300 panels add a Monte Carlo s.d. of 1.5 points); with a bonus of 0.05 (noise
    s.d. 0.05 per verdict) nearly always."""
    rng = np.random.default_rng(0)

    def detected(bonus: float) -> bool:
        truth = rng.uniform(0, 1, size=(3, 60, 1))
        verdicts = truth + rng.normal(0, 0.05, size=(3, 60, 3))
        verdicts[0, :, 2] += bonus
        gaps = verdicts[:, :, 2] - verdicts[:, :, :2].mean(axis=2)
        out = judge_bias.self_preference(gaps[0], gaps[1:], n_boot=400, seed=int(rng.integers(1 << 30)))
        return bool(out["self_preference"].low > 0 or out["self_preference"].high < 0)
    false_rate = np.mean([detected(0.0) for _ in range(300)])
    assert 0.01 <= false_rate <= 0.12
    assert np.mean([detected(0.05) for _ in range(50)]) >= 0.95


@pytest.mark.parametrize("matrix, alpha", [
    (np.full((5, 3), 0.5), None), (np.array([[0.2, 0.4, 0.6]]), 0.0), (np.zeros((0, 3)), None),
    (np.array([[0.1, np.nan, np.nan], [np.nan, 0.3, np.nan]]), None)])
def test_degenerate_panels_give_no_number_and_no_error(matrix: np.ndarray, alpha: float | None) -> None:
    """No variation, no item, no item with two verdicts: alpha is undefined (None; the package
    refuses such data); one item: 0, as the package says."""
    a = reliability.alpha_interval(matrix, n_boot=50, seed=0)
    assert a.mean == alpha
    reliability.judge_offsets(matrix, n_boot=50, seed=0)
    reliability.retest(matrix, n_boot=50, seed=0)
    judge_bias.length_bias(matrix[:, 0], np.arange(1, len(matrix) + 1) * 100.0, n_boot=50, seed=0)
    judge_bias.self_preference(matrix[:, 0], matrix[:, 1:].T, n_boot=50, seed=0)


def test_a_runs_judge_statistics_in_scores_json_and_the_report(tmp_path: Path) -> None:
    """The aggregate stage's judge_statistics, against the package and scipy on the verdicts
    and responses the run recorded; the protocol's own numbers beside them untouched."""
    import json

    import evalnb
    from evalnb.pipeline.retest_study import run_length_bias, run_reliability
    from tests.conftest import offline_params

    run = evalnb.open_run(offline_params(tmp_path))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    rows = [t for t in scores["tasks"] if t["judges"]]
    verdicts = np.array([[j["score"] for j in t["judges"]] for t in rows])
    section = scores["judge_statistics"]
    assert section["alpha"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=verdicts.T, level_of_measurement="interval"), abs=1e-12)
    assert section["alpha"]["low"] <= section["alpha"]["value"] <= section["alpha"]["high"]
    lengths = {r["task_id"]: len(r["response"]) for r in json.loads(run.path("responses.json").read_text())["records"]
               if r["status"] == "ok"}
    first = section["length"]["judge1 rubric-overlap"]["spearman_rho"]["value"]
    assert first == pytest.approx(scipy_stats.spearmanr(verdicts[:, 0], [lengths[t["task_id"]] for t in rows]).statistic)
    assert list(run_reliability(run).index.get_level_values("judge")) == ["panel", *section["offsets"]]
    assert section["alpha"]["note"].startswith("approximate interval: ")   # a sample run: under 100 units
    assert run_reliability(run).loc[("Krippendorff's alpha (interval)", "panel"), "note"] == section["alpha"]["note"]
    assert len(run_length_bias(run)) == 3
    assert "judge_retest" not in scores   # no study asked for
