"""Standard errors that know clusters, and the cluster bootstrap.

Added beside the protocols' own numbers, never replacing them. Items that share a unit of
randomisation (tasks that ask about one corpus document) are one cluster; clusters lie within
the benchmark's strata, as its bootstrap keeps items within them.

**Which metrics.** A metric built by :mod:`evalnb.stats.metrics` (``mean``, ``stratum_mean``,
``macro_mean``, ``share_scored``) carries its :class:`RatioForm`: per item a numerator ``y_i``
(the sum of its scored cells, over repeats) and a denominator ``m_i`` (how many cells count),
the metric being the mean, over the terms whose ``Σ m`` is not 0, of ``Σ y / Σ m`` (one term for
a mean, one per stratum for a macro mean). A metric without one (a count, a function of your
own) gets no standard error here.

**Standard errors** (Miller 2024, arXiv 2411.00640, eq. 4 and its clustered form). The
linearised influence of item i is ``z_i = (1/T) Σ_t (y_ti - R_t m_ti) / M_t`` (T terms, ratio
R_t = Y_t / M_t). Then, over strata s with C_s clusters that hold a counted item,

    Var = Σ_s  C_s / (C_s - 1) · Σ_{c in s} (Z_c - mean_s Z)²,   Z_c = Σ_{i in c} z_i,

the finite-cluster correction C/(C-1) as in inspect_ai's ``stderr(cluster=...)`` and
statsmodels' cluster-robust covariance (G/(G-1) for a regression on a constant). ``se`` is the
same with every item its own cluster; with one stratum and one cell per item it is the textbook
``sqrt(Σ (s_i - s̄)² / (n (n - 1)))``. The design effect is ``(clustered_se / se)²``. With
repeats the item is the unit: the cells of an item are summed first (Miller's recommendation).

**Cluster bootstrap.** One replicate draws, per stratum in sorted label order, ``C_s`` of its
clusters with replacement (``rng.integers(0, C_s, size=(rows, C_s))``, clusters in the order
of their first item; the draw is :func:`evalnb.stats.resample.index_draws`), and recomputes
every form with the drawn multiplicities as weights. Repeats are not resampled apart (the
item's cells go with it). With every item its own cluster and one repeat the replicates are
exactly those of :func:`evalnb.stats.intervals.interval_estimates` with the same seed: the
same random stream, counted instead of gathered.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from evalnb.stats import bounded, intervals as stats, resample, smallsample

K = TypeVar("K")
CORRECTION = "finite-cluster correction C/(C-1), within each stratum"
BOOTSTRAP_METHOD = "percentile cluster bootstrap: whole clusters resampled within strata"


# --- the form of a mean metric -----------------------------------------------------------------------

@dataclass(frozen=True)
class RatioForm:
    """A metric as the mean over terms (with ``Σ m > 0``) of ``Σ y / Σ m``; each term a pair
    of per-item vectors (numerators, denominators) over the ``n`` items."""

    terms: tuple[tuple[np.ndarray, np.ndarray], ...]
    n: int

    def live(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(y, m) for y, m in self.terms if m.sum() > 0]

    def value(self) -> float | None:
        ratios = [y.sum() / m.sum() for y, m in self.live()]
        return float(np.mean(ratios)) if ratios else None

    def used(self) -> np.ndarray:
        """Items that count in at least one term."""
        used = np.zeros(self.n, bool)
        for _, m in self.terms:
            used |= m > 0
        return used

    def influence(self) -> np.ndarray:
        """Each item's linearised influence on the value (zero for items that do not count)."""
        live, z = self.live(), np.zeros(self.n)
        for y, m in live:
            z += (y - (y.sum() / m.sum()) * m) / m.sum()
        return z / len(live) if live else z


def cells(values: np.ndarray, columns: np.ndarray | None = None, *, missing: str = "exclude"
          ) -> tuple[np.ndarray, np.ndarray]:
    """Per item of a repeats x items matrix: the sum of its counted cells and their number
    (NaN cells left out, or counted as 0 with ``missing="zero"``); zero outside ``columns``."""
    part = np.nan_to_num(values, nan=0.0) if missing == "zero" else values
    present = ~np.isnan(part)
    y, m = np.where(present, part, 0.0).sum(axis=0), present.sum(axis=0).astype(float)
    if columns is not None:
        keep = np.zeros(values.shape[-1], bool)
        keep[columns] = True
        y, m = np.where(keep, y, 0.0), np.where(keep, m, 0.0)
    return y, m


def form_of(fn: Any, values: Any, strata: Mapping[str, np.ndarray],
            channels: Mapping[str, Any] | None = None) -> RatioForm | None:
    """The form a metric function declares (``fn.ratio_form``), on ``values``; a metric over
    named channels (``fn.channel_ratio``, :func:`evalnb.stats.metrics.ratio` and
    ``channel_mean``) on ``channels``; None without one."""
    spec = getattr(fn, "channel_ratio", None)
    if spec is not None:
        return channel_form(spec, channels) if channels is not None and all(
            c in channels for c in spec if c is not None) else None
    make = getattr(fn, "ratio_form", None)
    if make is None:
        return None
    matrix = np.asarray(values, dtype=float)
    form: RatioForm = make(matrix[None, :] if matrix.ndim == 1 else matrix, strata)
    return form


