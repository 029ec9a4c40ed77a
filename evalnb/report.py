"""Tables and figures for the report notebook.

Figures are :class:`evalnb.figures.ReportFigure` objects, built with matplotlib's object API
(no pyplot, no backend chosen): each is saved as PNG and PDF under ``figures/`` and returned,
so it shows as an image in the notebook whatever ``MPLBACKEND`` the kernel inherited.
matplotlib is imported when a figure is drawn, not with this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalnb.accounting import usage_rows
from evalnb.pipeline import Run, headline_table
from evalnb.records import read_json_if_exists

if TYPE_CHECKING:
    from evalnb.figures import ReportFigure

STATUSES = ("ok", "out_of_context", "refused", "empty", "failed_permanent", "failed_transient",
            "pending")


def scores(run: Run) -> dict[str, Any]:
    data = read_json_if_exists(run.path("scores.json"))
    if data is None:
        raise FileNotFoundError(f"{run.path('scores.json')}: run the aggregate stage first")
    return data


def headline(run: Run) -> pd.DataFrame:
    return headline_table(scores(run))


def status_breakdown(run: Run) -> pd.DataFrame:
    """Every status of reading 5, with zero rows kept so absences are visible."""
    counts = Counter(row["status"] for row in scores(run)["tasks"])
    rows = [(s, counts.get(s, 0)) for s in STATUSES] + [(s, n) for s, n in counts.items()
                                                         if s not in STATUSES]
    total = sum(n for _, n in rows)
    return pd.DataFrame([(s, n, n / total if total else 0.0) for s, n in rows],
                        columns=["status", "tasks", "share"]).set_index("status")


def usage_table(run: Run) -> pd.DataFrame:
    """Reported token usage (and cost, where the parameters price the model)."""
    rows = usage_rows(scores(run)["usage"])
    columns = ["stage", "model", "calls", "attempts", "input_tokens", "output_tokens", "cost_usd"]
    return pd.DataFrame(rows, columns=columns).set_index(["stage", "model"])


def _figure(figsize: tuple[float, float]) -> ReportFigure:
    from evalnb.figures import new_figure
    return new_figure(figsize)


def _save(run: Run, fig: ReportFigure, name: str) -> ReportFigure:
    from evalnb.figures import save_figure
    return save_figure(fig, run.path("figures"), name)


def _title(run: Run, text: str) -> str:
    offline = scores(run).get("offline")
    return f"{text}\n(offline approximation, not comparable with the paper)" if offline else text


def score_histogram(run: Run) -> ReportFigure:
    rows = scores(run)["tasks"]
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    ax.hist([r["score"] for r in rows if r["score"] is not None], bins=10, range=(0, 1),
            color="#4c72b0", edgecolor="white")
    ax.set_xlabel("task score (0 for out-of-context, refused, empty, failed)")
    ax.set_ylabel("tasks")
    ax.set_title(_title(run, f"{run.config.model.name}: task scores"))
    return _save(run, fig, "score_histogram")


def judge_scores(rows: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (task, judge) verdict that succeeded."""
    return pd.DataFrame([(r["task_id"], j["judge"], j["model"], j["score"])
                         for r in rows for j in r.get("judges", []) if j["score"] is not None],
                        columns=["task_id", "judge", "model", "score"])


def accuracy_by_k(run: Run) -> ReportFigure:
    """GeoKTools: mean score per K with its bootstrap interval as error bars."""
    data = scores(run)
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    if data.get("ci"):
        ks = [k for k, v in data["by_k"].items() if v["n"]]
        means = [data["by_k"][k]["mean"] for k in ks]
        lows = [m - data["ci"]["by_k"][k]["low"] for k, m in zip(ks, means)]
        highs = [data["ci"]["by_k"][k]["high"] - m for k, m in zip(ks, means)]
        ax.bar([f"K={k}\n(n={data['by_k'][k]['n']})" for k in ks], means, color="#4c72b0",
               yerr=[lows, highs], capsize=6)
        ax.axhline(data["overall"], color="black", linestyle="--", linewidth=1,
                   label=f"overall {data['overall']:.3f}")
        ax.legend(loc="lower right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (mean case score)")
    ci = (data.get("ci") or {}).get("overall") or {}
    ax.set_title(_title(run, f"accuracy by K, {int(ci.get('confidence', 0.95) * 100)}% bootstrap CI "
                             f"(n_boot={ci.get('n_boot', '-')}, seed={ci.get('seed', '-')})"))
    return _save(run, fig, "accuracy_by_k")


