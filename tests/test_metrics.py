"""Every declared metric's interval against an independent numpy computation: the
stratified bootstrap (within K), repeats resampled within items, macro over K, Scored and
All, the autorater's runs as repeats; and compare using the same declared metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import evalnb
from evalnb.comparison.compare import open_compare
from evalnb.comparison.leaderboard import leaderboard, repeats_table
from tests.conftest import offline_params
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text
from tests.test_geoexpertqueries import DATA as GEQ
from tests.test_geoktools import DATA as GK

N_BOOT = 2000   # one block: the documented stream is easy to rebuild


def replicates(values: np.ndarray, strata: list[str], n_boot: int, seed: int) -> np.ndarray:
    """The documented resampling, by hand: items within strata (labels in sorted order),
    then, with repeats, each drawn item's repeats. Returns (n_boot, repeats, items)."""
    rng = np.random.default_rng(seed)
    repeats, n = values.shape
    labels = np.array(strata)
    columns = np.zeros((n_boot, n), dtype=int)
    for label in sorted(set(strata)):
        idx = np.flatnonzero(labels == label)
        columns[:, idx] = idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))]
    out = np.empty((n_boot, repeats, n))
    rows = rng.integers(0, repeats, size=(n_boot, repeats, n)) if repeats > 1 else None
    for b in range(n_boot):
        for j in range(n):
            for r in range(repeats):
                out[b, r, j] = values[rows[b, r, j] if rows is not None else 0, columns[b, j]]
    return out


def interval(per_replicate: list[float]) -> tuple[float, float]:
    finite = np.array([v for v in per_replicate if np.isfinite(v)])
    low, high = np.quantile(finite, [0.025, 0.975])
    return float(low), float(high)


def ci_of(scores: dict, name: str) -> tuple[float, float]:
    ci = scores["metrics"][name]["ci"]
    return ci["low"], ci["high"]


def run_all(params: dict) -> dict:
    run = evalnb.open_run(params)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
    run.close()
    return json.loads(run.path("scores.json").read_text())


# --- GeoKTools: within K, repeats within cases, macro over K --------------------------------------

def gk_runs(tmp_path: Path) -> list[str]:
    """Two agent runs: the sample's answers, and the same with some answers spoiled."""
    lines = (GK / "predictions.jsonl").read_text().splitlines()
    spoiled = [json.dumps({"id": json.loads(line)["id"], "response": "[0]"}) if i % 3 == 0 else line
               for i, line in enumerate(lines)]
    files = [tmp_path / "r1.jsonl", tmp_path / "r2.jsonl"]
    files[0].write_text("\n".join(lines) + "\n")
    files[1].write_text("\n".join(spoiled) + "\n")
    return [str(f) for f in files]


def test_geoktools_intervals_stratified_by_k_with_repeats(tmp_path: Path) -> None:
    cases = json.loads((GK / "cases.json").read_text())
    # Leave K=4 out: macro over K must average the Ks that exist.
    kept = [c for c in cases if c["K"] != 4]
    (tmp_path / "cases.json").write_text(json.dumps(kept))
    scores = run_all({"benchmark": "geoktools", "run_name": "gk", "output_dir": str(tmp_path / "run"),
                      "data": str(tmp_path / "cases.json"), "predictions": gk_runs(tmp_path),
                      "n_boot": N_BOOT, "seed": 3})
    ids = [c["id"] for c in kept]
    k_of = {c["id"]: c["K"] for c in kept}
    values = np.full((2, len(ids)), np.nan)
    for row in scores["tasks"]:
        values[row["repeat"] - 1, ids.index(row["case_id"])] = row["score"]
    assert not np.isnan(values).any() and not np.array_equal(values[0], values[1])
    strata = [f"K={k_of[i]}" for i in ids]
    sample = replicates(values, strata, N_BOOT, 3)

    def k_mean(m: np.ndarray, k: int) -> float:
        cols = [j for j, i in enumerate(ids) if k_of[i] == k]
        return float(np.mean(m[:, cols]))

    present = sorted(set(k_of.values()))
    assert present == [1, 2, 3]
    expected = {
        "overall": [float(np.mean(m)) for m in sample],
        "macro_over_k": [float(np.mean([k_mean(m, k) for k in present])) for m in sample],
        **{f"K={k}": [k_mean(m, k) for m in sample] for k in present},
    }
    for name, per_replicate in expected.items():
        assert ci_of(scores, name) == pytest.approx(interval(per_replicate)), name
    assert scores["metrics"]["overall"]["value"] == pytest.approx(np.mean(values))
    assert scores["metrics"]["macro_over_k"]["value"] == pytest.approx(np.mean([k_mean(values, k) for k in present]))
    assert scores["metrics"]["K=4"]["value"] is None and scores["by_k"]["4"] == {"mean": None, "n": 0}
    # The headline keys scores.json always had are the declared metrics' numbers.
    assert scores["overall"] == scores["metrics"]["overall"]["value"]
    assert scores["ci"]["macro_over_k"]["low"] == ci_of(scores, "macro_over_k")[0]
    assert scores["ci"]["by_k"]["2"]["high"] == ci_of(scores, "K=2")[1]
    assert scores["metrics"]["overall"]["ci"]["repeats"] == 2 and scores["metrics"]["overall"]["ci"]["strata"] == 3

    # Compare uses the same declared metrics and procedure: same seed, same intervals.
    other = run_all({"benchmark": "geoktools", "run_name": "gk2", "output_dir": str(tmp_path / "run2"),
                     "data": str(tmp_path / "cases.json"), "predictions": gk_runs(tmp_path)[::-1],
                     "n_boot": N_BOOT, "seed": 3})
    assert other["overall"] == pytest.approx(scores["overall"])
    cmp = open_compare([tmp_path / "run", tmp_path / "run2"], tmp_path / "cmp", n_boot=N_BOOT, seed=3)
    table = leaderboard(cmp)
    row = table.loc[table["run"] == "gk"].iloc[0]
    for name in ("overall", "macro_over_k", "K=1", "K=2", "K=3"):
        assert (row[f"{name}_ci_low"], row[f"{name}_ci_high"]) == pytest.approx(ci_of(scores, name)), name
    repeats = repeats_table(cmp)
    mine = repeats[(repeats.model == row.name) & (repeats.number == "overall")].iloc[0]
    assert (mine["mean"], mine["sd"]) == pytest.approx((np.mean(values.mean(axis=1)), np.std(values.mean(axis=1), ddof=1)))