def channel_form(spec: tuple[str, str | None], channels: Mapping[str, Any]) -> RatioForm:
    """``(numerator, denominator)`` channels as one term: per item, the numerator channel's cells
    and the denominator channel's, summed over repeats where both are present (Σ y / Σ m is the
    ratio); ``(channel, None)``: the channel's present cells over their count (its mean)."""
    numerator, denominator = spec
    top = np.asarray(channels[numerator], dtype=float)
    top = top[None, :] if top.ndim == 1 else top
    if denominator is None:
        return RatioForm((cells(top),), top.shape[-1])
    bottom = np.asarray(channels[denominator], dtype=float)
    bottom = bottom[None, :] if bottom.ndim == 1 else bottom
    present = ~(np.isnan(top) | np.isnan(bottom))
    term = (np.where(present, top, 0.0).sum(axis=0), np.where(present, bottom, 0.0).sum(axis=0))
    return RatioForm((term,), top.shape[-1])


# --- the design: clusters within strata -----------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    """Item -> cluster code; cluster -> stratum code. Clusters are numbered stratum by stratum
    (labels sorted), within a stratum in the order of their first item."""

    item_cluster: np.ndarray
    cluster_stratum: np.ndarray

    @classmethod
    def of(cls, n: int, clusters: Sequence[str] | None = None, strata: Sequence[str] | None = None) -> Design:
        """``clusters`` labels (None: every item its own); a cluster that spans strata is one
        cluster per stratum."""
        groups = stats.strata_columns(strata, n)
        labels = list(clusters) if clusters is not None else [str(i) for i in range(n)]
        if len(labels) != n:
            raise ValueError(f"{len(labels)} cluster labels for {n} items")
        item_cluster = np.empty(n, dtype=np.intp)
        cluster_stratum: list[int] = []
        for s, idx in enumerate(groups.values()):
            codes: dict[str, int] = {}
            for i in idx:
                if labels[i] not in codes:
                    codes[labels[i]] = len(cluster_stratum)
                    cluster_stratum.append(s)
                item_cluster[i] = codes[labels[i]]
        return cls(item_cluster, np.asarray(cluster_stratum, dtype=np.intp))

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_stratum)

    def totals(self, per_item: np.ndarray) -> np.ndarray:
        return np.bincount(self.item_cluster, weights=per_item, minlength=self.n_clusters)

    def singletons(self) -> Design:
        """The same strata, every item its own cluster."""
        return Design(np.arange(len(self.item_cluster)), self.cluster_stratum[self.item_cluster])


def design_se(z: np.ndarray, used: np.ndarray, design: Design) -> tuple[float | None, int]:
    """The stratified, cluster-robust standard error of a linearised statistic with item
    influences ``z`` (module doc), and the number of clusters holding a counted item."""
    live = design.totals(used.astype(float)) > 0
    totals = design.totals(z)
    variance, count = 0.0, int(live.sum())
    for s in np.unique(design.cluster_stratum[live]):
        in_s = live & (design.cluster_stratum == s)
        c = int(in_s.sum())
        if c < 2:   # one cluster in a stratum says nothing about its spread
            return None, count
        part = totals[in_s]
        variance += c / (c - 1) * float(((part - part.mean()) ** 2).sum())
    return (math.sqrt(variance) if count else None), count


@dataclass(frozen=True)
class Uncertainty:
    """A metric's standard errors beside its protocol interval."""

    se: float | None                 # every item its own cluster (within strata)
    n: int                           # items counted
    clustered_se: float | None
    n_clusters: int
    design_effect: float | None      # (clustered_se / se)²
    correction: str = CORRECTION

    def as_dict(self) -> dict[str, Any]:
        return {"se": self.se, "n": self.n, "clustered_se": self.clustered_se, "n_clusters": self.n_clusters,
                "design_effect": self.design_effect, "correction": self.correction}


def uncertainty(form: RatioForm, design: Design) -> Uncertainty:
    z, used = form.influence(), form.used()
    se, n = design_se(z, used, design.singletons())
    clustered, n_clusters = design_se(z, used, design)
    deff = (clustered / se) ** 2 if se and clustered is not None else None
    return Uncertainty(se, n, clustered, n_clusters, deff)


# --- the cluster bootstrap ----------------------------------------------------------------------------

