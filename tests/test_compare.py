"""The compare stage: refusal to mix, leaderboard and paired bootstrap against independent
computations, judge agreement and rubric analysis on hand-made panels, rendering for papers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

import evalnb
from evalnb.comparison.agreement import judge_agreement
from evalnb.benchmarks.wildtrace.analysis import rubric_items
from evalnb.app.main import main
from evalnb.stats import intervals as stats
from evalnb.comparison.compare import open_compare
from evalnb.comparison.leaderboard import leaderboard
from evalnb.comparison.paired import paired_differences
from evalnb.core.errors import ConfigError, FingerprintMismatch
from tests.conftest import SAMPLE, figure_outputs, offline_params, sample_tasks

PARTS = ("prompts", "caps_table", "judge_panel", "aggregation", "retry", "tasks")


def constructed_run(root: Path, name: str, scores: dict[str, float], judges: dict[str, list[float]] | None = None,
                    statuses: dict[str, str] | None = None, replies: dict[str, list[str]] | None = None,
                    panel: str = "p", documents: dict[str, str] | None = None) -> Path:
    """A finished WildTrace run written by hand: task scores, optional per-judge scores, and
    optionally each task's corpus document (its cluster)."""
    run = root / name
    run.mkdir(parents=True)
    tasks = []
    for task_id, score in scores.items():
        status = (statuses or {}).get(task_id, "ok")
        per_judge = (judges or {}).get(task_id, [score] * 3)
        texts = (replies or {}).get(task_id, ["{}"] * len(per_judge))
        tasks.append({"task_id": task_id, "status": status, "score": score,
                      "judges": [{"judge": f"judge{j + 1}", "model": f"m{j + 1}", "score": s, "total": s * 100,
                                  "reply": texts[j]} for j, s in enumerate(per_judge)] if status == "ok" else [],
                      **({"corpus_file": documents[task_id]} if documents else {})})
    scored = [t["score"] for t in tasks if t["status"] == "ok"]
    (run / "scores.json").write_text(json.dumps({
        "benchmark": "wildtrace", "run_name": name, "offline": False, "complete": True, "n_tasks": len(tasks),
        "scored_n": len(scored), "overall": sum(scores.values()) / len(tasks), "tasks": tasks,
        "config": {"model": {"provider": "openai", "name": name}, "data": str(SAMPLE / "tasks.json")}}))
    (run / "fingerprint.json").write_text(json.dumps({"sha256": name, "parts": {
        p: {"sha256": panel if p == "judge_panel" else p, "value": p} for p in PARTS}}))
    return run


def test_refuses_runs_whose_judge_panels_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = constructed_run(tmp_path, "a", {"t1": 1.0})
    b = constructed_run(tmp_path, "b", {"t1": 0.5}, panel="other")
    with pytest.raises(FingerprintMismatch, match=r"refusing to compare .*: judge_panel differ"):
        open_compare([a, b])
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 1
    assert "judge_panel" in capsys.readouterr().err and not (tmp_path / "cmp").exists()


def test_refuses_real_runs_with_a_different_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = offline_params(tmp_path / "a")
    run = evalnb.open_run(first)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
    import evalnb.benchmarks.wildtrace.prompt_text as wildtrace   # where the prompts' texts live
    monkeypatch.setattr(wildtrace, "ANSWER_PROMPT", wildtrace.ANSWER_PROMPT.replace("ONLY", "only"))
    second = evalnb.open_run(offline_params(tmp_path / "b") | {"model": first["model"] | {"name": "lead-3"}})
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(second)
    with pytest.raises(FingerprintMismatch, match=r": prompts differ") as refused:   # the shared part's, named once
        open_compare([run.dir, second.dir])
    assert str(refused.value).count("prompts") == 2 and "shared" not in str(refused.value)   # the head, one line


