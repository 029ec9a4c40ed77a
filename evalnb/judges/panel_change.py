"""Panel change: the same contestants, on the same items, scored by two panels (for example a
run's answers imported into another run, re-judged under another panel).

Two panels' numbers never stand in one leaderboard: the fingerprint refuses to mix them
(``judge_panel`` differs), and this is the explicit mode that puts them side by side instead
(``evalnb compare --panels A1,B1 A2,B2``, or ``panels: [[...], [...]]`` in a compare
parameters file). The first list is the comparison (its leaderboard and every other section);
the second appears only here. Contestants are matched by model name; what the two sides must
share is the task set (refused otherwise); every fingerprint part that differs between them
is named.

For each matched model, the first headline metric under each panel (its value as every view
computes a declared metric: :func:`evalnb.stats.intervals.metric_value`, channels included) and the
shift (second minus first) with a paired interval; and Kendall's tau-b between the two panels'
orders with its interval. Both intervals are added statistics, so they come from
the compare's cluster bootstrap (:mod:`evalnb.stats.clustered`, through
:func:`evalnb.comparison.joint.joint_bootstrap`, as the leaderboard's pairs and ranks do): every
replicate draws the benchmark's clusters (``ItemResults.clusters``: the corpus documents its
tasks ask about, say; an item's repeats go with it) within its strata, once, and applies the
draw to every model under both panels. With every item its own cluster this is
the item bootstrap within strata, replicate for replicate (the same random stream). ``n`` is the
items either panel's metric counts for the model and ``n_clusters`` the clusters holding them.
A headline metric without a ratio form (a metric function of a benchmark's own) has no cluster
bootstrap here, as it has no pairs or rank intervals: its shift is shown without an interval,
and a line says so. The items are the first run's (the two sides share their task set); an item
a run lacks is unscored there (NaN), as in the joint bootstrap. Where the two sides' answers
differ on an item (runs generated separately rather than re-judged), the shift mixes the
panel's change with the answers' own; the count is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from evalnb.stats import reliability, smallsample, intervals as stats
from evalnb.stats.ranks import average_ranks
from evalnb.records.fingerprint import differing, moved_to_shared
from evalnb.records.stores import read_json_if_exists
from evalnb.views.labels import estimate_title
from evalnb.views.tables import Estimate, Layout, readable
from evalnb.core.types import Metric
from evalnb.views.words import plural
from evalnb.comparison.compare import Comparison, RunRecord
from evalnb.comparison.leaderboard import headline_metrics
from evalnb.comparison.joint import Joint, aligned, joint_bootstrap
from evalnb.judges.panel import raw

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


def side_value(cmp: Comparison, run: RunRecord, ids: Sequence[str], strata: Sequence[str],
               metric: Metric) -> float | None:
    """``metric`` of ``run`` on the items ``ids`` (in that order; ``strata`` theirs), with its channels."""
    results = run.results(cmp.benchmark)
    return stats.metric_value(metric, aligned(results, ids), strata,
                              {name: aligned(results, ids, name) for name in results.channels})


def counted(joint: Joint, keys: Sequence[str], metric: str, n_items: int) -> tuple[int, int]:
    """How many items the metric counts under either key's run, and the clusters holding them
    (a metric without a ratio form: every item, every cluster)."""
    if any((key, metric) not in joint.forms for key in keys):
        return n_items, joint.design.n_clusters
    used = np.logical_or.reduce([joint.forms[(key, metric)].used() for key in keys])
    return int(used.sum()), int(len(np.unique(joint.design.item_cluster[used])))


def small_sample_note(joint: Joint, n_clusters: int) -> tuple[bool, str | None]:
    """Whether the row's intervals are withheld (fewer clusters than the minimum, or a stratum of
    one cluster), and the note saying so or that they are approximate
    (:mod:`evalnb.stats.smallsample`)."""
    held = smallsample.support(joint.design.cluster_stratum, np.ones(joint.design.n_clusters, bool),
                               joint.cluster_noun)
    if held.withheld or n_clusters < smallsample.MIN_CLUSTERS:
        return True, f"intervals {held.withheld or f'withheld: {n_clusters} clusters'}"
    if n_clusters < smallsample.APPROXIMATE_BELOW:
        return False, f"approximate intervals: {n_clusters} {plural(joint.cluster_noun)} (under {smallsample.APPROXIMATE_BELOW})"
    return False, None


def panel_change(cmp: Comparison) -> pd.DataFrame | None:
    """Each model's score under both panels and its shift, and Kendall's tau-b between the two
    panels' orders, with cluster-bootstrap intervals, n and the number of clusters (None: not
    a panel-change comparison)."""
    import pandas as pd

    matched = pairs(cmp)
    if not cmp.panel_b or not matched:
        return None
    metric = headline_metrics(cmp)[0]
    first_results = matched[0][0].results(cmp.benchmark)   # its items, strata and clusters are the design's
    ids = list(first_results.ids)
    strata = [first_results.strata.get(i, "") for i in ids]
    keys = [(f"A {a.label}", f"B {a.label}") for a, _ in matched]
    joint = joint_bootstrap(cmp.benchmark, [(key, run.results(cmp.benchmark)) for pair, both in zip(matched, keys)
                                            for key, run in zip(both, pair)], [metric], n_boot=cmp.n_boot,
                            seed=cmp.seed)
    noun = joint.cluster_noun   # what was resampled: the benchmark's clusters, or its items
    draws = ({key: joint.draws[(key, metric.name)] for both in keys for key in both}
             if any(m.name == metric.name for m in joint.metrics) else None)
    first = [side_value(cmp, a, ids, strata, metric) for a, _ in matched]
    second = [side_value(cmp, b, ids, strata, metric) for _, b in matched]
    tau_reps = None if draws is None else reliability.kendall_tau_b(
        np.stack([draws[ka] for ka, _ in keys], axis=1), np.stack([draws[kb] for _, kb in keys], axis=1))
    none = np.array([])   # no replicates (a metric without a ratio form): no interval
    tau = reliability.interval(reliability.kendall_tau_b(np.array(first, dtype=float), np.array(second, dtype=float)),
                               none if tau_reps is None else tau_reps, len(ids), cmp.n_boot, cmp.seed, noun)
    ranks_a = average_ranks(np.array(first, dtype=float), highest_first=True)
    ranks_b = average_ranks(np.array(second, dtype=float), highest_first=True)
    rows = []
    for (a, b), (ka, kb), pa, pb, rank_a, rank_b in zip(matched, keys, first, second, ranks_a, ranks_b):
        n, n_clusters = counted(joint, (ka, kb), metric.name, len(ids))
        withheld, note = small_sample_note(joint, n_clusters) if draws is not None else (False, None)
        shift = reliability.interval(None if pa is None or pb is None else pb - pa,
                                     none if draws is None or withheld else draws[kb] - draws[ka], n, cmp.n_boot,
                                     cmp.seed, noun)
        shown_tau = reliability.interval(tau.mean, none, tau.n, cmp.n_boot, cmp.seed, noun) if withheld else tau
        rows.append({"model": a.label, "metric": metric.name, "panel_a": pa, "panel_b": pb,
                     **raw("shift", shift),
                     "n": n, "n_clusters": n_clusters, "rank_a": rank_a, "rank_b": rank_b,
                     "answers_differ": answers_differ(a, b), **raw("kendall_tau", shown_tau), "cluster": noun,
                     **({"note": note} if note else {})})
    table = pd.DataFrame(rows)
    cmp.tables["panel_change"] = table
    unmatched = sorted({r.model for r in cmp.runs} ^ {r.model for r in cmp.panel_b})
    print(f"Panel change: panel A is the leaderboard's ({cmp.runs[0].dir.parent}), panel B "
          f"({cmp.panel_b[0].dir.parent}) is shown here only; differing fingerprint parts: "
          f"{', '.join(differing_parts(cmp)) or 'none'}"
          + (f"; not scored by both panels, left out: {', '.join(unmatched)}" if unmatched else "")
          + "; " + resampled(metric, joint.design.n_clusters if draws is not None else None, noun, len(set(strata))))
    return readable(table.set_index("model"), change_layout(noun))


def resampled(metric: Metric, n_clusters: int | None, noun: str, n_strata: int) -> str:
    """What the intervals resampled (``n_clusters`` None: no cluster bootstrap, and why)."""
    if n_clusters is None:
        return (f"{metric.name} has no ratio form (a metric function of the benchmark's own), so no cluster "
                "bootstrap: its shift is shown without an interval")
    return (f"intervals: a cluster bootstrap over {n_clusters} {plural(noun)}"
            + (f" within {n_strata} strata" if n_strata > 1 else ""))


def change_layout(noun: str) -> Layout:
    """The table as shown: the shift with its n, the clusters (``noun``) beside it, the ranks,
    and Kendall's tau-b (one number for the table, on every row)."""
    return Layout((Estimate(estimate_title("shift"), "shift", "shift_low", "shift_high", "n"),
                   Estimate(estimate_title("kendall_tau"), "kendall_tau", "kendall_tau_low", "kendall_tau_high")),
                  hidden=("cluster",), rename={"n_clusters": plural(noun)},
                  fractions=("panel_a", "panel_b"))
