"""The judges across compared runs: the panel's reliability (Krippendorff's alpha, each
judge's offset from the panel mean) per model and pooled, and the leaderboard recomputed
without each judge (leave-one-judge-out).

These apply to a panel: two or more configured judges scoring the same items
(:func:`evalnb.judges.scores.is_panel`); elsewhere each view returns None and its cell
shows nothing. Pooled numbers stack every model's items; the resample draws an item (or its
declared cluster) once for every model, so the models' answers to one task move together.
``compare.json`` and the CSV files get the raw numbers (``x``, ``x_low``, ``x_high``); the
notebook shows each as ``value [low, high]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evalnb.stats import reliability, intervals as stats
from evalnb.stats.intervals import Interval
from evalnb.stats.ranks import average_ranks
from evalnb.core.types import Metric
from evalnb.comparison.compare import Comparison, RunRecord
from evalnb.comparison.leaderboard import headline_metrics, ranked
from evalnb.judges.scores import clusters_of, is_panel, judge_labels, judge_matrix

if TYPE_CHECKING:
    import pandas as pd


def raw(name: str, interval: Interval) -> dict[str, Any]:
    """The raw columns of one estimate: ``name``, ``name_low``, ``name_high``."""
    return {name: interval.mean, f"{name}_low": interval.low, f"{name}_high": interval.high}


def shown(table: pd.DataFrame, names: Sequence[str], index: Sequence[str],
          n: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``table`` (its raw numbers unchanged) indexed by ``index`` and shown through
    :func:`evalnb.views.tables.intervals_layout`: each estimate of ``names`` one cell,
    ``value [low, high]`` (``n``: the column holding an estimate's n, shown beside it)."""
    from evalnb.views.tables import intervals_layout, readable

    return readable(table.set_index(list(index)), intervals_layout(names, n=n))


def panel_runs(cmp: Comparison) -> list[str]:
    """The panel's judge labels, when the compared runs were judged by a panel (else [])."""
    first = cmp.runs[0]
    results = first.results(cmp.benchmark)
    return judge_labels(results) if is_panel(first.scores.get("config") or {}, results) else []


def stacked(cmp: Comparison, runs: Sequence[RunRecord], labels: Sequence[str]) -> tuple[np.ndarray, list[Any], str]:
    """Every run's items x judges rows stacked, each row's cluster (its item, or its declared
    cluster: shared by every model), and what a cluster is."""
    matrices: list[np.ndarray] = []
    clusters: list[Any] = []
    unit = "item"
    for run in runs:
        results = run.results(cmp.benchmark)
        ids, matrix = judge_matrix(results, labels)
        declared, unit = clusters_of(results, ids, cmp.benchmark)
        matrices.append(matrix)
        clusters += declared if declared is not None else ids
    return (np.vstack(matrices) if matrices else np.zeros((0, len(labels)))), clusters, unit


def panel_reliability(cmp: Comparison) -> pd.DataFrame | None:
    """Krippendorff's alpha (interval level) over the panel, and each judge's offset from the
    panel mean, per model and pooled over models, each with its bootstrap interval."""
    import pandas as pd

    labels = panel_runs(cmp)
    if not labels:
        return None
    rows = []
    for who, runs in [(run.label, [run]) for run in cmp.runs] + [("pooled", cmp.runs)]:
        matrix, clusters, unit = stacked(cmp, runs, labels)
        alpha = reliability.alpha_interval(matrix, n_boot=cmp.n_boot, seed=cmp.seed, clusters=clusters, unit=unit)
        offsets = reliability.judge_offsets(matrix, n_boot=cmp.n_boot, seed=cmp.seed, clusters=clusters, unit=unit)
        rows.append({"model": who, "judge": "panel", "number": "alpha", "n": len(matrix), **raw("estimate", alpha),
                     "note": reliability.alpha_note(len(set(clusters)))})
        rows += [{"model": who, "judge": label, "number": "offset", "n": o.n, **raw("estimate", o)}
                 for label, o in zip(labels, offsets)]
    table = pd.DataFrame(rows)
    cmp.tables["judge_reliability"] = table
    return shown(table, ["estimate"], ["model", "number", "judge"], n={"estimate": "n"})


# --- leave-one-judge-out ------------------------------------------------------------------------------