def test_refuses_one_run_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`evalnb compare A A`: a run paired with itself differs by 0 by construction; refused, also
    when the two names are two spellings of one directory."""
    a = constructed_run(tmp_path, "a", {"t1": 1.0, "t2": 0.5})
    with pytest.raises(ConfigError, match=r"compare: .*/a is given twice"):
        open_compare([a, tmp_path / "." / "a"])
    assert main(["compare", str(a), str(a), "--out", str(tmp_path / "cmp")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is given twice" in err and not (tmp_path / "cmp").exists()


def test_refuses_incomplete_or_mixed_benchmarks(tmp_path: Path) -> None:
    a = constructed_run(tmp_path, "a", {"t1": 1.0})
    b = constructed_run(tmp_path, "b", {"t1": 1.0})
    data = json.loads((b / "scores.json").read_text())
    (b / "scores.json").write_text(json.dumps(data | {"complete": False}))
    with pytest.raises(ConfigError, match="incomplete"):
        open_compare([a, b])
    (b / "scores.json").write_text(json.dumps(data | {"benchmark": "geoktools"}))
    with pytest.raises(ConfigError, match="different benchmarks"):
        open_compare([a, b])


def independent_ci(values: list[float], n_boot: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The documented procedure rebuilt with numpy directly."""
    data = np.asarray(values)
    means = data[np.random.default_rng(seed).integers(0, len(data), size=(n_boot, len(data)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def independent_scored_ci(scores: dict[str, float], excluded: set[str], n_boot: int = 10_000,
                          seed: int = 0) -> tuple[float, float]:
    """Scored's interval rebuilt with numpy: every task resampled, the mean taken over the
    resampled tasks that were answered ok (not-ok tasks are NaN)."""
    data = np.array([np.nan if t in excluded else v for t, v in scores.items()])
    idx = np.random.default_rng(seed).integers(0, len(data), size=(n_boot, len(data)))
    means = np.nanmean(data[idx], axis=1)
    low, high = np.quantile(means[np.isfinite(means)], [0.025, 0.975])
    return float(low), float(high)


def test_leaderboard_order_and_intervals(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    ids = [f"t{i}" for i in range(40)]
    runs = {}
    for name, level in (("weak", 0.3), ("strong", 0.7), ("middle", 0.5)):
        values = np.clip(rng.normal(level, 0.2, size=40), 0, 1)
        statuses = {ids[0]: "out_of_context", ids[1]: "refused"}
        scores = {t: (0.0 if t in statuses else float(v)) for t, v in zip(ids, values)}
        runs[name] = (constructed_run(tmp_path, name, scores, statuses=statuses), scores)
    cmp = open_compare([r for r, _ in runs.values()], tmp_path / "cmp")
    table = leaderboard(cmp)
    assert list(table.index) == ["strong", "middle", "weak"]
    for name, (_, scores) in runs.items():
        all_scores = list(scores.values())
        scored = [s for t, s in scores.items() if t not in (ids[0], ids[1])]
        row = table.loc[name]
        assert row["all_tasks"] == pytest.approx(np.mean(all_scores))
        assert (row["all_tasks_ci_low"], row["all_tasks_ci_high"]) == pytest.approx(independent_ci(all_scores))
        assert row["scored"] == pytest.approx(np.mean(scored))
        assert (row["scored_ci_low"], row["scored_ci_high"]) == pytest.approx(
            independent_scored_ci(scores, {ids[0], ids[1]}))
        assert row["scored_n"] == 38 and row["coverage"] == pytest.approx(38 / 40)


def test_paired_bootstrap_against_scipy(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    ids = [f"t{i}" for i in range(60)]
    base = rng.uniform(0, 1, size=60)
    a = {t: float(v) for t, v in zip(ids, np.clip(base + 0.1, 0, 1))}
    b = {t: float(v) for t, v in zip(ids, base)}
    b[ids[0]] = 0.0
    run_a = constructed_run(tmp_path, "a", a)
    run_b = constructed_run(tmp_path, "b", b, statuses={ids[0]: "out_of_context"})   # not attempted by b
    row = paired_differences(open_compare([run_a, run_b], tmp_path / "cmp")).iloc[0]
    common = ids[1:]
    diffs = np.array([a[t] - b[t] for t in common])
    theirs = scipy_stats.bootstrap((np.array([a[t] for t in common]), np.array([b[t] for t in common])),
                                   lambda x, y, axis=-1: np.mean(x - y, axis=axis), paired=True,
                                   n_resamples=10_000, method="percentile", random_state=np.random.default_rng(1))
    assert row["n_common"] == 59 and row["mean_diff"] == pytest.approx(diffs.mean())
    assert row["ci_low"] == pytest.approx(theirs.confidence_interval.low, abs=0.005)
    assert row["ci_high"] == pytest.approx(theirs.confidence_interval.high, abs=0.005)
    assert row["note"].startswith("interval excludes 0: a ahead")
    # No clusters declared: every item its own, and the interval is the item bootstrap of
    # stats.paired_bootstrap_ci over the common items, the same random stream (exact to rounding).
    item = stats.paired_bootstrap_ci([a[t] for t in common], [b[t] for t in common], n_boot=stats.N_BOOT, seed=0)
    assert row["n_clusters"] == 59 and (row["ci_low"], row["ci_high"]) == pytest.approx((item.low, item.high), abs=1e-12)


def test_paired_differences_resample_the_documents_of_the_common_items(tmp_path: Path) -> None:
    """Tasks about one document share a cluster effect. The interval is checked against a plain
    cluster bootstrap written here from the documented procedure (documents among the common
    items, in the order of their first task; rng.integers(0, C, size=(n_boot, C)) from
    default_rng(seed); the mean difference over the tasks of the drawn documents; percentile
    interval): the same random stream, so equal to rounding."""
    rng = np.random.default_rng(12)
    ids = [f"t{i}" for i in range(40)]
    documents = {t: f"doc{i // 5}.md" for i, t in enumerate(ids)}          # 8 documents of 5 tasks
    base = rng.uniform(0.2, 0.8, size=40)
    effect = np.repeat(rng.normal(0.05, 0.15, 8), 5)                       # the documents' shared part
    a = {t: float(v) for t, v in zip(ids, np.clip(base + effect + rng.normal(0, 0.03, 40), 0, 1))}
    b = {t: float(v) for t, v in zip(ids, base)}
    gone = {*ids[35:], ids[2]}                                             # doc7 whole, one task of doc0
    run_a = constructed_run(tmp_path, "a", a, documents=documents)
    run_b = constructed_run(tmp_path, "b", b, documents=documents, statuses={t: "out_of_context" for t in gone})
    cmp = open_compare([run_a, run_b], tmp_path / "cmp", n_boot=3000, seed=7)
    shown = paired_differences(cmp)
    row = cmp.tables["paired_differences"].iloc[0]
    common = [t for t in ids if t not in gone]
    d = np.array([a[t] - b[t] for t in common])
    order = list(dict.fromkeys(documents[t] for t in common))
    members = [np.array([documents[t] == doc for t in common]) for doc in order]
    draws = np.random.default_rng(7).integers(0, len(order), size=(3000, len(order)))
    replicates = [np.concatenate([d[members[c]] for c in drawn]).mean() for drawn in draws]
    low, high = np.quantile(replicates, [0.025, 0.975])
    assert (row["n_common"], row["n_clusters"], row["cluster"]) == (34, 7, "document")
    assert row["mean_diff"] == pytest.approx(d.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    # the item bootstrap the table used before ignores the documents: narrower here
    item = stats.paired_bootstrap_ci([a[t] for t in common], [b[t] for t in common], n_boot=3000, seed=7)
    assert item.high - item.low < 0.8 * (high - low)
    assert list(cmp.tables["paired_differences"].columns) == [
        "model_a", "model_b", "n_common", "mean_diff", "ci_low", "ci_high", "n_clusters", "note", "cluster"]
    assert "documents" in shown._repr_html_() and "common items" in shown._repr_html_()


def test_the_compare_notebook_shows_the_common_items_view_after_the_verdicts() -> None:
    cells = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "05_compare.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    verdicts, paired = sources.index("evalnb.pairwise(cmp)"), sources.index("evalnb.paired_differences(cmp)")
    assert verdicts < paired and cells[paired - 1]["cell_type"] == "markdown"
    assert "sensitivity view, not a verdict" in sources[paired - 1] and "can differ" in sources[paired - 1]


def test_agreement_statistics_on_a_hand_made_panel(tmp_path: Path) -> None:
    judges = {"t1": [1.0, 0.8, 1.0], "t2": [0.5, 0.5, 0.0], "t3": [0.0, 0.1, 0.2], "t4": [0.6, 0.2, 0.6]}
    run = constructed_run(tmp_path, "a", {t: float(np.mean(v)) for t, v in judges.items()}, judges=judges)
    other = constructed_run(tmp_path, "b", {t: 0.5 for t in judges})
    cmp = open_compare([run, other], tmp_path / "cmp", threshold=0.2)
    table = judge_agreement(cmp)
    rows = {(r.judge_a.split()[0], r.judge_b.split()[0]): r for r in table[table.model == "a"].itertuples()}
    j1, j2, j3 = ([v[i] for v in judges.values()] for i in range(3))
    # judge1 vs judge2: |diffs| = 0.2, 0, 0.1, 0.4 -> mean 0.175; over 0.2: only 0.4 (0.2 is not over)
    assert rows[("judge1", "judge2")].mean_abs_diff == pytest.approx(0.175)
    assert rows[("judge1", "judge2")].share_over_threshold == pytest.approx(1 / 4)
    assert rows[("judge1", "judge2")].pearson_r == pytest.approx(np.corrcoef(j1, j2)[0, 1])
    # judge1 vs judge3: |diffs| = 0, 0.5, 0.2, 0 -> mean 0.175; over 0.2: one
    assert rows[("judge1", "judge3")].mean_abs_diff == pytest.approx(0.175)
    assert rows[("judge2", "judge3")].pearson_r == pytest.approx(np.corrcoef(j2, j3)[0, 1])
    top = evalnb.disagreements(cmp).reset_index()
    assert list(top["item"][:2]) == ["t2", "t4"]             # spreads 0.5, 0.4, then 0.2, 0.2
    assert list(top["spread"][:2]) == pytest.approx([0.5, 0.4])
    # where to find the evidence, relative to the compare's own folder (no machine path).
    record, _, item = top["record"].iloc[0].partition("#")
    assert not Path(record).is_absolute() and (cmp.out / record).resolve() == (run / "scores.json").resolve()
    assert item == "t2" and (top["spread"] > 0).all()


def test_rubric_items_award_rates_by_hand(tmp_path: Path) -> None:
    task = sample_tasks()[0]                                  # wt-sample-01: rubric items
    points = [i["points"] for i in task["ground_truth"]["scoring_rubric"]]
    full = json.dumps({"points_awarded": points, "total": sum(points)})
    first_only = json.dumps({"points_awarded": [points[0]] + [0] * (len(points) - 1), "total": points[0]})
    half_first = json.dumps({"points_awarded": [points[0] / 2] + [0] * (len(points) - 1), "total": points[0] / 2})
    run = constructed_run(tmp_path, "a", {"wt-sample-01": 0.5}, replies={"wt-sample-01": [full, first_only, "no json"]})
    other = constructed_run(tmp_path, "b", {"wt-sample-01": 0.5}, replies={"wt-sample-01": [half_first] * 3})
    cmp = open_compare([run, other], tmp_path / "cmp")
    table = rubric_items([(r.label, r.scores) for r in cmp.runs]).reset_index()
    first = table[table["item"] == "P1"].iloc[0]
    # a: judges 1 and 2 itemise (1.0, 1.0), judge 3 does not -> 1.0; b: 0.5 each -> 0.5
    assert (first["a"], first["b"], first["award_rate"]) == pytest.approx((1.0, 0.5, 0.75))
    second = table[table["item"] == "P2"].iloc[0]
    assert (second["a"], second["b"], second["award_rate"]) == pytest.approx((0.5, 0.0, 0.25))
    assert table["award_rate"].is_monotonic_increasing


def test_compare_notebook_figures_and_paper_html_without_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    key = "sk-planted-" + os.urandom(12).hex()
    monkeypatch.setenv("EVALNB_UNUSED_KEY", key)
    dirs = []
    for contestant in ("extractive-bm25", "lead-3"):
        params = offline_params(tmp_path / contestant)
        params["model"]["name"] = contestant
        params["model"]["api_key_env"] = "EVALNB_UNUSED_KEY"   # named, never a value
        (tmp_path / f"{contestant}.json").write_text(json.dumps(params))
        assert main(["run", str(tmp_path / f"{contestant}.json")]) == 0
        dirs.append(params["output_dir"])
    out = tmp_path / "cmp"
    assert main(["compare", *dirs, "--out", str(out)]) == 0
    import nbformat
    executed = nbformat.read(out / "05_compare.ipynb", as_version=4)
    assert len(figure_outputs(executed)) == 2                # leaderboard and points distribution
    assert (out / "figures" / "leaderboard.pdf").exists() and (out / "leaderboard.csv").exists()
    assert main(["render", str(out), "--no-input"]) == 0
    assert main(["render", dirs[0]]) == 0
    for page in [*(out / "paper").glob("*.html"), *(Path(dirs[0]) / "paper").glob("*.html")]:
        html = page.read_text()
        assert key not in html and "injected-parameters" not in html
        assert "Provenance" in html and "OFFLINE APPROXIMATION" in html
        if page.name in ("04_report.html", "05_compare.html"):
            assert "data:image/png;base64" in html               # figures embedded
        assert 'src="http' not in html and "cdnjs" not in html
    compare_page = (out / "paper" / "05_compare.html").read_text()
    assert "open_compare" not in compare_page                 # --no-input hides the code
    assert "open_run" in (Path(dirs[0]) / "paper" / "01_generate.html").read_text()


def test_compare_from_a_parameters_file_with_relative_runs(tmp_path: Path) -> None:
    a = constructed_run(tmp_path / "runs", "a", {"t1": 1.0, "t2": 0.0})
    b = constructed_run(tmp_path / "runs", "b", {"t1": 0.5, "t2": 0.5})
    (tmp_path / "cmp.yaml").write_text("runs: [runs/a, runs/b]\nout: out\nn_boot: 500\nseed: 3\n")
    assert main(["compare", "--params", str(tmp_path / "cmp.yaml")]) == 0
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [r["dir"] for r in saved["runs"]] == [str(a), str(b)]
    assert (saved["n_boot"], saved["seed"]) == (500, 3)
