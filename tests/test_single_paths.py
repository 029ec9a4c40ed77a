"""One path for each of: drawing bootstrap replicates (``evalnb/stats/resample.py``), ranking
(``evalnb/stats/ranks.py``), and building a run's item results while its metrics are summarised
(``BaseBenchmark.with_metrics``).

The source checks read every module under ``evalnb/`` with :mod:`ast` (calls, not text: a
docstring that describes a draw is not a draw). The numbers are checked against scipy's
``rankdata`` and against the bootstrap written out here from numpy's generator.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from evalnb.benchmarks.base import BaseBenchmark, score_or_nan
from evalnb.core.types import ItemResults, Metric
from evalnb.stats import clustered, intervals, metrics, ranks, resample
from tests.conftest import ROOT

PACKAGE = ROOT / "evalnb"
RESAMPLER = PACKAGE / "stats" / "resample.py"
# Methods of a numpy Generator (or a random.Random) that draw; ``default_rng`` makes a Generator.
DRAWS = {"integers", "multinomial", "choice", "permutation", "permuted", "shuffle", "uniform", "random",
         "normal", "binomial", "poisson"}
# Draws outside the resampler, none of them a bootstrap replicate:
NOT_REPLICATES = {
    PACKAGE / "core" / "types.py": "the retry backoff's jitter",
    PACKAGE / "stats" / "metric_n.py": "probe values that find which items a metric reads",
    PACKAGE / "views" / "plots.py": "sideways jitter of a strip plot's points",
    PACKAGE / "judges" / "retest.py": "the retest study's sample of items, drawn once without replacement",
}


def calls(path: Path) -> list[str]:
    """The name of every function or method called in ``path`` (``rng.integers(...)``: integers)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            names.append(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_replicates_are_drawn_only_by_the_resampler() -> None:
    drawing = {path for path in modules() if {"default_rng", *DRAWS} & set(calls(path))}
    assert RESAMPLER in drawing
    assert drawing - {RESAMPLER} == set(NOT_REPLICATES), "a seeded draw outside stats/resample.py"
    in_stats = {path for path in drawing if path.parent == PACKAGE / "stats"}
    assert in_stats == {RESAMPLER, PACKAGE / "stats" / "metric_n.py"}
    assert calls(RESAMPLER).count("default_rng") == 1   # one generator for every replicate


def test_every_unweighted_rank_is_the_one_rank_function() -> None:
    ranking = {path for path in modules() if "rankdata" in calls(path)}
    assert ranking == {PACKAGE / "stats" / "ranks.py"}
    ranks_py = PACKAGE / "stats" / "ranks.py"
    own = {node.name for node in ast.parse(ranks_py.read_text("utf-8")).body if isinstance(node, ast.FunctionDef)}
    for path in set(modules()) - {ranks_py}:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef) and "ranks" in node.name:   # e.g. ranks_descending
                called = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                          for c in ast.walk(node) if isinstance(c, ast.Call)}
                assert called & own, f"{path.name}:{node.name} ranks without stats/ranks.py"


TIED = np.array([[0.3, 2.0, 1.0], [0.5, 2.0, 1.0], [0.3, 1.0, 1.0], [0.9, 4.0, 1.0], [0.1, 2.0, 1.0],
                 [0.5, 3.0, 1.0]])


@pytest.mark.parametrize("axis", [0, 1])
def test_average_ranks_are_scipys_rankdata_with_ties(axis: int) -> None:
    np.testing.assert_array_equal(ranks.average_ranks(TIED, axis=axis),
                                  scipy_stats.rankdata(TIED, axis=axis, method="average"))
    # highest first: the rank from the top, n + 1 - the rank from the bottom
    n = TIED.shape[axis]
    np.testing.assert_array_equal(ranks.average_ranks(TIED, axis=axis, highest_first=True),
                                  n + 1 - scipy_stats.rankdata(TIED, axis=axis, method="average"))


