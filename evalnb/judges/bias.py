"""The judges' bias across compared runs: self-preference (a judge from a contestant's
family) and length (does a judge reward long responses).

Self-preference applies where a judge's ``family`` (an endpoint's free-text metadata) equals
a contestant's: for that judge j and that contestant c, with d = (j's score - the other
judges' mean) on an item,

    b = mean of d over c's items - mean of d over the items of the contestants of other families

(pooled over those contestants), with a paired bootstrap interval: one resample of items (or
their declared clusters) shared by every contestant. A judge that favours its family scores
its family's answers above its colleagues by more than it scores the others': b > 0. Where no
family matches, or no contestant of another family was compared, the view is None.

Length: per judge, Spearman's rho between its score and the response's length in characters
and the slope of its score on log(length), within each model (length varies with quality
across models, so the within-model numbers are the diagnostic) and pooled over models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from evalnb.stats import judge_bias
from evalnb.comparison.compare import Comparison, RunRecord
from evalnb.judges.panel import judge_families, panel_runs, raw, shown
from evalnb.judges.scores import clusters_of, judge_labels, stored_lengths

if TYPE_CHECKING:
    import pandas as pd


def contestant_family(run: RunRecord) -> str | None:
    return ((run.scores.get("config") or {}).get("model") or {}).get("family")


def gaps(cmp: Comparison, run: RunRecord, judge: str, ids: list[str]) -> np.ndarray:
    """Per item of ``ids``: the judge's score minus the other judges' mean (NaN: not judged)."""
    verdicts = run.results(cmp.benchmark).judges
    out = []
    for item in ids:
        scores = verdicts.get(item) or {}
        others = [s for label, s in scores.items() if label != judge]
        out.append(scores[judge] - np.mean(others) if judge in scores and others else np.nan)
    return np.array(out, dtype=float)


def item_ids(cmp: Comparison) -> tuple[list[str], list[Any] | None, str]:
    """Every compared item id (the first run's order, then any others), and their clusters."""
    ids = list(dict.fromkeys(i for run in cmp.runs for i in run.results(cmp.benchmark).ids))
    clusters, unit = clusters_of(cmp.runs[0].results(cmp.benchmark), ids, cmp.benchmark)
    return ids, clusters, unit


def self_preference(cmp: Comparison) -> pd.DataFrame | None:
    """Per judge and contestant of the judge's family: the self-preference estimate, its
    two parts, and a paired bootstrap interval."""
    import pandas as pd

    labels = panel_runs(cmp)
    families = judge_families(cmp, labels) if labels else {}
    ids, clusters, unit = item_ids(cmp)
    rows = []
    for judge, family in families.items():
        if not family:
            continue
        own = [run for run in cmp.runs if contestant_family(run) == family]
        rest = [run for run in cmp.runs if contestant_family(run) != family]
        if not rest:
            continue
        others = np.vstack([gaps(cmp, run, judge, ids) for run in rest])
        for run in own:
            numbers = judge_bias.self_preference(gaps(cmp, run, judge, ids), others, n_boot=cmp.n_boot,
                                                 seed=cmp.seed, clusters=clusters, unit=unit)
            rows.append({"judge": judge, "family": family, "contestant": run.label,
                         "n_own": numbers["own_family_gap"].n, "n_other": numbers["other_contestants_gap"].n,
                         **{k: v for name, interval in numbers.items() for k, v in raw(name, interval).items()}})
    if not rows:
        return None
    table = pd.DataFrame(rows)
    cmp.tables["self_preference"] = table
    return shown(table, ["self_preference", "own_family_gap", "other_contestants_gap"], ["judge", "contestant"])


def length_bias(cmp: Comparison) -> pd.DataFrame | None:
    """Per judge, within each model and pooled: Spearman's rho of score with response length
    and the slope of score on log(length), each with its bootstrap interval."""
    import pandas as pd

    labels = judge_labels(cmp.runs[0].results(cmp.benchmark))
    lengths = {run.label: stored_lengths(run.dir) for run in cmp.runs}
    if not labels or not any(lengths.values()):
        return None
    rows = []
    for judge in labels:
        pooled: dict[str, list[Any]] = {"scores": [], "chars": [], "clusters": []}
        for run in cmp.runs:
            results = run.results(cmp.benchmark)
            ids = [i for i in results.ids if judge in (results.judges.get(i) or {}) and i in lengths[run.label]]
            clusters, unit = clusters_of(results, ids, cmp.benchmark)
            scores = [results.judges[i][judge] for i in ids]
            chars = [lengths[run.label][i] for i in ids]
            pooled["scores"] += scores
            pooled["chars"] += chars
            pooled["clusters"] += clusters if clusters is not None else ids
            rows.append(_length_row(cmp, judge, run.label, scores, chars, clusters, unit))
        if len(cmp.runs) > 1:
            rows.append(_length_row(cmp, judge, "pooled", pooled["scores"], pooled["chars"], pooled["clusters"],
                                    unit))
    table = pd.DataFrame([r for r in rows if r is not None])
    if not len(table):
        return None
    cmp.tables["length_bias"] = table
    return shown(table, ["spearman_rho", "slope_per_log_char"], ["judge", "model"], n={"spearman_rho": "n"})


def _length_row(cmp: Comparison, judge: str, model: str, scores: list[float], chars: list[int],
                clusters: list[Any] | None, unit: str) -> dict[str, Any] | None:
    if len(scores) < 3:
        return None
    numbers = judge_bias.length_bias(scores, chars, n_boot=cmp.n_boot, seed=cmp.seed, clusters=clusters, unit=unit)
    return {"judge": judge, "model": model, "n": numbers["spearman_rho"].n,
            **{k: v for name, interval in numbers.items() for k, v in raw(name, interval).items()}}