def without_judge(cmp: Comparison, run: RunRecord, leave: str | None) -> float | None:
    """The first headline metric of ``run`` with each judged item scored by the mean of the
    other judges (``leave=None``: the leaderboard's own value, recomputed), computed as every
    view computes a declared metric (:func:`evalnb.stats.intervals.metric_value`: its function with
    the strata and the channels it declares).

    Only ``values`` can be rescored without a judge. A channel (``ItemResults.channels``) is
    the benchmark's own per-item number, and it may be derived from the judges' verdicts (as
    ``examples/judge_qa``'s ``correct`` and ``attempted`` are: shares of the judges' grades),
    which evalnb cannot redo with one judge fewer; passed through unchanged, it would keep the
    left-out judge in the number. So a metric that reads a channel is not recomputed without
    a judge: ``leave`` set and such a metric is a ValueError saying so (its full-panel value,
    ``leave=None``, is computed with its channels)."""
    metric = headline_metrics(cmp)[0]
    if leave is not None and metric.channels:
        raise ValueError(not_recomputed(metric))
    results = run.results(cmp.benchmark)
    values = np.array(results.values, dtype=float)
    if leave is not None:
        for col, item in enumerate(results.ids):
            others = [s for label, s in results.judges.get(item, {}).items() if label != leave]
            if results.judges.get(item) and not np.isnan(values[0, col]):
                values[:, col] = np.mean(others) if others else np.nan
    return stats.metric_value(metric, values, [results.strata.get(i, "") for i in results.ids], results.channels)


def not_recomputed(metric: Metric) -> str:
    """Why leave-one-judge-out does not recompute ``metric`` (it reads channels)."""
    return (f"Leave-one-judge-out: not computed. The first headline metric, {metric.name}, reads the channel(s) "
            f"{', '.join(metric.channels)}, which the benchmark derives itself and which may come from the judges' "
            "verdicts; evalnb cannot recompute them without a judge, and keeping them would keep that judge in the "
            "number.")


def leave_one_judge_out(cmp: Comparison) -> pd.DataFrame | None:
    """For each judge: the leaderboard without it (each item scored by the other judges'
    mean), each model's score and rank change, and Kendall's tau-b to the full panel's order.
    None where it does not apply (no panel, repeats), and, said in a line, when the first
    headline metric reads channels (:func:`without_judge`)."""
    import pandas as pd

    from evalnb.views.tables import Layout, readable

    labels = panel_runs(cmp)
    if not labels or any(run.results(cmp.benchmark).repeats != 1 for run in cmp.runs):
        return None
    if headline_metrics(cmp)[0].channels:
        print(not_recomputed(headline_metrics(cmp)[0]))
        return None
    board = ranked(cmp)
    runs = [run for label in board.index for run in cmp.runs if run.label == label]
    full = np.array([without_judge(cmp, run, None) for run in runs], dtype=float)
    full_ranks = average_ranks(full, highest_first=True)
    rows = []
    for leave in labels:
        scores = np.array([without_judge(cmp, run, leave) for run in runs], dtype=float)
        ranks = average_ranks(scores, highest_first=True)
        tau = float(reliability.kendall_tau_b(full, scores))
        rows += [{"without": leave, "model": run.label, "score_full": f, "score_without": s,
                  "rank_full": rf, "rank_without": r, "rank_change": rf - r, "kendall_tau": tau}
                 for run, f, s, rf, r in zip(runs, full, scores, full_ranks, ranks)]
    table = pd.DataFrame(rows)
    cmp.tables["leave_one_judge_out"] = table
    # scores and tau are fractions: a 0 score shown as 0.000 beside 0.551, never as a count "0"
    return readable(table.set_index(["without", "model"]), Layout(fractions=("score_full", "score_without",
                                                                             "kendall_tau")))


def judge_families(cmp: Comparison, labels: Sequence[str]) -> Mapping[str, str | None]:
    """Each judge's family as the first run's parameters give it (``family`` is metadata,
    outside the fingerprint, so runs may disagree: the first one's reading is used, and a
    disagreement is said)."""
    from evalnb.judges.scores import judge_family

    families = {label: judge_family(cmp.runs[0].scores.get("config") or {}, label) for label in labels}
    for run in cmp.runs[1:]:
        for label in labels:
            other = judge_family(run.scores.get("config") or {}, label)
            if other != families[label]:
                print(f"WARNING: judge {label} has family {families[label]!r} in {cmp.runs[0].dir} but {other!r} "
                      f"in {run.dir}; using {families[label]!r}")
    return families