def test_average_ranks_of_one_column_and_undefined_values() -> None:
    np.testing.assert_array_equal(ranks.average_ranks([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
    assert np.isnan(ranks.average_ranks([3.0, np.nan, 1.0])).all()   # an undefined model: no order


def test_weighted_ranks_are_rankdata_of_the_expanded_sample() -> None:
    values = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0, 0.0, 9.0])
    weights = np.array([[1, 0, 2, 1, 3, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1]], dtype=float)
    got = ranks.weighted_ranks(values, weights)
    for row, w in zip(got, weights):
        expanded = np.repeat(values, w.astype(int))
        rank_of = dict(zip(expanded.tolist(), scipy_stats.rankdata(expanded, method="average")))
        np.testing.assert_array_equal([rank_of[v] for v, k in zip(values, w) if k], row[w > 0])
    np.testing.assert_array_equal(got[1], scipy_stats.rankdata(values, method="average"))


def test_the_item_bootstrap_is_the_documented_draw_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks (a few replicates each) give the stream written out here: per block, per
    stratum in label order, ``integers(0, n_s, (rows, n_s))``."""
    monkeypatch.setattr(resample, "CHUNK", 3 * 40)   # three replicates per block
    scores = np.random.default_rng(4).uniform(size=40)
    labels = ["b" if i % 3 else "a" for i in range(40)]
    strata = {s: np.flatnonzero(np.array(labels) == s) for s in ("a", "b")}
    rng, means = np.random.default_rng(11), []
    for start in range(0, 50, 3):
        rows = min(3, 50 - start)
        columns = np.empty((rows, 40), dtype=int)
        for idx in strata.values():
            columns[:, idx] = idx[rng.integers(0, len(idx), size=(rows, len(idx)))]
        means += list(scores[columns].mean(axis=1))
    expected = np.quantile(means, [0.025, 0.975])
    got = intervals.bootstrap_ci(list(scores), n_boot=50, seed=11, strata=labels)
    assert (got.low, got.high) == pytest.approx(tuple(expected), abs=1e-12)
    # the cluster bootstrap with every item its own cluster counts the same draws
    design = clustered.Design.of(40, None, labels)
    form = clustered.form_of(metrics.mean(), scores, intervals.strata_columns(labels, 40))
    assert form is not None
    draws = clustered.bootstrap_draws({0: form}, design, n_boot=50, seed=11)[0]
    np.testing.assert_allclose(np.sort(draws), np.sort(means), atol=1e-12)


class Rows(BaseBenchmark):
    """A benchmark reduced to what ``with_metrics`` reads: per-item rows and one metric."""

    NAME = "rows"
    METRICS = (Metric("mean", "Mean", metrics.mean(), headline=True),)
    ITEM_NOUN = "row"
    built = 0

    @classmethod
    def results(cls, scores: Any) -> ItemResults:
        cls.built += 1
        rows = scores["tasks"]
        return ItemResults(ids=tuple(r["id"] for r in rows), values=[[score_or_nan(r["score"]) for r in rows]],
                           scores={r["id"]: r["score"] for r in rows}, statuses={}, attempted={})


def test_with_metrics_builds_the_item_results_once() -> None:
    scores = np.random.default_rng(2).integers(0, 2, size=30).astype(float)
    bench = Rows(SimpleNamespace(options={"n_boot": 400, "seed": 3}))  # type: ignore[arg-type]
    body = bench.with_metrics({"complete": True, "tasks": [{"id": f"t{i}", "score": s} for i, s in enumerate(scores)]})
    assert Rows.built == 1
    entry = body["metrics"]["mean"]
    assert entry["value"] == pytest.approx(scores.mean()) and entry["n"] == 30
    columns = np.random.default_rng(3).integers(0, 30, size=(400, 30))
    low, high = np.quantile(scores[columns].mean(axis=1), [0.025, 0.975])
    assert (entry["ci"]["low"], entry["ci"]["high"]) == pytest.approx((low, high), abs=1e-12)
    assert body["uncertainty"]["metrics"]["mean"]["se"] == pytest.approx(scores.std(ddof=1) / np.sqrt(30))
