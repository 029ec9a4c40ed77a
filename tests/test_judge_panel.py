"""The judges across compared runs, on hand-made WildTrace records: reliability against the
krippendorff package, leave-one-judge-out against scipy's kendalltau and a hand count, and
self-preference detected on a panel whose judge favours its own family's answers (and not
on one whose judge does not)."""

from __future__ import annotations

import json
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from scipy import stats as scipy_stats

from evalnb.core.errors import ConfigError, FingerprintMismatch
from evalnb.comparison.compare import open_compare
from evalnb.comparison.leaderboard import leaderboard
from evalnb.judges.bias import length_bias, self_preference
from evalnb.judges.panel import leave_one_judge_out, panel_reliability
from evalnb.judges.panel_change import panel_change
from tests.conftest import SAMPLE

PARTS = ("prompts", "caps_table", "judge_panel", "aggregation", "retry", "tasks")
JUDGES = ("m1", "m2", "m3")


def judged_run(root: Path, name: str, verdicts: np.ndarray, *, family: str | None = None,
               judge_families: tuple[str | None, ...] = (None, None, None), lengths: list[int] | None = None,
               panel: str = "p") -> Path:
    """A finished WildTrace run written by hand: every task ok, scored by three judges."""
    run = root / name
    run.mkdir(parents=True)
    ids = [f"t{i}" for i in range(len(verdicts))]
    tasks = [{"task_id": t, "status": "ok", "score": float(np.mean(v)),
              "judges": [{"judge": f"judge{j + 1}", "model": JUDGES[j], "score": float(s), "total": float(s) * 100,
                          "reply": "{}"} for j, s in enumerate(v)]}
             for t, v in zip(ids, verdicts)]
    config = {"model": {"provider": "openai", "name": name, **({"family": family} if family else {})},
              "judges": [{"provider": "openai", "name": m, **({"family": f} if f else {})}
                         for m, f in zip(JUDGES, judge_families)], "data": str(SAMPLE / "tasks.json")}
    (run / "scores.json").write_text(json.dumps({
        "benchmark": "wildtrace", "run_name": name, "offline": False, "complete": True, "n_tasks": len(tasks),
        "tasks": tasks, "config": config}))
    (run / "fingerprint.json").write_text(json.dumps({"sha256": name, "parts": {
        p: {"sha256": panel if p == "judge_panel" else p, "value": p} for p in PARTS}}))
    if lengths is not None:
        (run / "responses.json").write_text(json.dumps({"records": [
            {"task_id": t, "status": "ok", "response": "x" * n} for t, n in zip(ids, lengths)]}))
    return run


