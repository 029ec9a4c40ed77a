"""The planner: from a pilot, how many items (and clusters, and repeats) detect a difference δ.

``plan(pilot, delta=0.03, power=0.8, alpha=0.05)`` (and ``evalnb plan``) reads a pilot, either a
compare folder (its ``compare.json`` names the runs) or one finished run, and for each headline
metric (and each pair of models, for a compare) gives the formulas of :mod:`evalnb.stats.power`
their numbers:

- ``var_d``: the per-item variance of the differences, n · SE_Δ² with every item its own
  cluster (for a plain mean, the sample variance of the item differences); from one run,
  where there is no second model, 2 (1 − ρ) Var(s) with ρ assumed (``rho``, 0.5 by default,
  Miller's typical 0.3-0.7 between strong models; stated in the row);
- ``design_effect``: (clustered SE_Δ / SE_Δ)², so that ``items_needed`` counts items in
  clusters of the pilot's size, floored at 1, with a ``note`` when floored or from fewer than
  30 clusters (:mod:`evalnb.stats.plan_spread`); ``clusters_needed`` = items_needed / items per
  cluster;
- ``items_needed_10%``, ``items_needed_90%``: the spread of N the pilot implies, from a cluster
  bootstrap of the pilot (:func:`evalnb.stats.plan_spread.items_spread`);
- ``mde_now``: what the pilot itself could detect;
- with repeats in the pilot (a contestant's repeated runs, an autorater's runs), the
  within-item variance σ² of each model (the mean over items of the variance across repeats),
  ω² = Var(d of item means) − (σ_A² + σ_B²)/K₀ (floored at 0), and the items needed with
  K = 1, 2, 4, 8 repeats per item: what repeats would buy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalnb.benchmarks import benchmark_for
from evalnb.stats import plan_spread, power as formulas
from evalnb.stats.clustered import RatioForm, design_se
from evalnb.core.errors import ConfigError
from evalnb.records.stores import read_json_if_exists
from evalnb.views.tables import readable
from evalnb.core.types import ItemResults
from evalnb.comparison import compare, leaderboard
from evalnb.comparison.joint import Forms, aligned, forms_of

ASSUMED_RHO = 0.5
REPEATS = (1, 2, 4, 8)


def _pilot(path: Path) -> compare.Comparison:
    path = Path(path).expanduser().resolve()
    recorded = read_json_if_exists(path / "compare.json") if path.is_dir() else None
    if recorded is not None:
        return compare.open_compare([entry["dir"] for entry in recorded["runs"]], path)
    if path.is_dir() and (path / "scores.json").exists():
        run = compare.load_run(path)
        run.label = run.model
        return compare.Comparison([run], benchmark_for(run.scores["benchmark"], str(path)), path)
    raise ConfigError(f"{path}: not a pilot: expected a finished run directory (scores.json) or a compare folder "
                      "(compare.json)")


def within_item_variance(results: ItemResults, ids: Sequence[str]) -> float | None:
    """The mean over items (with two or more scored repeats) of the variance across repeats."""
    return formulas.within_item_variance(aligned(results, ids))[0]


def _row(found: Forms, z: np.ndarray, used: np.ndarray, delta: float, alpha: float, power: float) -> dict[str, Any]:
    se_items, n = design_se(z, used, found.design.singletons())
    se_clustered, n_clusters = design_se(z, used, found.design)
    if not se_items or se_clustered is None:
        return {"n_now": n, "n_clusters_now": n_clusters}
    var_d, (deff, deff_note) = n * se_items ** 2, plan_spread.floored_design_effect((se_clustered / se_items) ** 2,
                                                                                     n_clusters)
    needed = formulas.items_needed(var_d, delta, alpha, power, deff)
    spread = plan_spread.items_spread(z, used, found.design, delta, alpha, power)
    return {"n_now": n, "n_clusters_now": n_clusters, "var_d": var_d, "design_effect": deff,
            "mde_now": formulas.mde(se_clustered, alpha, power), "items_needed": formulas.whole(needed),
            "clusters_needed": formulas.whole(needed / (n / n_clusters)),
            "items_needed_10%": spread[0] if spread else None, "items_needed_90%": spread[1] if spread else None,
            **({"note": deff_note} if deff_note else {})}


def _repeats(cmp: compare.Comparison, found: Forms, a: str, b: str | None, form_a: RatioForm,
             form_b: RatioForm | None, row: dict[str, Any], delta: float, alpha: float, power: float
             ) -> dict[str, Any]:
    runs = {r.label: r.results(cmp.benchmark) for r in cmp.runs}
    k0 = runs[a].repeats
    sigma_a = within_item_variance(runs[a], found.ids)
    sigma_b = within_item_variance(runs[b], found.ids) if b else sigma_a
    if k0 < 2 or sigma_a is None or sigma_b is None or "var_d" not in row:
        return {}
    omega2 = max(0.0, row["var_d"] - (sigma_a + sigma_b) / k0)
    out: dict[str, Any] = {"repeats_now": k0, "omega2": omega2, "sigma2_a": sigma_a, "sigma2_b": sigma_b}
    for k in REPEATS:
        var_k = formulas.var_with_repeats(omega2, sigma_a, k, sigma_b, k)
        out[f"items_needed_K={k}"] = formulas.whole(formulas.items_needed(var_k, delta, alpha, power, row["design_effect"]))
    return out


def plan(pilot: str | Path, delta: float = 0.03, power: float = formulas.POWER, alpha: float = formulas.ALPHA,
         rho: float = ASSUMED_RHO) -> pd.DataFrame:
    """The items (and clusters, and repeats) needed to detect ``delta`` (module doc)."""
    if not delta > 0:
        raise ConfigError(f"plan: --delta must be a positive difference (got {delta})")
    formulas.z_sum(alpha, power)   # checks alpha and power
    cmp = _pilot(Path(pilot))
    runs = [(r.label, r.results(cmp.benchmark)) for r in cmp.runs]
    found = forms_of(runs, leaderboard.headline_metrics(cmp))
    rows = []
    for metric in found.metrics:
        labels = [label for label, _ in runs]
        for a, b in itertools.combinations(labels, 2) if len(labels) > 1 else [(labels[0], None)]:
            form_a, form_b = found.forms[(a, metric.name)], found.forms[(b, metric.name)] if b else None
            if form_b is not None:
                z, used, basis = form_a.influence() - form_b.influence(), form_a.used() | form_b.used(), "pilot pair"
            else:   # one model: Var(d) = 2 (1 - rho) Var(s), rho assumed
                z, used = form_a.influence() * np.sqrt(2 * (1 - rho)), form_a.used()
                basis = f"one run, assumed ρ = {rho:g}"
            row = {"metric": metric.name, "A": a, "B": b or "-", "basis": basis, "delta": delta, "alpha": alpha,
                   "power": power, **_row(found, z, used, delta, alpha, power)}
            row |= _repeats(cmp, found, a, b, form_a, form_b, row, delta, alpha, power)
            rows.append(row)
    return readable(pd.DataFrame(rows).set_index(["metric", "A", "B"]))
