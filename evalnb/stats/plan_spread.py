"""How sure a planned number of items is: the spread of N implied by the pilot, and the design
effect a pilot of few clusters can support.

The items needed, n = (z_{1−α/2} + z_{1−β})² · Var(d) / δ² · deff, are a plug-in estimate: a
pilot of 150 items estimates Var(d) and deff with error, so the N it gives can be far from the
one the truth needs (with clusters of 20, from 2,885 to 15,983 between its 10 and 90 %
quantiles). :func:`items_spread` says how far: the pilot's clusters resampled with replacement
within strata (the cluster bootstrap of :mod:`evalnb.stats.clustered`, seeded), Var(d) and deff
recomputed from the item influences on each replicate, and the 10 % and 90 % quantiles of the
N each replicate implies.

A design effect below 1 says clustering helped, which items sharing a document rarely do; from
few clusters it is mostly noise (0.75 from 10 clusters would plan 140 items where 186 are
needed). Decision: the design effect used is floored at 1 (:func:`floored_design_effect`), and
the row says when it was floored or rests on fewer than
:data:`evalnb.stats.smallsample.APPROXIMATE_BELOW` clusters.
"""

from __future__ import annotations

import numpy as np

from evalnb.stats import power as formulas, resample, smallsample
from evalnb.stats.clustered import Design, design_se

REPLICATES = 200
QUANTILES = (0.1, 0.9)


def floored_design_effect(deff: float, n_clusters: int) -> tuple[float, str | None]:
    """The design effect to plan with, and a note when it was floored or rests on few clusters."""
    notes = []
    if deff < 1:
        notes.append(f"design effect {deff:.2f} floored at 1")
    if n_clusters < smallsample.APPROXIMATE_BELOW:
        notes.append(f"design effect from {n_clusters} clusters (under {smallsample.APPROXIMATE_BELOW}): approximate")
    return max(1.0, deff), "; ".join(notes) or None


def items_spread(z: np.ndarray, used: np.ndarray, design: Design, delta: float, alpha: float, power: float,
                 *, n_boot: int = REPLICATES, seed: int = 0) -> tuple[int, int] | None:
    """The 10 % and 90 % quantiles of the items needed over ``n_boot`` cluster resamples of the
    pilot (module doc); None where fewer than half the replicates give a defined variance."""
    from evalnb.stats.clustered import cluster_weights

    if design.n_clusters < 2:
        return None
    members = [np.flatnonzero(design.item_cluster == c) for c in range(design.n_clusters)]
    needed = []
    for block in cluster_weights(design, n_boot, resample.generator(seed)):
        for counts in block.astype(int):
            drawn = [c for c, k in enumerate(counts) for _ in range(k)]   # a cluster drawn twice is two clusters
            items = np.concatenate([members[c] for c in drawn])
            strata = design.cluster_stratum[drawn]
            as_clusters = Design(np.repeat(np.arange(len(drawn)), [len(members[c]) for c in drawn]), strata)
            se_items, n = design_se(z[items], used[items], as_clusters.singletons())
            se_clustered, _ = design_se(z[items], used[items], as_clusters)
            if not se_items or se_clustered is None:
                continue
            deff = max(1.0, (se_clustered / se_items) ** 2)
            needed.append(formulas.items_needed(n * se_items ** 2, delta, alpha, power, deff))
    if len(needed) < n_boot // 2:
        return None
    low, high = np.quantile(needed, QUANTILES)
    return formulas.whole(float(low)), formulas.whole(float(high))