def panel_verdicts(seed: int, quality: float, bonus: float = 0.0, items: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = np.clip(rng.normal(quality, 0.2, size=(items, 1)), 0, 1)
    verdicts = np.clip(truth + rng.normal(0, 0.05, size=(items, 3)), 0, 1)
    verdicts[:, 2] = np.clip(verdicts[:, 2] + bonus, 0, 1)
    # to the hundredth, as judges' totals over rubric points are (and the package, which builds a
    # values x values matrix, takes seconds on 540 distinct floats)
    return np.round(verdicts, 2)


def three_models(tmp_path: Path, bonus: float, seed: int = 0) -> list[Path]:
    """Contestant a is of judge3's family; judge3 adds ``bonus`` to a's answers only. (A 95 %
    interval excludes 0 on 5 % of panels without a bonus: test_judge_stats checks that rate
    by simulation; the seed here is one of the 95 %.)"""
    fam = (None, None, "anthropic")
    return [judged_run(tmp_path, "a", panel_verdicts(seed, 0.6, bonus), family="anthropic", judge_families=fam),
            judged_run(tmp_path, "b", panel_verdicts(seed + 1, 0.5), family="qwen", judge_families=fam),
            judged_run(tmp_path, "c", panel_verdicts(seed + 2, 0.4), judge_families=fam)]


@pytest.mark.parametrize("bonus, detected", [(0.15, True), (0.0, False)])
def test_self_preference_detected_only_where_the_judge_favours_its_family(tmp_path: Path, bonus: float,
                                                                          detected: bool) -> None:
    cmp = open_compare(three_models(tmp_path, bonus, seed=10), tmp_path / "cmp", n_boot=2000)
    self_preference(cmp)
    table = cmp.tables["self_preference"]
    assert list(zip(table.judge, table.contestant)) == [("judge3 m3", "a")]
    row = table.iloc[0]
    excludes_zero = bool(row.self_preference_low > 0 or row.self_preference_high < 0)
    assert excludes_zero is detected
    if detected:   # the bonus, recovered (a little less where a verdict was clipped at 1)
        assert row.self_preference == pytest.approx(0.15, abs=0.03)


def test_no_self_preference_without_families(tmp_path: Path) -> None:
    runs = [judged_run(tmp_path, n, panel_verdicts(i, 0.5)) for i, n in enumerate("ab")]
    assert self_preference(open_compare(runs, tmp_path / "cmp", n_boot=200)) is None


def test_reliability_against_the_krippendorff_package(tmp_path: Path) -> None:
    runs = three_models(tmp_path, 0.0)
    cmp = open_compare(runs, tmp_path / "cmp", n_boot=500)
    panel_reliability(cmp)
    table = cmp.tables["judge_reliability"].set_index(["model", "judge", "number"])
    every = np.vstack([panel_verdicts(s, q) for s, q in ((0, 0.6), (1, 0.5), (2, 0.4))])
    expected = krippendorff.alpha(reliability_data=every.T, level_of_measurement="interval")
    assert table.loc[("pooled", "panel", "alpha"), "estimate"] == pytest.approx(expected, abs=1e-12)
    one = panel_verdicts(1, 0.5)
    assert table.loc[("b", "panel", "alpha"), "estimate"] == pytest.approx(
        krippendorff.alpha(reliability_data=one.T, level_of_measurement="interval"), abs=1e-12)
    assert table.loc[("b", "judge1 m1", "offset"), "estimate"] == pytest.approx(
        np.mean(one[:, 0] - one.mean(axis=1)), abs=1e-12)


def test_leave_one_judge_out_by_hand(tmp_path: Path) -> None:
    """judge3 alone ranks c first; without it the order is a, b, c."""
    v = {"a": [[0.9, 0.9, 0.1]], "b": [[0.6, 0.6, 0.5]], "c": [[0.2, 0.2, 1.0]]}
    runs = [judged_run(tmp_path, n, np.array(x * 4)) for n, x in v.items()]
    cmp = open_compare(runs, tmp_path / "cmp", n_boot=200)
    leaderboard(cmp)
    leave_one_judge_out(cmp)
    table = cmp.tables["leave_one_judge_out"].set_index(["without", "model"])
    full = {n: np.mean(x[0]) for n, x in v.items()}                  # a .633, b .567, c .467
    without3 = {n: np.mean(x[0][:2]) for n, x in v.items()}          # a .9, b .6, c .2
    without1 = {n: np.mean(x[0][1:]) for n, x in v.items()}          # a .5, b .55, c .6
    for n in v:
        assert table.loc[("judge3 m3", n), "score_without"] == pytest.approx(without3[n])
        assert table.loc[("judge1 m1", n), "score_full"] == pytest.approx(full[n])
    models = list(v)
    tau1 = scipy_stats.kendalltau([full[n] for n in models], [without1[n] for n in models]).statistic
    assert table.loc[("judge1 m1", "a"), "kendall_tau"] == pytest.approx(tau1)     # order reversed: -1
    assert table.loc[("judge1 m1", "a"), "rank_change"] == 1 - 3                     # a falls from 1st to 3rd
    assert table.loc[("judge3 m3", "a"), "kendall_tau"] == pytest.approx(1.0)


def test_length_bias_within_models_and_pooled(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lengths = [int(x) for x in rng.uniform(300, 6000, size=60)]
    verdicts = panel_verdicts(4, 0.5)
    verdicts[:, 0] = np.clip(0.12 * np.log(lengths) - 0.5 + rng.normal(0, 0.05, 60), 0, 1)   # judge1 likes length
    runs = [judged_run(tmp_path, "a", verdicts, lengths=lengths),
            judged_run(tmp_path, "b", panel_verdicts(5, 0.5), lengths=lengths[::-1])]
    cmp = open_compare(runs, tmp_path / "cmp", n_boot=1000)
    length_bias(cmp)
    table = cmp.tables["length_bias"].set_index(["judge", "model"])
    assert table.loc[("judge1 m1", "a"), "spearman_rho"] == pytest.approx(
        scipy_stats.spearmanr(verdicts[:, 0], lengths).statistic, abs=1e-12)
    assert table.loc[("judge1 m1", "a"), "spearman_rho_low"] > 0.5
    b = table.loc[("judge2 m2", "b")]
    assert b.spearman_rho_low < 0 < b.spearman_rho_high
    pooled_scores = np.concatenate([verdicts[:, 0], panel_verdicts(5, 0.5)[:, 0]])
    assert table.loc[("judge1 m1", "pooled"), "spearman_rho"] == pytest.approx(
        scipy_stats.spearmanr(pooled_scores, lengths + lengths[::-1]).statistic, abs=1e-12)


# --- panel change ----------------------------------------------------------------------------------

def test_panel_change_reports_tau_and_shifts_and_keeps_the_panels_apart(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    qualities = {"a": 0.7, "b": 0.5, "c": 0.3}
    first = [judged_run(tmp_path / "A", n, panel_verdicts(i, q)) for i, (n, q) in enumerate(qualities.items())]
    # panel B: a harsher panel (-0.1 on every verdict, clipped) that reverses b and c
    second_scores = {"a": panel_verdicts(0, 0.7) - 0.1, "b": panel_verdicts(1, 0.5) - 0.3,
                     "c": panel_verdicts(2, 0.3) - 0.1}
    second = [judged_run(tmp_path / "B", n, np.clip(v, 0, 1), panel="q") for n, v in second_scores.items()]
    with pytest.raises(FingerprintMismatch, match="judge_panel"):
        open_compare(first + second)   # never one leaderboard
    cmp = open_compare(panels=[first, second], out=tmp_path / "cmp", n_boot=2000)
    assert [r.label for r in cmp.runs] == ["a", "b", "c"]
    leaderboard(cmp)
    assert list(cmp.tables["leaderboard"].index) == ["a", "b", "c"]   # the first panel's alone
    panel_change(cmp)
    assert "differing fingerprint parts: judge_panel" in capsys.readouterr().out
    table = cmp.tables["panel_change"].set_index("model")
    mean_a = {n: np.mean(panel_verdicts(i, q).mean(axis=1)) for i, (n, q) in enumerate(qualities.items())}
    mean_b = {n: np.mean(np.clip(v, 0, 1).mean(axis=1)) for n, v in second_scores.items()}
    for n in qualities:
        assert table.loc[n, "shift"] == pytest.approx(mean_b[n] - mean_a[n])
        assert table.loc[n, "shift_high"] < 0
    expected_tau = scipy_stats.kendalltau([mean_a[n] for n in qualities], [mean_b[n] for n in qualities]).statistic
    assert table.loc["a", "kendall_tau"] == pytest.approx(expected_tau)   # 1/3: one pair of three swapped
    assert table.loc["a", "kendall_tau_low"] <= expected_tau <= table.loc["a", "kendall_tau_high"]
    assert list(table.rank_b) == [1.0, 3.0, 2.0]


def test_panel_change_needs_the_same_tasks_and_two_panels(tmp_path: Path) -> None:
    a = judged_run(tmp_path / "A", "a", panel_verdicts(0, 0.5))
    b = judged_run(tmp_path / "B", "a", panel_verdicts(0, 0.5), panel="q")
    fingerprint = json.loads((b / "fingerprint.json").read_text())
    fingerprint["parts"]["tasks"]["sha256"] = "other tasks"
    (b / "fingerprint.json").write_text(json.dumps(fingerprint))
    with pytest.raises(FingerprintMismatch, match="tasks"):
        open_compare(panels=[[a], [b]], out=tmp_path / "cmp")
    with pytest.raises(ConfigError, match="two lists"):
        open_compare([a], panels=[[a], [b]])
    assert panel_change(open_compare([a, judged_run(tmp_path, "z", panel_verdicts(1, 0.5))])) is None


def test_compare_panels_through_the_command_and_notebook(tmp_path: Path) -> None:
    """``evalnb compare --panels``: the compare notebook's Panel change section, compare.json
    holding both panels' runs apart (the leaderboard the first panel's alone)."""
    from evalnb.app.main import main

    first = [judged_run(tmp_path / "A", n, panel_verdicts(i, q)) for i, (n, q) in enumerate({"a": 0.7, "b": 0.4}.items())]
    second = [judged_run(tmp_path / "B", n, panel_verdicts(i + 5, q), panel="q")
              for i, (n, q) in enumerate({"a": 0.4, "b": 0.7}.items())]
    out = tmp_path / "cmp"
    assert main(["compare", "--panels", ",".join(map(str, first)), ",".join(map(str, second)),
                 "--out", str(out), "--n-boot", "200"]) == 0
    record = json.loads((out / "compare.json").read_text())
    assert [r["dir"] for r in record["runs"]] == [str(p) for p in first]
    assert [r["dir"] for r in record["panel_b"]] == [str(p) for p in second]
    assert {r["model"] for r in record["tables"]["leaderboard"]} == {"a", "b"} and len(record["tables"]["leaderboard"]) == 2
    change = {r["model"]: r for r in record["tables"]["panel_change"]}
    assert change["a"]["kendall_tau"] == pytest.approx(-1.0) and change["a"]["shift"] < 0 < change["b"]["shift"]
    html = (out / "05_compare.html").read_text() if (out / "05_compare.html").exists() else \
        (out / "05_compare.ipynb").read_text()
    assert "differing fingerprint parts: judge_panel" in html
