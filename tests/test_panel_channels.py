"""The judge-panel views of compare on a benchmark of one's own whose headline metric reads
named channels: leave-one-judge-out and panel change compute it as every view does
(channels included), and panel change's intervals resample the benchmark's clusters (documents)
within its strata. Every number is checked against numpy written here, the
intervals against a cluster bootstrap written from scratch on the same random stream.

The benchmark (``Graded``, selected by its import path as a lab's would be) has three judges;
an item's score is their mean; its channels are ``credit`` (the score times the item's weight)
and ``weight``; its first headline metric is the weighted score Σ credit / Σ weight
(``ratio("credit", "weight")``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from evalnb.api import BaseBenchmark, ItemResults, Metric, mean, ratio
from evalnb.comparison.compare import open_compare
from evalnb.comparison.leaderboard import leaderboard
from evalnb.judges.panel import leave_one_judge_out, without_judge
from evalnb.judges.panel_change import panel_change

MODULE = "tests.test_panel_channels"
JUDGES = ("judge1 m1", "judge2 m2", "judge3 m3")
PARTS = ("grading", "judge_panel", "tasks")
N_BOOT = 400


def _own_weighted(values: np.ndarray, strata: Mapping[str, np.ndarray], *, credit: np.ndarray,
                  weight: np.ndarray) -> np.ndarray:
    """Σ credit / Σ weight written by hand: a metric function of one's own, with no ratio form."""
    return credit.sum(axis=(-2, -1)) / weight.sum(axis=(-2, -1))


