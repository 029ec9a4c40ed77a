"""The pairwise verdicts' table, laid out once: the compare notebook (``evalnb.pairwise``), the
paper's exports (LaTeX, Markdown, CSV) and the terminal after ``evalnb compare`` all show the
rows of ``compare.json``'s ``tables.pairwise`` through :func:`pairwise_layout`.

A row holds one pair of models on one headline metric, as
:class:`evalnb.stats.pairwise.PairedDifference` computes it, plus the settings it was computed
with (``alpha``, ``power``, ``cluster``, ``p_method``). Only column names are read here, so
the layout stands below the comparison that computes the rows.

The headers are the vocabulary's (:mod:`evalnb.views.labels`), and the metric is named by the
word the leaderboard uses for it (``All``, not ``all_tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from evalnb.views.labels import T_CI, estimate_title
from evalnb.views.tables import Estimate, Layout, paper_view, readable, view_text

# The columns that name a row: its metric and its two models.
PAIRWISE_INDEX = ("metric", "model_a", "model_b")
EMPTY = "Fewer than two runs, or no headline metric with a ratio form: no pairwise verdict."


def pairwise_layout(power: float | None = None, words: Mapping[str, str] | None = None) -> Layout:
    """How every view shows the pairwise verdicts; ``power``: the MDE's power, in its title;
    ``words``: each metric's machine name -> the word the leaderboard uses for it.

    A pair is ordered as the leaderboard ranks it (model A the higher), so A - B reads the
    same way in every view: the terminal, the notebook, the exports and ``evalnb plan``."""
    mde = "MDE" if power is None else f"MDE ({float(power):.0%} power)"
    return Layout((Estimate(estimate_title("delta"), "delta", "ci_low", "ci_high", "n"),
                   Estimate(T_CI, "t_delta", "t_low", "t_high")),
                  hidden=("se_delta_items", "n_clusters", "alpha", "power", "cluster", "p_method", "df", "withheld"),
                  rename={"mde": mde}, fractions=("se_delta", "rho", "mde"), empty=EMPTY,
                  values={"metric": dict(words or {})})


def power_of(table: pd.DataFrame) -> float | None:
    """The power the rows' MDE was computed at (every row has the comparison's one)."""
    return float(table["power"].iloc[0]) if "power" in table and len(table) else None


def pairwise_frame(rows: pd.DataFrame | Sequence[Mapping[str, Any]],
                   words: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The raw rows indexed by metric and models, shown through :func:`pairwise_layout`."""
    table = pd.DataFrame(rows)
    indexed = table.set_index(list(PAIRWISE_INDEX)) if len(table) else table
    return readable(indexed, pairwise_layout(power_of(table), words))


def pairwise_text(rows: pd.DataFrame | Sequence[Mapping[str, Any]], words: Mapping[str, str] | None = None) -> str:
    """The rows as the terminal prints them (the notebook's table, as text)."""
    table = pd.DataFrame(rows)
    return view_text(paper_view(table, pairwise_layout(power_of(table), words)))