def cluster_weights(design: Design, n_boot: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Blocks of replicate weights, shape (rows, clusters): how often each cluster was drawn
    (:func:`evalnb.stats.resample.index_draws` over the clusters of each stratum, in blocks the
    size of the item bootstrap's: the same stream)."""
    per_stratum = [np.flatnonzero(design.cluster_stratum == s) for s in range(int(design.cluster_stratum.max()) + 1)] \
        if design.n_clusters else []
    for draw in resample.index_draws(rng, n_boot, per_stratum, design.n_clusters,
                                     cells_per_replicate=len(design.item_cluster)):
        yield resample.counts(draw.columns, design.n_clusters)


def replicate_values(form: RatioForm, design: Design, weights: np.ndarray) -> np.ndarray:
    """The form on each weighted replicate (NaN where no term has a counted cell)."""
    ratios = []
    for y, m in form.terms:
        top, bottom = weights @ design.totals(y), weights @ design.totals(m)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios.append(np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan))
    if not ratios:
        return np.full(len(weights), np.nan)
    stacked = np.stack(ratios)
    present = ~np.isnan(stacked)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present.any(axis=0), np.where(present, stacked, 0.0).sum(axis=0) / present.sum(axis=0), np.nan)


def bootstrap_draws(forms: Mapping[K, RatioForm], design: Design, *, n_boot: int = stats.N_BOOT,
                    seed: int = 0) -> dict[K, np.ndarray]:
    """Every form on the same ``n_boot`` cluster resamples (one joint bootstrap: pairs and ranks
    share it), seeded."""
    draws: dict[K, list[np.ndarray]] = {key: [] for key in forms}
    if not len(design.item_cluster):
        return {key: np.full(n_boot, np.nan) for key in forms}
    for weights in cluster_weights(design, n_boot, resample.generator(seed)):
        for key, form in forms.items():
            draws[key].append(replicate_values(form, design, weights))
    return {key: np.concatenate(parts) for key, parts in draws.items()}


def percentile_interval(replicates: np.ndarray, confidence: float = stats.CONFIDENCE
                        ) -> tuple[float | None, float | None]:
    finite = replicates[np.isfinite(replicates)]
    if not len(finite):
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)


def has_clusters(design: Design) -> bool:
    """Whether some cluster holds more than one item (else the cluster bootstrap is the item one)."""
    return design.n_clusters < len(design.item_cluster)


def metric_uncertainty(values: Any, metrics: Sequence[Any], *, strata: Sequence[str] | None,
                       clusters: Sequence[str] | None, cluster_noun: str, n_boot: int, seed: int,
                       channels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """For scores.json ``uncertainty``: every metric with a form, its standard errors and, when
    items share clusters, its cluster-bootstrap interval (beside the protocol's interval)."""
    matrix = np.asarray(values, dtype=float)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    n = matrix.shape[-1] if matrix.size else 0
    design = Design.of(n, clusters, strata)
    groups = stats.strata_columns(strata, n)
    out: dict[str, Any] = {"cluster": cluster_noun, "n_clusters": design.n_clusters, "n_items": n, "metrics": {}}
    with np.errstate(invalid="ignore", divide="ignore"):
        forms = {m.name: f for m in metrics if n and (f := form_of(m.fn, matrix, groups, channels)) is not None}
        resampled = [m.name for m in metrics if m.name in forms and m.interval] if has_clusters(design) else []
        # every metric from the same replicates, as the protocol's own bootstrap does
        draws = bootstrap_draws({name: forms[name] for name in resampled}, design, n_boot=n_boot, seed=seed)
    for name, form in forms.items():
        found = uncertainty(form, design)
        entry = found.as_dict() | small_sample(form, design, found, cluster_noun)
        if name in draws:
            # a stratum of one cluster: its spread is unknown, so no interval is printed
            low, high = percentile_interval(draws[name]) if entry["t_ci"]["note"] is None else (None, None)
            entry["cluster_ci"] = {"low": low, "high": high, "mean": form.value(), "n_clusters": design.n_clusters,
                                   "n_boot": n_boot, "seed": seed, "confidence": stats.CONFIDENCE,
                                   "method": BOOTSTRAP_METHOD, "approximate": entry["t_ci"]["approximate"],
                                   "note": entry["t_ci"]["note"]}
        out["metrics"][name] = entry
    return out


def small_sample(form: RatioForm, design: Design, found: Uncertainty, noun: str) -> dict[str, Any]:
    """Beside the standard errors: the clustered SE's t interval on clusters − strata degrees of
    freedom (whether few clusters make the bootstrap approximate, and the reason where a stratum
    of one cluster leaves it undefined), and for a bounded mean its Wilson interval."""
    held = smallsample.support(design.cluster_stratum, design.totals(form.used().astype(float)) > 0, noun)
    low, high = smallsample.t_interval(form.value(), found.clustered_se, held.df)
    t_ci = {"low": low, "high": high, "df": held.df, "approximate": held.approximate,
            "note": held.withheld if held.df is None else None}
    out: dict[str, Any] = {"t_ci": t_ci}
    if bounded.is_bounded(form.terms):
        out["bounded_ci"] = bounded.bounded_interval(form.value(), found.n, found.se, found.clustered_se,
                                                     found.n_clusters)
    return out