class Graded(BaseBenchmark):
    """A judge-graded benchmark of one's own, reduced to what compare reads (``results``)."""

    NAME: ClassVar[str] = "graded"
    OPTIONS: ClassVar[Mapping[str, Any]] = {}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = PARTS
    ITEM: ClassVar[type] = dict
    ITEM_NOUN: ClassVar[str] = "question"
    CLUSTER_NOUN: ClassVar[str | None] = "document"
    FIGURE: ClassVar[str] = "none"
    METRICS: ClassVar[tuple[Metric, ...]] = (
        Metric("weighted", "weighted: Σ credit / Σ weight", ratio("credit", "weight"), headline=True,
               channels=("credit", "weight")),
        Metric("plain", "plain: mean score", mean(), headline=True))

    def fingerprint_parts(self) -> dict[str, Any]:
        raise NotImplementedError

    def generation_calls(self) -> list[Any]:
        raise NotImplementedError

    def judge_calls(self, responses: Any) -> list[Any]:
        raise NotImplementedError

    def score(self, responses: Any, judgements: Any) -> dict[str, Any]:
        raise NotImplementedError

    def evidence(self, responses: Any, judgements: Any, scores: Any) -> list[Any]:
        raise NotImplementedError

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]
        score = [float(np.mean(list(r["judges"].values()))) for r in rows]
        return ItemResults(ids=tuple(r["task_id"] for r in rows), values=[score],
                           scores={r["task_id"]: s for r, s in zip(rows, score)},
                           statuses={r["task_id"]: "ok" for r in rows}, attempted={r["task_id"]: True for r in rows},
                           strata={r["task_id"]: r["stratum"] for r in rows},
                           judges={r["task_id"]: dict(r["judges"]) for r in rows},
                           clusters={r["task_id"]: r["doc"] for r in rows if r.get("doc")},
                           channels={"credit": [[s * r["weight"] for r, s in zip(rows, score)]],
                                     "weight": [[float(r["weight"]) for r in rows]]})

    @classmethod
    def breakdown(cls, scores: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def figure(cls, scores: Any) -> Any:
        raise NotImplementedError


class PlainFirst(Graded):
    """The same, its first headline metric over the scores alone (the channels' metric second)."""

    METRICS: ClassVar[tuple[Metric, ...]] = (Graded.METRICS[1], Graded.METRICS[0])


class OwnFunction(Graded):
    """The same weighted score, as a function of one's own that reads the channels (no ratio form)."""

    METRICS: ClassVar[tuple[Metric, ...]] = (
        Metric("weighted", "weighted, by hand", _own_weighted, headline=True, channels=("credit", "weight")),)


# --- the data: 42 questions about 13 documents in two strata ------------------------------------------

def design(clustered: bool = True) -> tuple[list[str], list[str], np.ndarray]:
    """Each question's document and stratum, and its weight: documents of 1 to 6 questions,
    every document within one stratum."""
    sizes = [6, 1, 4, 2, 5, 3, 1, 4, 2, 6, 3, 1, 4]
    docs = [f"doc{d}" for d, size in enumerate(sizes) for _ in range(size)]
    strata = ["hard" if int(d[3:]) % 3 == 0 else "easy" for d in docs]
    weights = 1.0 + np.arange(len(docs)) % 3
    return (docs if clustered else [""] * len(docs)), strata, weights


def verdicts(seed: int, quality: float, shift: float = 0.0) -> np.ndarray:
    """Three judges' verdicts on each question; a document moves its questions together."""
    docs, _, _ = design()
    rng = np.random.default_rng(seed)
    per_doc = {d: rng.normal(0, 0.15) for d in dict.fromkeys(docs)}
    truth = np.array([quality + per_doc[d] for d in docs])[:, None] + rng.normal(0, 0.1, size=(len(docs), 1))
    return np.round(np.clip(truth + shift + rng.normal(0, 0.05, size=(len(docs), 3)), 0, 1), 2)


def graded_run(root: Path, name: str, v: np.ndarray, *, bench: str = "Graded", panel: str = "p",
               clustered: bool = True) -> Path:
    docs, strata, weights = design(clustered)
    run = root / name
    run.mkdir(parents=True)
    tasks = [{"task_id": f"q{i}", "doc": docs[i], "stratum": strata[i], "weight": float(weights[i]),
              "judges": dict(zip(JUDGES, map(float, v[i])))} for i in range(len(v))]
    config = {"model": {"provider": "openai", "name": name},
              "judges": [{"provider": "openai", "name": f"m{j}"} for j in (1, 2, 3)]}
    (run / "scores.json").write_text(json.dumps({"benchmark": f"{MODULE}:{bench}", "run_name": name,
                                                 "offline": False, "complete": True, "tasks": tasks,
                                                 "config": config}))
    (run / "fingerprint.json").write_text(json.dumps({"sha256": name, "parts": {
        p: {"sha256": panel if p == "judge_panel" else p, "value": p} for p in PARTS}}))
    return run


def weighted(v: np.ndarray, items: Any = slice(None)) -> float:
    """The weighted score by hand: Σ (panel mean x weight) / Σ weight over ``items``."""
    w = design()[2][items]
    return float((v.mean(axis=1)[items] * w).sum() / w.sum())


QUALITY = {"a": 0.7, "b": 0.55, "c": 0.45}
SHIFT = {"a": -0.1, "b": -0.25, "c": 0.05}   # panel B: harsher on a and b, kinder to c (b and c swap)


def two_panels(tmp_path: Path, bench: str = "Graded", clustered: bool = True
               ) -> tuple[list[Path], list[Path], dict[str, np.ndarray], dict[str, np.ndarray]]:
    va = {n: verdicts(i, q) for i, (n, q) in enumerate(QUALITY.items())}
    vb = {n: verdicts(i, q, SHIFT[n]) for i, (n, q) in enumerate(QUALITY.items())}
    first = [graded_run(tmp_path / "A", n, v, bench=bench, clustered=clustered) for n, v in va.items()]
    second = [graded_run(tmp_path / "B", n, v, bench=bench, panel="q", clustered=clustered) for n, v in vb.items()]
    return first, second, va, vb


# --- leave-one-judge-out -------------------------------------------------------------------------------

def test_lojo_computes_a_channel_metric_with_its_channels_and_does_not_recompute_it_without_a_judge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The full panel's value is Σ credit / Σ weight, as numpy gives it (before, the metric was
    called without its channels: an exception). Without a judge the channels, which the
    benchmark derived from the judges, cannot be recomputed: the view says so and shows nothing."""
    first, _, va, _ = two_panels(tmp_path)
    cmp = open_compare(first, tmp_path / "cmp", n_boot=200)
    board = leaderboard(cmp)
    for run in cmp.runs:
        assert without_judge(cmp, run, None) == pytest.approx(weighted(va[run.label]), abs=1e-12)
        assert cmp.tables["leaderboard"].loc[run.label, "weighted"] == pytest.approx(weighted(va[run.label]))
        with pytest.raises(ValueError, match="reads the channel"):
            without_judge(cmp, run, JUDGES[0])
    assert board is not None
    capsys.readouterr()
    assert leave_one_judge_out(cmp) is None
    said = capsys.readouterr().out
    assert "not computed" in said and "weighted" in said and "credit, weight" in said
    assert "leave_one_judge_out" not in cmp.tables


def test_lojo_on_a_plugin_whose_first_metric_reads_the_scores(tmp_path: Path) -> None:
    """Its first headline metric is the plain mean: rescored by the other judges' mean, by hand."""
    first, _, va, _ = two_panels(tmp_path, bench="PlainFirst")
    cmp = open_compare(first, tmp_path / "cmp", n_boot=200)
    leave_one_judge_out(cmp)
    table = cmp.tables["leave_one_judge_out"].set_index(["without", "model"])
    for j, judge in enumerate(JUDGES):
        others = [k for k in range(3) if k != j]
        for name, v in va.items():
            assert table.loc[(judge, name), "score_full"] == pytest.approx(v.mean(), abs=1e-12)
            assert table.loc[(judge, name), "score_without"] == pytest.approx(v[:, others].mean(), abs=1e-12)


