"""WildTrace's scores.json gains standard errors and a cluster bootstrap over
documents beside (never replacing) the protocol's numbers; compare gains per-pair, per-metric
verdicts after Holm and rank intervals; `evalnb plan` against the closed form."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats as scipy_stats

import evalnb
from evalnb.app.main import main
from evalnb.stats import intervals as stats
from evalnb.pages import statistics
from tests.conftest import offline_params, sample_tasks
from tests.test_compare import constructed_run
from tests.test_metrics import run_all


def test_wildtrace_scores_report_clustered_errors_beside_the_protocol_numbers(tmp_path: Path) -> None:
    params = offline_params(tmp_path) | {"n_boot": 2000, "seed": 3}
    scores = run_all(params)
    rows = scores["tasks"]
    documents = [t["corpus_file"] for t in sample_tasks()]
    assert [r["corpus_file"] for r in rows] == documents and len(set(documents)) < len(documents)
    block = scores["uncertainty"]
    assert block["cluster"] == "document" and block["n_clusters"] == len(set(documents))
    values = np.array([r["score"] for r in rows])         # all_tasks: every task, not ok = 0
    entry = block["metrics"]["all_tasks"]
    groups = np.unique(documents, return_inverse=True)[1]
    ols = sm.OLS(values, np.ones(len(values))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert entry["clustered_se"] == pytest.approx(float(ols.bse[0]))
    assert entry["se"] == pytest.approx(np.std(values, ddof=1) / np.sqrt(len(values)))
    assert entry["design_effect"] == pytest.approx((entry["clustered_se"] / entry["se"]) ** 2)
    # the protocol's interval stays the task-level bootstrap, the cluster one is beside it
    protocol = stats.bootstrap_ci(list(values), n_boot=2000, seed=3)
    assert (scores["metrics"]["all_tasks"]["ci"]["low"], scores["metrics"]["all_tasks"]["ci"]["high"]) == \
        pytest.approx((protocol.low, protocol.high))
    cluster_ci = entry["cluster_ci"]
    assert cluster_ci["n_clusters"] == len(set(documents)) and cluster_ci["low"] <= values.mean() <= cluster_ci["high"]
    assert "scored_n" not in block["metrics"]                # a count has no standard error
    run = evalnb.open_run(params)
    table = evalnb.standard_errors(run)
    run.close()
    assert table is not None and {"se", "clustered_se", "documents", "design_effect", "cluster_bootstrap"} <= set(table)
    # the report's headline: the cluster interval (clustered SE, t on documents - 1) beside the protocol's
    from evalnb.evidence.headline import headline_table
    from evalnb.views.tables import paper_view

    headline = headline_table(scores)
    c = len(set(documents))
    half = scipy_stats.t.ppf(0.975, c - 1) * float(ols.bse[0])
    assert (headline.loc["all_tasks", "cluster_low"], headline.loc["all_tasks", "cluster_high"]) == pytest.approx(
        (values.mean() - half, values.mean() + half))
    assert "cluster 95% CI" in paper_view(headline).frame.columns


def test_a_scores_json_without_these_numbers_shows_no_section(tmp_path: Path) -> None:
    assert statistics.uncertainty_rows({"metrics": {"all_tasks": {"value": 0.5}}}) == []


def documented_runs(root: Path, levels: dict[str, float], n: int = 48, per_document: int = 4) -> list[Path]:
    """Hand-made WildTrace runs over one task set whose tasks come ``per_document`` to a document."""
    rng = np.random.default_rng(11)
    base = rng.random(n)
    runs = []
    for name, shift in levels.items():
        scores = {f"t{i}": float(np.clip(base[i] + shift + rng.normal(0, 0.1), 0, 1)) for i in range(n)}
        run = constructed_run(root, name, scores)
        body = json.loads((run / "scores.json").read_text())
        for i, row in enumerate(body["tasks"]):
            row["corpus_file"] = f"doc{i // per_document}.txt"
        (run / "scores.json").write_text(json.dumps(body))
        runs.append(run)
    return runs


def test_compare_pairs_ranks_and_compare_json(tmp_path: Path) -> None:
    runs = documented_runs(tmp_path, {"strong": 0.3, "middle": 0.0, "twin": 0.0})
    cmp = evalnb.open_compare(runs, tmp_path / "cmp", n_boot=2000, seed=1)
    board = evalnb.leaderboard(cmp)
    assert board.loc["strong", "rank_interval"] == "1" and board.loc["strong", "p_first"] == 1.0
    assert board["p_first"].sum() == pytest.approx(1.0)
    shown = evalnb.pairwise(cmp)
    assert shown is not None and len(shown) == 3 * 2           # three pairs, two headline metrics
    evalnb.save_compare(cmp)
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    pairs = {(p["metric"], p["model_a"], p["model_b"]): p for p in saved["tables"]["pairwise"]}
    strong = pairs[("all_tasks", "strong", "middle")]
    assert strong["verdict"] == "strong ahead" and strong["cluster"] == "document" and strong["n_clusters"] == 12
    twins = [p for k, p in pairs.items() if k[0] == "all_tasks" and {"middle", "twin"} == set(k[1:])][0]
    assert twins["verdict"] == "indistinguishable"
    a, b = (np.array([t["score"] for t in json.loads((r / "scores.json").read_text())["tasks"]]) for r in runs[:2])
    assert strong["delta"] == pytest.approx(a.mean() - b.mean()) and strong["rho"] == pytest.approx(
        scipy_stats.pearsonr(a, b)[0])
    documents = np.repeat(np.arange(12), 4)
    ols = sm.OLS(a - b, np.ones(48)).fit(cov_type="cluster", cov_kwds={"groups": documents})
    assert strong["se_delta"] == pytest.approx(float(ols.bse[0]))
    # 12 documents, one stratum: Student t on 11 degrees of freedom in place of the normal's 2.80
    assert strong["df"] == 11
    t_sum = scipy_stats.t.ppf(0.975, 11) + scipy_stats.t.ppf(0.8, 11)
    assert strong["mde"] == pytest.approx(t_sum * strong["se_delta"], rel=1e-9)
    assert strong["p_t"] == pytest.approx(2 * scipy_stats.t.sf(abs(strong["delta"]) / strong["se_delta"], 11), rel=1e-2)
    assert "approximate" in strong["note"] and "12 documents" in strong["note"]
    holm = sorted(p["p_holm"] for k, p in pairs.items() if k[0] == "all_tasks")
    assert holm[0] >= min(p["p"] for k, p in pairs.items() if k[0] == "all_tasks")


def test_compare_refuses_a_level_or_power_outside_0_1(tmp_path: Path) -> None:
    runs = documented_runs(tmp_path, {"a": 0.0, "b": 0.0})
    from evalnb.core.errors import ConfigError
    with pytest.raises(ConfigError, match=r"compare: alpha: expected a number strictly between 0 and 1, got 5"):
        evalnb.open_compare(runs, alpha=5)
    with pytest.raises(ConfigError, match=r"compare: power: .* got '0.8'"):
        evalnb.open_compare(runs, power="0.8")


def test_plan_against_the_closed_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = documented_runs(tmp_path, {"a": 0.05, "b": 0.0}, per_document=1)   # every task its own document
    a, b = (np.array([t["score"] for t in json.loads((r / "scores.json").read_text())["tasks"]]) for r in runs)
    evalnb.save_compare(evalnb.open_compare(runs, tmp_path / "cmp", n_boot=200))
    table = evalnb.plan(tmp_path / "cmp", delta=0.03)
    z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)
    row = table.loc[("all_tasks", "a", "b")]
    assert row["var_d"] == pytest.approx(np.var(a - b, ddof=1))
    assert row["items_needed"] == int(np.ceil(z ** 2 * np.var(a - b, ddof=1) / 0.03 ** 2))
    assert row["design_effect"] == pytest.approx(1.0)
    one = evalnb.plan(runs[0], delta=0.03, rho=0.5).loc[("all_tasks", "a", "-")]
    assert one["var_d"] == pytest.approx(np.var(a, ddof=1))            # 2 (1 - 0.5) Var(s)
    assert main(["plan", str(tmp_path / "cmp"), "--delta", "0.03"]) == 0
    shown = capsys.readouterr().out
    assert "items needed" in shown and "items_needed" not in shown and "contestant" not in shown
    assert main(["plan", str(tmp_path), "--delta", "0.03"]) == 1
    assert "not a pilot" in capsys.readouterr().err
    assert main(["plan", str(runs[0]), "--delta", "-1"]) == 1


def repeated_runs(root: Path, k0: int = 3, n: int = 40) -> list[Path]:
    """Two hand-made GeoKTools runs with ``k0`` agent runs per case (repeats within the case)."""
    rng = np.random.default_rng(12)
    truth = rng.random(n)
    runs = []
    for name, shift in {"a": 0.05, "b": 0.0}.items():
        rows = [{"case_id": f"c{i}", "repeat": r + 1, "K": 1 + i % 4, "status": "ok",
                 "score": float(np.clip(truth[i] + shift + rng.normal(0, 0.15), 0, 1))}
                for i in range(n) for r in range(k0)]
        run = root / name
        run.mkdir()
        (run / "scores.json").write_text(json.dumps({
            "benchmark": "geoktools", "run_name": name, "offline": False, "complete": True, "tasks": rows,
            "config": {"model": {"provider": "openai", "name": name}}}))
        (run / "fingerprint.json").write_text(json.dumps({"sha256": name, "parts": {}}))
        runs.append(run)
    return runs


def test_plan_with_repeats_decomposes_the_variance(tmp_path: Path) -> None:
    runs = repeated_runs(tmp_path)
    evalnb.save_compare(evalnb.open_compare(runs, tmp_path / "cmp", n_boot=200))
    matrices = []
    for run in runs:
        rows = json.loads((run / "scores.json").read_text())["tasks"]
        matrices.append(np.array([[r["score"] for r in rows if r["repeat"] == k] for k in (1, 2, 3)]))
    a, b = matrices
    sigma_a, sigma_b = np.var(a, axis=0, ddof=1).mean(), np.var(b, axis=0, ddof=1).mean()
    d = a.mean(axis=0) - b.mean(axis=0)
    # GeoKTools' strata: K; the planner's Var(d) is the stratified one, n · SE²
    k_of = np.array([1 + i % 4 for i in range(40)])
    var_d = 40 * sum((np.sum(k_of == k) / 40) ** 2 * np.var(d[k_of == k], ddof=1) / np.sum(k_of == k)
                     for k in range(1, 5))
    row = evalnb.plan(tmp_path / "cmp", delta=0.03).loc[("overall", "a", "b")]
    assert row["var_d"] == pytest.approx(var_d)
    assert (row["repeats_now"], row["sigma2_a"], row["sigma2_b"]) == (3, pytest.approx(sigma_a), pytest.approx(sigma_b))
    omega2 = max(0.0, var_d - (sigma_a + sigma_b) / 3)
    assert row["omega2"] == pytest.approx(omega2)
    z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)
    for k in (1, 2, 4, 8):
        assert row[f"items_needed_K={k}"] == int(np.ceil(z ** 2 * (omega2 + (sigma_a + sigma_b) / k) / 0.03 ** 2))
    assert row["items_needed_K=8"] <= row["items_needed_K=1"]


def test_the_pairwise_table_is_laid_out_once_for_notebook_export_and_terminal(tmp_path: Path) -> None:
    from evalnb.app.results import compare_results, compare_text
    from evalnb.pages.exports import paper_tables
    from evalnb.views.estimates import estimate_text
    from evalnb.views.tables import view_text

    runs = documented_runs(tmp_path, {"strong": 0.3, "middle": 0.0})
    cmp = evalnb.open_compare(runs, tmp_path / "cmp", n_boot=500, seed=2)
    notebook = repr(evalnb.pairwise(cmp))
    evalnb.save_compare(cmp)
    exported = next(t for t in paper_tables(tmp_path / "cmp") if t.name == "pairwise")
    assert view_text(exported.view(columns=["all"])) == notebook   # a paper's default leaves out SE, rho, p
    terminal = compare_text(compare_results(tmp_path / "cmp")).splitlines()
    # the terminal's ranking: the cluster interval beside the protocol's, where the rows hold one
    doc = {"benchmark": "wildtrace", "headline": ["all_tasks"], "compare_dir": "cmp", "pairwise": [], "ranking": [
        {"rank": 1, "model": "strong", "n": 48, "metrics": {"all_tasks": {
            "value": 0.5, "ci_low": 0.45, "ci_high": 0.55, "cluster_low": 0.4, "cluster_high": 0.6}}}]}
    text = compare_text(doc).splitlines()
    assert "all_tasks: cluster 95% CI" in text[1] and estimate_text(0.5, 0.4, 0.6) in text[2]
    assert [line.strip() for line in terminal if line.startswith("  ")][-len(notebook.splitlines()):] == \
        [line.strip() for line in notebook.splitlines()]
    header = notebook.splitlines()[0].split("  ")
    assert [h.strip() for h in header if h.strip()][:4] == ["metric", "model A", "model B", "A - B [95% CI]"]
    for pair in json.loads((tmp_path / "cmp" / "compare.json").read_text())["tables"]["pairwise"]:
        assert estimate_text(pair["delta"], pair["ci_low"], pair["ci_high"]) in notebook
    # the header is written in one module: the vocabulary
    package = Path(evalnb.__file__).parent
    assert [p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
            if '"A - B' in p.read_text(encoding="utf-8")] == ["views/labels.py"]


def test_the_t_p_value_is_shown_as_every_p_value_is() -> None:
    """A p below 0.001 reads "< 0.001" in the t column as in the bootstrap's (never a bare 0.000)."""
    from evalnb.views.pairwise import pairwise_text

    row = {"metric": "all_tasks", "model_a": "a", "model_b": "b", "delta": 0.5, "ci_low": 0.3, "ci_high": 0.7,
           "n": 12, "se_delta": 0.1, "rho": None, "p": 0.0004, "p_holm": 0.0004, "p_t": 0.00002,
           "verdict": "a ahead", "mde": 0.3, "power": 0.8}
    header, line = pairwise_text([row]).splitlines()[:2]
    cells = re.split(r"\s{2,}", line.strip())
    titles = re.split(r"\s{2,}", header.strip())
    assert cells[titles.index("p (t)")] == "< 0.001"