def breakdown(run: Run) -> pd.DataFrame:
    """The benchmark's own breakdown: per judge (WildTrace), per K with CIs (GeoKTools),
    ratings and agreement (GeoExpertQueries)."""
    data = scores(run)
    rows: list[tuple[Any, ...]]
    if run.config.benchmark == "geoexpertqueries":
        rows = [(f"rating {k}", v) for k, v in data["rating_counts"].items()]
        rows += [(k.replace("_", " "), v) for k, v in data["agreement"].items()]
        rows += [("overall", data["overall"]), *[(f"CI {b}", v) for b, v in zip(("low", "high"), _ci(data, None))]]
        return pd.DataFrame(rows, columns=["", "value"]).set_index("")
    if run.config.benchmark == "geoktools":
        rows = [("overall", data["n"], data["overall"], *_ci(data, None))]
        if data.get("by_k"):
            rows += [(f"K={k}", v["n"], v["mean"], *_ci(data, k)) for k, v in data["by_k"].items()]
        rows.append(("macro over K", None, data.get("macro_over_k"), None, None))
        return pd.DataFrame(rows, columns=["stratum", "n", "mean", "ci_low", "ci_high"]).set_index("stratum")
    table = judge_scores(data["tasks"])
    return table.groupby(["judge", "model"])["score"].agg(["count", "mean", "std"]) if len(table) \
        else pd.DataFrame(columns=["count", "mean", "std"])


def _ci(data: Mapping[str, Any], k: str | None) -> tuple[float | None, float | None]:
    ci = data.get("ci")
    if not ci:
        return None, None
    interval = ci["overall"] if k is None else ci["by_k"][k]
    return interval["low"], interval["high"]


def ratings_and_agreement(run: Run) -> ReportFigure:
    """GeoExpertQueries: the rating distribution, and each query's ratings across runs."""
    data = scores(run)
    fig = _figure((9, 3.5))
    left, right = fig.subplots(1, 2)
    counts = data["rating_counts"]
    left.bar(list(counts), list(counts.values()), color="#4c72b0")
    left.set_xlabel("rating")
    left.set_ylabel("autorater calls")
    left.set_title("rating distribution")
    rated = [r for r in data["tasks"] if r["ratings"] and None not in r["ratings"]]
    for i, row in enumerate(rated):
        right.scatter([i] * len(row["ratings"]), row["ratings"], alpha=0.5, color="#dd8452")
    right.set_xticks(range(len(rated)), [r["task_id"] for r in rated], rotation=60, fontsize=7)
    right.set_yticks([0, 1, 2])
    share = data["agreement"]["unanimous_share"]
    right.set_title(f"ratings per run (unanimous: {share:.0%})" if share is not None else "ratings per run")
    fig.suptitle(_title(run, f"autorater {data['judge_config']['model']}, {data['judge_config']['num_runs']} runs"))
    fig.tight_layout()
    return _save(run, fig, "ratings_and_agreement")


def benchmark_figure(run: Run) -> ReportFigure:
    """The benchmark's own figure: judge distributions (WildTrace), accuracy by K
    (GeoKTools), ratings and run-to-run agreement (GeoExpertQueries)."""
    figures = {"geoktools": accuracy_by_k, "geoexpertqueries": ratings_and_agreement}
    return figures.get(run.config.benchmark, judge_distributions)(run)


def judge_distributions(run: Run) -> ReportFigure:
    table = judge_scores(scores(run)["tasks"])
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    labels = sorted(table["judge"].unique()) if len(table) else []
    if labels:
        ax.boxplot([table.loc[table.judge == j, "score"] for j in labels], showmeans=True)
        ax.set_xticks(range(1, len(labels) + 1),
                      [f"{j}\n{table.loc[table.judge == j, 'model'].iloc[0]}" for j in labels])
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("normalised judge score")
    ax.set_title(_title(run, "per-judge score distributions"))
    return _save(run, fig, "judge_distributions")