# --- WildTrace: Scored and All in the single-run report -------------------------------------------

def test_wildtrace_scored_and_all_intervals(tmp_path: Path) -> None:
    params = offline_params(tmp_path) | {"n_boot": N_BOOT, "seed": 5}
    scores = run_all(params)
    rows = scores["tasks"]
    values = np.array([[r["score"] if r["status"] == "ok" else np.nan for r in rows]])
    assert np.isnan(values).sum() >= 2                      # out of context, empty: not in Scored
    sample = replicates(values, [""] * values.shape[1], N_BOOT, 5)
    all_tasks = [float(np.mean(np.nan_to_num(m))) for m in sample]
    scored = [float(np.nanmean(m)) if not np.isnan(m).all() else np.nan for m in sample]
    coverage = [float(np.mean(~np.isnan(m))) for m in sample]
    assert ci_of(scores, "all_tasks") == pytest.approx(interval(all_tasks))
    assert ci_of(scores, "scored") == pytest.approx(interval(scored))
    assert ci_of(scores, "coverage") == pytest.approx(interval(coverage))
    assert scores["metrics"]["all_tasks"]["value"] == pytest.approx(sum(r["score"] for r in rows) / len(rows))
    assert scores["all_tasks_overall"] == scores["metrics"]["all_tasks"]["value"]
    assert scores["scored_overall"] == pytest.approx(np.nanmean(values))
    assert scores["metrics"]["scored_n"] == {"label": "tasks scored", "headline": False,
                                             "value": float(np.sum(~np.isnan(values))), "ci": None,
                                             "n": int(np.sum(~np.isnan(values)))}
    # each estimate's n is the items it rests on (Scored: the scored tasks; All: every task).
    scored_items = int(np.sum(~np.isnan(values)))
    assert (scores["metrics"]["scored"]["n"], scores["metrics"]["all_tasks"]["n"]) == (scored_items, len(rows))
    assert scores["metrics"]["coverage"]["n"] == len(rows) and scored_items < len(rows)
    headline = evalnb.open_run(params)
    from evalnb.pages.report import headline as headline_table
    table = headline_table(headline)
    headline.close()
    assert list(table.index[:2]) == ["all_tasks", "scored"] and table.loc["scored", "ci_low"] == ci_of(scores, "scored")[0]


# --- GeoExpertQueries: the autorater's runs resampled within queries ---------------------------------

def test_geoexpertqueries_runs_are_resampled_as_repeats(server: FakeLLMServer, tmp_path: Path) -> None:
    replies = {"geq-01": [2, 1, 2], "geq-02": [0, 0, 1], "geq-03": [2, 2, 2], "geq-04": [1, 0, 1], "geq-05": [2, 0, 1]}
    queries = {q["id"]: q["query"] for q in json.loads((GEQ / "queries.json").read_text())}

    def respond(request: RecordedRequest) -> Text:
        task = next(i for i, q in queries.items() if f"QUERY:\n{q}\n" in request.prompt)
        return Text(json.dumps({"rating": replies[task].pop(0)}))
    server.responder = respond
    scores = run_all({"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp_path / "run"),
                      "data": str(GEQ / "queries.json"), "traces": str(GEQ / "traces.jsonl"),
                      "rating_date": "2026-11-30", "concurrency": 1, "n_boot": N_BOOT, "seed": 0,
                      "judges": [{"provider": "openai", "name": "autorater", "base_url": f"{server.url}/v1"}]})
    rows = scores["tasks"]
    values = np.zeros((3, len(rows)))                       # a missing trace scores 0 in every run
    for j, row in enumerate(rows):
        for run in row["runs"]:
            values[run["run"] - 1, j] = {0: 0.0, 1: 0.5, 2: 1.0}[run["rating"]]
    assert [r["status"] for r in rows].count("missing") == 1
    sample = replicates(values, [""] * len(rows), N_BOOT, 0)
    assert ci_of(scores, "overall") == pytest.approx(interval([float(np.mean(m)) for m in sample]))
    assert scores["overall"] == pytest.approx(np.mean([r["score"] for r in rows]))
    assert scores["ci"]["overall"]["repeats"] == 3
