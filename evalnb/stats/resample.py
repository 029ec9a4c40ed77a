"""The one resampler: every bootstrap replicate in evalnb is drawn here, from numpy's PCG64
generator seeded with the statistic's seed (:func:`generator`), so the same seed gives the same
replicates on every run and machine.

Two draws, each kept exactly as the intervals built on it were first published (a replicate's
numbers must not move when the code around them does):

- **Members within strata** (:func:`index_draws`): per block of replicates and per stratum, in
  the order given, ``rng.integers(0, n_s, size=(rows, n_s))`` picks ``n_s`` of the stratum's
  ``n_s`` members with replacement and puts them in the stratum's positions; with repeats,
  ``rng.integers(0, repeats, size=(rows, repeats, size))`` then picks each drawn column's
  repeats. The members are items for the protocol's bootstrap
  (:func:`evalnb.stats.intervals.interval_estimates`, which gathers the drawn columns) and
  clusters for the cluster bootstrap (:func:`evalnb.stats.clustered.bootstrap_draws`, which
  counts them: :func:`counts`). Blocks hold ``CHUNK`` resampled cells (:func:`block_rows`),
  all replicates at once for matrices up to two million cells. With every item its own cluster
  and one repeat the two bootstraps draw the same stream.
- **Cluster counts** (:func:`cluster_counts`): per replicate, a multinomial count of how many
  times each of the C clusters was drawn in C draws, for the judges' statistics (written as
  sums over items, so one matrix product per statistic: :class:`Resample`). The same
  distribution as counting C integer draws, but a different stream: the judges' published
  intervals come from this one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CHUNK = 2_000_000   # resampled cells per block: bounds memory for large matrices


def generator(seed: int) -> np.random.Generator:
    """The seeded generator every replicate is drawn from (numpy's PCG64)."""
    return np.random.default_rng(seed)


# --- members within strata ------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexDraw:
    """One block of replicates: ``columns[r, j]`` is the member drawn for position j on replicate
    r (a member of j's stratum); ``repeat_rows[r, k, j]`` the repeat drawn for the k-th repeat of
    that column (None with one repeat)."""

    columns: np.ndarray
    repeat_rows: np.ndarray | None

    @property
    def rows(self) -> int:
        return len(self.columns)


def block_rows(n_boot: int, cells_per_replicate: int) -> Iterator[int]:
    """How many replicates each block holds: ``CHUNK`` cells per block, at least one replicate."""
    rows = max(1, CHUNK // max(1, cells_per_replicate))
    for start in range(0, n_boot, rows):
        yield min(rows, n_boot - start)


def index_draws(rng: np.random.Generator, n_boot: int, strata: Sequence[np.ndarray], size: int, *,
                repeats: int = 1, cells_per_replicate: int | None = None) -> Iterator[IndexDraw]:
    """``n_boot`` replicates in blocks (module doc). ``strata`` lists each stratum's members,
    together ``range(size)``; ``cells_per_replicate`` sets the block size (default: the
    ``repeats x size`` cells one replicate resamples)."""
    cells = repeats * size if cells_per_replicate is None else cells_per_replicate
    for rows in block_rows(n_boot, cells):
        columns = np.empty((rows, size), dtype=np.intp)
        for members in strata:
            if len(members):
                columns[:, members] = members[rng.integers(0, len(members), size=(rows, len(members)))]
        repeat_rows = rng.integers(0, repeats, size=(rows, repeats, size)) if repeats > 1 else None
        yield IndexDraw(columns, repeat_rows)


def counts(columns: np.ndarray, n_members: int) -> np.ndarray:
    """(rows, members): how many times each member was drawn on each replicate."""
    rows = len(columns)
    offsets = columns + n_members * np.arange(rows)[:, None]
    return np.bincount(offsets.ravel(), minlength=rows * n_members).reshape(rows, n_members).astype(float)


# --- cluster counts, for statistics written as sums over items ----------------------------------------

@dataclass(frozen=True)
class Resample:
    """Bootstrap replicates as cluster counts: ``weights[r, c]`` is how many times replicate r
    drew cluster c; item i belongs to cluster ``of_item[i]`` and counts its cluster's count.
    Sums over items are taken per cluster first (:meth:`total`), so memory is replicates x
    clusters however many items (a pooled leaderboard of twenty models) the clusters hold."""

    weights: np.ndarray   # (replicates, clusters)
    of_item: np.ndarray   # (items,) -> cluster column

    @classmethod
    def identity(cls, n_items: int) -> Resample:
        """One replicate that counts every item once: the statistic on the data itself."""
        return cls(np.ones((1, n_items)), np.arange(n_items))

    def total(self, per_item: Any) -> np.ndarray:
        """Per replicate, sum_i (its cluster's count) x ``per_item[i]``."""
        values = np.asarray(per_item, dtype=float)
        return self.weights @ np.bincount(self.of_item, weights=values, minlength=self.weights.shape[1])

    def item_weights(self, rows: Any = slice(None)) -> np.ndarray:
        """(replicates, items) item weights, for ``rows`` of the replicates (for statistics that
        are not sums over items: ranks)."""
        return self.weights[rows][:, self.of_item]


def cluster_counts(n_items: int, n_boot: int, seed: int, clusters: Sequence[Any] | None = None) -> Resample:
    """``n_boot`` replicates: per replicate, the clusters drawn with replacement (as many draws
    as clusters: a multinomial count per cluster), each item weighted by its cluster's count.
    ``clusters`` labels each item (None: each item its own cluster). Kept for the next
    statistic over the same items and settings (read-only)."""
    return _cluster_counts(n_items, n_boot, seed, None if clusters is None else tuple(clusters))


@functools.lru_cache(maxsize=2)
def _cluster_counts(n_items: int, n_boot: int, seed: int, clusters: tuple[Any, ...] | None) -> Resample:
    labels = list(range(n_items)) if clusters is None else list(clusters)
    if len(labels) != n_items:
        raise ValueError(f"{len(labels)} cluster labels for {n_items} items")
    order = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    c = len(order)
    weights = (generator(seed).multinomial(c, np.full(c, 1 / c), size=n_boot).astype(float)
               if c else np.zeros((n_boot, 0)))
    of_item = np.array([order[label] for label in labels], dtype=np.intp)
    weights.setflags(write=False)
    of_item.setflags(write=False)
    return Resample(weights, of_item)
