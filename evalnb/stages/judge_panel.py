"""The judges across compared runs: the panel's reliability (Krippendorff's alpha, each
judge's offset from the panel mean) per model and pooled, and the leaderboard recomputed
without each judge (leave-one-judge-out).

These apply to a panel: two or more configured judges scoring the same items
(:func:`evalnb.stages.judge_stats.is_panel`); elsewhere each view returns None and its cell
shows nothing. Pooled numbers stack every model's items; the resample draws an item (or its
declared cluster) once for every model, so the models' answers to one task move together.
``compare.json`` and the CSV files get the raw numbers (``x``, ``x_low``, ``x_high``); the
notebook shows each as ``value [low, high]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evalnb.core import reliability
from evalnb.core.estimates import estimate_text
from evalnb.core.stats import Interval, strata_columns
from evalnb.stages.compare import Comparison, RunRecord, headline_metrics, ranked
from evalnb.stages.judge_stats import clusters_of, is_panel, judge_labels, judge_matrix

if TYPE_CHECKING:
    import pandas as pd


def raw(name: str, interval: Interval) -> dict[str, Any]:
    """The raw columns of one estimate: ``name``, ``name_low``, ``name_high``."""
    return {name: interval.mean, f"{name}_low": interval.low, f"{name}_high": interval.high}


def shown(table: pd.DataFrame, names: Sequence[str], index: Sequence[str]) -> pd.DataFrame:
    """``table`` as the notebook shows it: each estimate as ``value [low, high]``."""
    from evalnb.core.tables import readable

    view = table.copy()
    for name in names:
        view[name] = [estimate_text(v, lo, hi) for v, lo, hi in
                      zip(view[name], view[f"{name}_low"], view[f"{name}_high"])]
        view = view.drop(columns=[f"{name}_low", f"{name}_high"])
    return readable(view.set_index(list(index)))


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
        rows.append({"model": who, "judge": "panel", "number": "alpha", "n": len(matrix), **raw("estimate", alpha)})
        rows += [{"model": who, "judge": label, "number": "offset", "n": o.n, **raw("estimate", o)}
                 for label, o in zip(labels, offsets)]
    table = pd.DataFrame(rows)
    cmp.tables["judge_reliability"] = table
    return shown(table, ["estimate"], ["model", "number", "judge"])


# --- leave-one-judge-out ------------------------------------------------------------------------------

def without_judge(cmp: Comparison, run: RunRecord, leave: str | None) -> float | None:
    """The first headline metric of ``run`` with each judged item scored by the mean of the
    other judges (``leave=None``: the leaderboard's own value, recomputed)."""
    results = run.results(cmp.benchmark)
    values = np.array(results.values, dtype=float)
    if leave is not None:
        for col, item in enumerate(results.ids):
            others = [s for label, s in results.judges.get(item, {}).items() if label != leave]
            if results.judges.get(item) and not np.isnan(values[0, col]):
                values[:, col] = np.mean(others) if others else np.nan
    groups = strata_columns([results.strata.get(i, "") for i in results.ids], len(results.ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = float(headline_metrics(cmp)[0].fn(values[None, :, :], groups)[0])
    return value if np.isfinite(value) else None


def leave_one_judge_out(cmp: Comparison) -> pd.DataFrame | None:
    """For each judge: the leaderboard without it (each item scored by the other judges'
    mean), each model's score and rank change, and Kendall's tau-b to the full panel's order."""
    import pandas as pd

    from evalnb.core.tables import Layout, readable

    labels = panel_runs(cmp)
    if not labels or any(run.results(cmp.benchmark).repeats != 1 for run in cmp.runs):
        return None
    board = ranked(cmp)
    runs = [run for label in board.index for run in cmp.runs if run.label == label]
    full = np.array([without_judge(cmp, run, None) for run in runs], dtype=float)
    full_ranks = reliability.ranks_descending(full)
    rows = []
    for leave in labels:
        scores = np.array([without_judge(cmp, run, leave) for run in runs], dtype=float)
        ranks = reliability.ranks_descending(scores)
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
    from evalnb.stages.judge_stats import judge_family

    families = {label: judge_family(cmp.runs[0].scores.get("config") or {}, label) for label in labels}
    for run in cmp.runs[1:]:
        for label in labels:
            other = judge_family(run.scores.get("config") or {}, label)
            if other != families[label]:
                print(f"WARNING: judge {label} has family {families[label]!r} in {cmp.runs[0].dir} but {other!r} "
                      f"in {run.dir}; using {families[label]!r}")
    return families
