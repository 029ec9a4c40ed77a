"""The pairwise verdicts' table, laid out once: the compare notebook (``evalnb.pairwise``), the
paper's exports (LaTeX, Markdown, CSV) and the terminal after ``evalnb compare`` all show the
rows of ``compare.json``'s ``tables.pairwise`` through :func:`pairwise_layout`.

A row holds one pair of models on one headline metric, as
:class:`evalnb.stats.pairwise.PairedDifference` computes it, plus the settings it was computed
with (``alpha``, ``power``, ``cluster``, ``p_method``). Only column names are read here, so
the layout stands below the comparison that computes the rows.

The titles are ASCII (``A - B``, ``SE``, ``rho``): the same table goes into a LaTeX document,
where a Greek letter or a minus sign needs packages a paper may not load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from evalnb.views.tables import Estimate, Layout, paper_view, readable, view_text

# The columns that name a row: its metric and its two models.
PAIRWISE_INDEX = ("metric", "model_a", "model_b")
EMPTY = "Fewer than two runs, or no headline metric with a ratio form: no pairwise verdict."


def pairwise_layout(power: float | None = None) -> Layout:
    """How every view shows the pairwise verdicts; ``power``: the MDE's power, in its title."""
    mde = "MDE" if power is None else f"MDE ({float(power):.0%} power)"
    return Layout((Estimate("A - B [95% CI]", "delta", "ci_low", "ci_high", "n"),
                   Estimate("t 95% CI", "t_delta", "t_low", "t_high")),
                  hidden=("se_delta_items", "n_clusters", "alpha", "power", "cluster", "p_method", "df", "withheld"),
                  rename={"model_a": "model A", "model_b": "model B", "se_delta": "SE", "rho": "rho",
                          "p_holm": "p (Holm)", "p_t": "p (t)", "mde": mde},
                  fractions=("se_delta", "rho", "mde"), empty=EMPTY)


def power_of(table: pd.DataFrame) -> float | None:
    """The power the rows' MDE was computed at (every row has the comparison's one)."""
    return float(table["power"].iloc[0]) if "power" in table and len(table) else None


def pairwise_frame(rows: pd.DataFrame | Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The raw rows indexed by metric and models, shown through :func:`pairwise_layout`."""
    table = pd.DataFrame(rows)
    indexed = table.set_index(list(PAIRWISE_INDEX)) if len(table) else table
    return readable(indexed, pairwise_layout(power_of(table)))


def pairwise_text(rows: pd.DataFrame | Sequence[Mapping[str, Any]]) -> str:
    """The rows as the terminal prints them (the notebook's table, as text)."""
    table = pd.DataFrame(rows)
    return view_text(paper_view(table, pairwise_layout(power_of(table))))
