"""Paired differences on the items both models attempted: a sensitivity view beside the
pairwise verdicts (:func:`evalnb.pages.statistics.pairwise`), not a verdict.

The verdicts compare the two headline numbers, each over the full task set. This table answers
the question a reviewer asks when per-model context caps leave two models different item sets:
on the items both attempted, is A ahead? It is the mean of the per-item score differences over
those common items, with the percentile interval of the compare's cluster bootstrap
(:func:`evalnb.stats.pairwise.common_difference`): whole clusters of the common items (the
benchmark's unit of randomisation, such as the corpus document its tasks ask about) drawn within its strata, the
compare's ``n_boot`` and ``seed``. ``n_common`` counts the common items and ``n_clusters`` the
clusters among them. With every item its own cluster this is the item bootstrap over the
common items, replicate for replicate.
"""

from __future__ import annotations

import itertools

import pandas as pd

from evalnb.benchmarks.base import cluster_labels, cluster_noun
from evalnb.stats.pairwise import common_difference
from evalnb.views.labels import estimate_title
from evalnb.views.tables import Estimate, Layout, readable
from evalnb.core.types import ItemResults
from evalnb.views.words import plural
from evalnb.comparison.compare import Comparison
from evalnb.comparison.leaderboard import ranked

COLUMNS = ["model_a", "model_b", "n_common", "mean_diff", "ci_low", "ci_high", "n_clusters", "note", "cluster"]


def paired_differences(cmp: Comparison) -> pd.DataFrame:
    """Each pair of models (A above B in the leaderboard): the mean of A − B over the items both
    attempted, with a paired cluster-bootstrap interval over those items (see the module)."""
    order = list(ranked(cmp).index)
    runs = sorted(cmp.runs, key=lambda r: order.index(r.label))
    # The runs share their task set: the first run's clusters and strata are every run's.
    first = runs[0].results(cmp.benchmark) if runs else None
    labels = cluster_labels(first) if first is not None else None
    of = dict(zip(first.ids, labels)) if first is not None and labels is not None else None
    # What a resampled unit is, as the verdicts' bootstrap names it (stages.joint): a cluster, else an item.
    noun = cluster_noun(cmp.benchmark) if of else str(getattr(cmp.benchmark, "ITEM_NOUN", "item"))
    rows = []
    for a, b in itertools.combinations(runs, 2):
        ra, rb = a.results(cmp.benchmark), b.results(cmp.benchmark)
        sa, sb = _attempted_scores(ra), _attempted_scores(rb)
        common = [i for i in ra.ids if i in sa and i in sb]
        diff = common_difference([sa[i] - sb[i] for i in common], clusters=[of[i] for i in common] if of else None,
                                 strata=[ra.strata.get(i, "") for i in common], n_boot=cmp.n_boot, seed=cmp.seed)
        excludes = diff.low is not None and diff.high is not None and (diff.low > 0 or diff.high < 0)
        rows.append({"model_a": a.label, "model_b": b.label, "n_common": diff.n, "mean_diff": diff.mean,
                     "ci_low": diff.low, "ci_high": diff.high, "n_clusters": diff.n_clusters,
                     "note": ("interval excludes 0: " + (f"{a.label} ahead" if (diff.mean or 0) > 0 else f"{b.label} ahead"))
                     if excludes else "interval includes 0", "cluster": noun})
    table = pd.DataFrame(rows, columns=COLUMNS)
    cmp.tables["paired_differences"] = table
    return readable(table, paired_layout(noun))


def paired_layout(noun: str = "cluster") -> Layout:
    """The table as shown: the estimate with its n (the common items), then how many clusters
    (``noun``: the benchmark's cluster, a document) those items fall in."""
    return Layout((Estimate(estimate_title("mean_diff"), "mean_diff", "ci_low", "ci_high", "n_common"),),
                  hidden=("cluster",), rename={"n_clusters": plural(noun)},
                  empty="Fewer than two runs: no pair to compare.")


def _attempted_scores(results: ItemResults) -> dict[str, float]:
    return {i: s for i, s in results.scores.items() if s is not None and results.attempted.get(i, True)}