# --- panel change --------------------------------------------------------------------------------------

def scratch_cluster_bootstrap(docs: list[str], strata: list[str], n_boot: int, seed: int) -> list[np.ndarray]:
    """Each replicate's items, drawn by hand: per stratum (labels sorted) its clusters (in the
    order of their first item; an item without a document its own) drawn with replacement,
    ``rng.integers(0, C_s, size=(n_boot, C_s))``, the stratum's draws made before the next's."""
    labels = [d or f"item {i}" for i, d in enumerate(docs)]
    rng = np.random.default_rng(seed)
    members, draws = [], []
    for stratum in sorted(set(strata)):
        clusters = list(dict.fromkeys(lab for lab, s in zip(labels, strata) if s == stratum))
        members.append([[i for i, (lab, s) in enumerate(zip(labels, strata)) if lab == c and s == stratum]
                        for c in clusters])
        draws.append(rng.integers(0, len(clusters), size=(n_boot, len(clusters))))
    return [np.array([i for m, d in zip(members, draws) for c in d[r] for i in m[c]]) for r in range(n_boot)]


def percentile(values: list[float]) -> tuple[float, float]:
    low, high = np.quantile(np.asarray(values), [0.025, 0.975])
    return float(low), float(high)


@pytest.mark.parametrize("clustered", [True, False], ids=["documents", "every-item-its-own"])
def test_panel_change_values_and_cluster_bootstrap_against_numpy(tmp_path: Path, clustered: bool,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The values are Σ credit / Σ weight under each panel; the shift's and tau's intervals are
    those of a cluster bootstrap written from scratch (documents within strata; with every item
    its own cluster, the item bootstrap within strata) on the same random stream."""
    first, second, va, vb = two_panels(tmp_path, clustered=clustered)
    cmp = open_compare(panels=[first, second], out=tmp_path / "cmp", n_boot=N_BOOT, seed=7)
    panel_change(cmp)
    said = capsys.readouterr().out
    table = cmp.tables["panel_change"].set_index("model")
    docs, strata, _ = design(clustered)
    samples = scratch_cluster_bootstrap(docs, strata, N_BOOT, 7)
    models = list(QUALITY)
    reps_a = np.array([[weighted(va[n], s) for n in models] for s in samples])
    reps_b = np.array([[weighted(vb[n], s) for n in models] for s in samples])
    for k, n in enumerate(models):
        row = table.loc[n]
        assert row.panel_a == pytest.approx(weighted(va[n]), abs=1e-12)
        assert row.panel_b == pytest.approx(weighted(vb[n]), abs=1e-12)
        assert row["shift"] == pytest.approx(weighted(vb[n]) - weighted(va[n]), abs=1e-12)
        low, high = percentile(list(reps_b[:, k] - reps_a[:, k]))
        assert (row.shift_low, row.shift_high) == pytest.approx((low, high), abs=1e-9)
        assert row.n == len(docs)
        assert row.n_clusters == (13 if clustered else len(docs))
        # under 30 clusters the intervals are labelled approximate (docs/statistics.md, small samples)
        if clustered:
            assert row.note == "approximate intervals: 13 documents (under 30)"
        else:
            assert "note" not in table   # 42 questions, each its own cluster
    tau = scipy_stats.kendalltau([weighted(va[n]) for n in models], [weighted(vb[n]) for n in models]).statistic
    assert table.kendall_tau.iloc[0] == pytest.approx(tau)
    tau_reps = [scipy_stats.kendalltau(a, b).statistic for a, b in zip(reps_a, reps_b)]
    assert (table.kendall_tau_low.iloc[0], table.kendall_tau_high.iloc[0]) == pytest.approx(
        percentile([t for t in tau_reps if np.isfinite(t)]), abs=1e-9)
    assert list(table.rank_b) == [1.0, 3.0, 2.0]
    assert (f"a cluster bootstrap over {13 if clustered else len(docs)} {'documents' if clustered else 'questions'} "
            "within 2 strata") in said
    # Every table heads its count with one rule: the pairwise verdicts' bootstrap names what it drew as this one does.
    from evalnb.comparison.leaderboard import joint
    assert joint(cmp).cluster_noun == ("document" if clustered else "question")


def test_singleton_clusters_give_the_item_bootstrap_within_strata(tmp_path: Path) -> None:
    """With no document declared the draw is the protocol's item bootstrap (stats module doc:
    per stratum ``idx[rng.integers(0, n_s, size=(n_boot, n_s))]``), replicate for replicate."""
    first, second, va, vb = two_panels(tmp_path, clustered=False)
    cmp = open_compare(panels=[first, second], out=tmp_path / "cmp", n_boot=N_BOOT, seed=3)
    panel_change(cmp)
    table = cmp.tables["panel_change"].set_index("model")
    _, strata, _ = design(False)
    rng = np.random.default_rng(3)
    columns = np.empty((N_BOOT, len(strata)), dtype=int)
    for s in sorted(set(strata)):
        idx = np.flatnonzero(np.array(strata) == s)
        columns[:, idx] = idx[rng.integers(0, len(idx), size=(N_BOOT, len(idx)))]
    for n in QUALITY:
        shifts = [weighted(vb[n], c) - weighted(va[n], c) for c in columns]
        assert (table.loc[n, "shift_low"], table.loc[n, "shift_high"]) == pytest.approx(percentile(shifts), abs=1e-9)


def test_panel_change_with_a_metric_function_of_ones_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A headline metric of one's own that reads the channels and has no ratio form: its values
    and shift as numpy gives them (before: an exception), no interval, and a line saying why."""
    first, second, va, vb = two_panels(tmp_path, bench="OwnFunction")
    cmp = open_compare(panels=[first, second], out=tmp_path / "cmp", n_boot=N_BOOT)
    panel_change(cmp)
    assert "has no ratio form" in capsys.readouterr().out
    table = cmp.tables["panel_change"].set_index("model")
    for n in QUALITY:
        assert table.loc[n, "shift"] == pytest.approx(weighted(vb[n]) - weighted(va[n]), abs=1e-12)
        assert pd.isna(table.loc[n, "shift_low"]) and pd.isna(table.loc[n, "shift_high"])
    assert table.kendall_tau_low.isna().all() and table.kendall_tau_high.isna().all()


def test_metric_value_passes_the_channels_a_metric_declares() -> None:
    """The one function every view calls: the metric's function with the strata and, by keyword,
    its declared channels (a missing one named); the same number the leaderboard's interval has."""
    from evalnb.stats import intervals as stats

    rng = np.random.default_rng(5)
    credit, weight = rng.uniform(0, 3, size=(2, 17)), rng.integers(1, 4, size=(2, 17)).astype(float)
    credit[0, 3] = np.nan   # a cell without a value: left out of both sums
    metric = Graded.METRICS[0]
    present = ~np.isnan(credit)
    expected = credit[present].sum() / weight[present].sum()
    channels = {"credit": credit, "weight": weight}
    assert stats.metric_value(metric, np.zeros((2, 17)), None, channels) == pytest.approx(expected, abs=1e-12)
    assert stats.metric_intervals(np.zeros((2, 17)), [metric], n_boot=50, channels=channels)["weighted"].mean == \
        pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="reads channel\\(s\\) weight, which the results do not have"):
        stats.metric_value(metric, np.zeros((2, 17)), None, {"credit": credit})
