"""Can the judges be trusted? Agreement within a panel (the judges of a panel, or an
autorater's independent runs: whatever per-item scores the benchmark declares), and the
benchmark's own analysis across runs (what it declares; e.g. the rubric items models miss)."""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalnb.comparison.compare import Comparison
from evalnb.evidence.items_html import TitledTables
from evalnb.views.tables import Layout, readable

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure


def verdict_table(cmp: Comparison) -> pd.DataFrame:
    """One row per (model, item, judge) verdict."""
    rows = [(run.label, item, judge, score) for run in cmp.runs
            for item, judges in run.results(cmp.benchmark).judges.items() for judge, score in judges.items()]
    return pd.DataFrame(rows, columns=["model", "item", "judge", "score"])


def judge_means(cmp: Comparison) -> pd.DataFrame:
    table = verdict_table(cmp)
    out = table.groupby(["model", "judge"])["score"].agg(["count", "mean"]) if len(table) else pd.DataFrame()
    cmp.tables["judge_means"] = out
    return readable(out, Layout(rename={"mean": "mean score"}, empty=NO_JUDGES))


NO_JUDGES = "No per-item judge scores: the benchmark's runs have no judge panel or rater runs."


def pairwise(scores: pd.DataFrame, threshold: float) -> list[dict[str, Any]]:
    """Pearson r, mean absolute difference and share of items differing by more than
    ``threshold``, for each pair of judges (columns), over items both scored."""
    rows = []
    for a, b in itertools.combinations(scores.columns, 2):
        both = scores[[a, b]].dropna()
        diff = (both[a] - both[b]).abs()
        constant = both[a].nunique() < 2 or both[b].nunique() < 2
        rows.append({"judge_a": a, "judge_b": b, "n": len(both),
                     "pearson_r": None if constant or len(both) < 2 else float(np.corrcoef(both[a], both[b])[0, 1]),
                     "mean_abs_diff": float(diff.mean()) if len(both) else None,
                     "share_over_threshold": float((diff > threshold).mean()) if len(both) else None})
    return rows


def judge_agreement(cmp: Comparison) -> pd.DataFrame:
    table = verdict_table(cmp)
    rows = []
    for model, part in table.groupby("model"):
        wide = part.pivot_table(index="item", columns="judge", values="score")
        rows += [{"model": model, **row} for row in pairwise(wide, cmp.threshold)]
    out = pd.DataFrame(rows, columns=["model", "judge_a", "judge_b", "n", "pearson_r", "mean_abs_diff",
                                      "share_over_threshold"])
    cmp.tables["judge_agreement"] = out
    return readable(out, agreement_layout(cmp.threshold))


def agreement_layout(threshold: float) -> Layout:
    return Layout(rename={"share_over_threshold": f"share |A - B| > {threshold:g}"},
                  empty="Fewer than two judges per item: no pair to compare.")


def disagreements(cmp: Comparison) -> pd.DataFrame:
    """The items whose judges disagree most (those that disagree at all), with where to find
    their evidence: paths relative to the compare's own folder, which the record is in."""
    table = verdict_table(cmp)
    layout = Layout(empty="No item's judges disagree.")
    if not len(table):
        return readable(pd.DataFrame(columns=["model", "item", "spread", "scores", "record"]), layout)
    dirs = {run.label: os.path.relpath(run.dir, cmp.home) for run in cmp.runs}
    spread = table.groupby(["model", "item"])["score"].agg(lambda s: s.max() - s.min()).rename("spread")
    scores = table.groupby(["model", "item"]).apply(
        lambda g: ", ".join(f"{j}={v:.2f}" for j, v in zip(g.judge, g.score)), include_groups=False).rename("scores")
    out = pd.concat([spread, scores], axis=1).reset_index().sort_values("spread", ascending=False)
    out = out[out.spread > 0].head(cmp.top).reset_index(drop=True)   # no unnamed index in disagreements.csv
    out["record"] = [f"{dirs[m]}/scores.json#{item}" for m, item in zip(out.model, out["item"])]
    out["show"] = [f"evalnb show {dirs[m]} {item}" for m, item in zip(out.model, out["item"])]
    cmp.tables["disagreements"] = out
    return readable(out.set_index(["model", "item"]), layout)


# --- the benchmark's own analysis ------------------------------------------------------------------

def _runs(cmp: Comparison) -> list[tuple[str, Any]]:
    return [(run.label, run.scores) for run in cmp.runs]


def benchmark_analysis(cmp: Comparison) -> TitledTables:
    """The tables the benchmark declares for a comparison, under their titles."""
    tables = cmp.benchmark.compare_tables(_runs(cmp), cmp.top)
    for n, (_, table) in enumerate(tables, start=1):
        cmp.tables[f"benchmark_table_{n}"] = table
    return TitledTables(tables, empty="The benchmark declares no further analysis across runs.")


def benchmark_compare_figure(cmp: Comparison) -> ReportFigure | None:
    """The figure the benchmark declares for a comparison (None when it declares none)."""
    from evalnb.views.figures import figure_style, save_figure

    with figure_style():
        fig = cmp.benchmark.compare_figure(_runs(cmp))
        return save_figure(fig, cmp.out / "figures", "benchmark_analysis") if fig is not None else None
