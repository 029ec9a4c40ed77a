"""Panel change: the same contestants, on the same items, scored by two panels (for example a
run's answers imported into another run, re-judged under another panel).

Two panels' numbers never stand in one leaderboard: the fingerprint refuses to mix them
(``judge_panel`` differs), and this is the explicit mode that puts them side by side instead
(``evalnb compare --panels A1,B1 A2,B2``, or ``panels: [[...], [...]]`` in a compare
parameters file). The first list is the comparison (its leaderboard and every other section);
the second appears only here. Contestants are matched by model name; what the two sides must
share is the task set (refused otherwise); every fingerprint part that differs between them
is named.

For each matched model, the first headline metric under each panel and the shift (second
minus first) with a paired bootstrap interval; and Kendall's tau-b between the two panels'
orders with its interval. One bootstrap: every replicate draws the items once (within the
benchmark's strata, as the leaderboard's intervals do) and applies the draw to every model
under both panels. Lane E's cluster bootstrap (``core/clustered.py``) may replace the item
draw. Where the two sides' answers differ on an item (runs generated separately rather than
re-judged), the shift mixes the panel's change with the answers' own; the count is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from evalnb.core import reliability
from evalnb.core.fingerprint import differing, moved_to_shared
from evalnb.core.records import read_json_if_exists
from evalnb.core.stats import strata_columns
from evalnb.stages.compare import Comparison, RunRecord, headline_metrics
from evalnb.stages.judge_panel import raw, shown

if TYPE_CHECKING:
    import pandas as pd


def pairs(cmp: Comparison) -> list[tuple[RunRecord, RunRecord]]:
    """(first panel's run, second panel's run) for each model both panels scored."""
    second = {run.model: run for run in cmp.panel_b or []}
    return [(run, second[run.model]) for run in cmp.runs if run.model in second]


def differing_parts(cmp: Comparison) -> list[str]:
    """What differs between the two panels' first runs, each thing once (the shared part key by key)."""
    return differing(cmp.runs[0].fingerprint, (cmp.panel_b or [])[0].fingerprint, moved=moved_to_shared(cmp.benchmark))


def answers_differ(a: RunRecord, b: RunRecord) -> int | None:
    """Items whose answer text differs between the two runs (None: a run has no responses.json)."""
    ra, rb = (read_json_if_exists(run.dir / "responses.json") for run in (a, b))
    if ra is None or rb is None:
        return None
    first = {r["task_id"]: r.get("response") for r in ra.get("records", [])}
    return sum(1 for r in rb.get("records", []) if first.get(r["task_id"], r.get("response")) != r.get("response"))


def column_draws(strata: Sequence[str], n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, items) column indices, each column drawn within its stratum."""
    groups = strata_columns(strata, len(strata))
    rng = np.random.default_rng(seed)
    draws = np.empty((n_boot, len(strata)), dtype=np.intp)
    for idx in groups.values():
        draws[:, idx] = idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))]
    return draws


def metric_replicates(cmp: Comparison, run: RunRecord, ids: Sequence[str], draws: np.ndarray,
                      strata: Sequence[str]) -> tuple[float, np.ndarray]:
    """The first headline metric of ``run`` over ``ids`` (its value, and on each draw)."""
    results = run.results(cmp.benchmark)
    where = {item: col for col, item in enumerate(results.ids)}
    values = np.array(results.values, dtype=float)[:, [where[i] for i in ids]]
    fn, groups = headline_metrics(cmp)[0].fn, strata_columns(strata, len(ids))
    with np.errstate(invalid="ignore", divide="ignore"):
        point = float(fn(values[None, :, :], groups)[0])
        reps = np.concatenate([fn(np.transpose(values[:, block], (1, 0, 2)), groups)
                               for block in np.array_split(draws, max(1, draws.size // 2_000_000))])
    return point, np.asarray(reps, dtype=float)


def panel_change(cmp: Comparison) -> pd.DataFrame | None:
    """Each model's score under both panels and its shift, and Kendall's tau-b between the two
    panels' orders, with bootstrap intervals (None: not a panel-change comparison)."""
    import pandas as pd

    matched = pairs(cmp)
    if not cmp.panel_b or not matched:
        return None
    ids = [i for i in matched[0][0].results(cmp.benchmark).ids
           if all(i in run.results(cmp.benchmark).ids for pair in matched for run in pair)]
    results = matched[0][0].results(cmp.benchmark)
    strata = [results.strata.get(i, "") for i in ids]
    draws = column_draws(strata, cmp.n_boot, cmp.seed)
    first = [metric_replicates(cmp, a, ids, draws, strata) for a, _ in matched]
    second = [metric_replicates(cmp, b, ids, draws, strata) for _, b in matched]
    tau = reliability.interval(reliability.kendall_tau_b([p for p, _ in first], [p for p, _ in second]),
                               reliability.kendall_tau_b(np.stack([r for _, r in first], axis=1),
                                                         np.stack([r for _, r in second], axis=1)),
                               len(ids), cmp.n_boot, cmp.seed)
    ranks_a = reliability.ranks_descending([p for p, _ in first])
    ranks_b = reliability.ranks_descending([p for p, _ in second])
    metric = headline_metrics(cmp)[0].name
    rows = []
    for (a, b), (pa, ra), (pb, rb), rank_a, rank_b in zip(matched, first, second, ranks_a, ranks_b):
        shift = reliability.interval(pb - pa, rb - ra, len(ids), cmp.n_boot, cmp.seed)
        rows.append({"model": a.label, "metric": metric, "panel_a": pa, "panel_b": pb, **raw("shift", shift),
                     "rank_a": rank_a, "rank_b": rank_b, "answers_differ": answers_differ(a, b),
                     **raw("kendall_tau", tau)})
    table = pd.DataFrame(rows)
    cmp.tables["panel_change"] = table
    unmatched = sorted({r.model for r in cmp.runs} ^ {r.model for r in cmp.panel_b})
    print(f"Panel change: panel A is the leaderboard's ({cmp.runs[0].dir.parent}), panel B "
          f"({cmp.panel_b[0].dir.parent}) is shown here only; differing fingerprint parts: "
          f"{', '.join(differing_parts(cmp)) or 'none'}"
          + (f"; not scored by both panels, left out: {', '.join(unmatched)}" if unmatched else ""))
    return shown(table, ["shift", "kendall_tau"], ["model"])

