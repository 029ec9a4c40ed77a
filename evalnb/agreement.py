"""Can the judges be trusted? Agreement within a panel (WildTrace judges, GeoExpertQueries
runs) and which rubric items models miss (WildTrace)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalnb.compare import Comparison
from evalnb.judging import JudgeReplyError, field_of

if TYPE_CHECKING:
    from evalnb.figures import ReportFigure


def verdict_table(cmp: Comparison) -> pd.DataFrame:
    """One row per (model, item, judge) verdict."""
    return pd.DataFrame([(run.label, item, judge, score) for run in cmp.runs
                         for item, judge, score in cmp.benchmark.verdicts(run.scores)],
                        columns=["model", "item", "judge", "score"])


def judge_means(cmp: Comparison) -> pd.DataFrame:
    table = verdict_table(cmp)
    out = table.groupby(["model", "judge"])["score"].agg(["count", "mean"]) if len(table) else pd.DataFrame()
    cmp.tables["judge_means"] = out
    return out


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
    return out


def disagreements(cmp: Comparison) -> pd.DataFrame:
    """The items whose judges disagree most, with where to find their records."""
    table = verdict_table(cmp)
    if not len(table):
        return pd.DataFrame(columns=["model", "item", "spread", "scores", "record"])
    dirs = {run.label: run.dir for run in cmp.runs}
    spread = table.groupby(["model", "item"])["score"].agg(lambda s: s.max() - s.min()).rename("spread")
    scores = table.groupby(["model", "item"]).apply(
        lambda g: ", ".join(f"{j}={v:.2f}" for j, v in zip(g.judge, g.score)), include_groups=False).rename("scores")
    out = pd.concat([spread, scores], axis=1).reset_index().sort_values("spread", ascending=False).head(cmp.top)
    out["record"] = [f"{dirs[m] / 'scores.json'}#{item}" for m, item in zip(out.model, out["item"])]
    cmp.tables["disagreements"] = out
    return out.set_index(["model", "item"])


# --- rubric analysis (WildTrace) --------------------------------------------------------------------

def points_awarded(reply: str | None) -> list[float] | None:
    """The judge's per-item points, when its reply lists them."""
    try:
        value, _ = field_of(reply or "", "points_awarded")
    except JudgeReplyError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    return [float(v) for v in value]


def rubric_items(cmp: Comparison) -> pd.DataFrame:
    """How often each rubric item was awarded (share of its points, over judges), per model;
    the items missed most come first."""
    if cmp.name != "wildtrace":
        return pd.DataFrame()
    from evalnb.benchmarks.wildtrace import read_tasks
    tasks = {t.task_id: t for t in read_tasks(Path(cmp.runs[0].scores["config"]["data"]))}
    shares: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in cmp.runs:
        for row in run.scores["tasks"]:
            if row["task_id"] not in tasks:
                continue   # the data file changed since the run: nothing to attribute to
            rubric = tasks[row["task_id"]].rubric
            for verdict in row["judges"]:
                awarded = points_awarded(verdict["reply"])
                if awarded is None or len(awarded) != len(rubric):
                    continue   # a reply that does not itemise cannot be attributed to items
                for i, (item, points) in enumerate(zip(rubric, awarded)):
                    if item.points:
                        shares[(row["task_id"], i)][run.label].append(min(1.0, max(0.0, points / item.points)))
    rows = []
    for (task_id, i), per_model in shares.items():
        item = tasks[task_id].rubric[i]
        model_rates = {m: float(np.mean(v)) for m, v in per_model.items()}
        rows.append({"task_id": task_id, "item": f"P{i + 1}", "points": item.points,
                     "criterion": item.criterion[:90], **model_rates,
                     "award_rate": float(np.mean(list(model_rates.values())))})
    out = pd.DataFrame(rows)
    if len(out):
        out = out.sort_values(["award_rate", "task_id", "item"]).set_index(["task_id", "item"])
    cmp.tables["rubric_items"] = out
    return out.head(cmp.top) if len(out) else out


def points_distribution(cmp: Comparison) -> ReportFigure | None:
    """WildTrace: per model, the distribution of each judged task's points (panel mean total)."""
    if cmp.name != "wildtrace":
        return None
    from evalnb.figures import new_figure, save_figure

    fig = new_figure((6, 3.5))
    ax = fig.subplots()
    for run in cmp.runs:
        totals = [np.mean([j["total"] for j in row["judges"]]) for row in run.scores["tasks"]
                  if row["judges"] and all(j["total"] is not None for j in row["judges"])]
        ax.hist(totals, bins=10, range=(0, 100), alpha=0.5, label=run.label)
    ax.set_xlabel("points per judged task (panel mean of totals)")
    ax.set_ylabel("tasks")
    ax.legend(fontsize=7)
    ax.set_title("points distribution per task")
    return save_figure(fig, cmp.out / "figures", "points_distribution")
