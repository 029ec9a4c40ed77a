"""The kinds of figure several views draw, in evalnb's figure style (:mod:`evalnb.views.figures`):
each judge's scores as a strip plot with its mean and interval, and bars per item with one
bar per run (dodged, never overplotted). Each returns an unsaved :class:`ReportFigure` with
its caption; the caller saves it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evalnb.stats import intervals as stats
from evalnb.views.estimates import estimate_text
from evalnb.views.figures import (OFFLINE, ONE_COLUMN, PALETTE, TWO_COLUMNS, new_figure, styled,
                                 with_offline_note, zero_marker)

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure

JUDGE_INTERVAL_BOOT = 2000   # resamples for a judge's mean in the figure (the tables keep the run's n_boot)


@styled
def judge_strip_plot(per_judge: Mapping[str, Sequence[float]], *, offline: bool = False,
                     ylabel: str = "normalised score", what: str = "judge") -> ReportFigure:
    """One column per judge (or rater run): every score as a point (jittered sideways, seeded),
    the mean as a bar across the column and its 95% percentile bootstrap interval as a line."""
    labels = sorted(per_judge)
    width = ONE_COLUMN if len(labels) <= 4 else TWO_COLUMNS
    cis = {judge: stats.bootstrap_ci(list(per_judge[judge]), n_boot=JUDGE_INTERVAL_BOOT, seed=0) for judge in labels}
    rows = [f"{judge}: {estimate_text(ci.mean, ci.low, ci.high)}, n={len(per_judge[judge])}" for judge, ci in cis.items()]
    fig = new_figure((width, 2.6), caption=with_offline_note(
        f"Each {what}'s scores, one point per item (jittered sideways); the black bar is the {what}'s mean "
        f"and the line its 95% percentile bootstrap interval ({JUDGE_INTERVAL_BOOT} resamples, seed 0). "
        + ("; ".join(rows) + "." if rows else f"No {what} scored any item."), offline))
    ax = fig.subplots()
    rng = np.random.default_rng(0)
    for x, judge in enumerate(labels):
        scores = np.asarray(per_judge[judge], dtype=float)
        colour = "#888888" if offline else PALETTE[x % len(PALETTE)]   # offline: grey
        ax.scatter(x + rng.uniform(-0.18, 0.18, len(scores)), scores, s=10, color=colour, alpha=0.85,
                   edgecolors="none", zorder=2)
        ci = cis[judge]
        if ci.mean is not None:
            ax.plot([x - 0.3, x + 0.3], [ci.mean, ci.mean], color="black", linewidth=1.6, zorder=3)
        if ci.low is not None and ci.high is not None:
            ax.plot([x, x], [ci.low, ci.high], color="black", linewidth=0.9, zorder=3)
    ax.set_xticks(range(len(labels)), [j.replace(" ", "\n", 1) for j in labels], fontsize=6)
    ax.set_xlim(-0.6, max(len(labels), 1) - 0.4)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel(ylabel)
    return fig


@styled
def dodged_bars(items: Sequence[str], series: Mapping[str, Sequence[float | None]], *, caption: str,
                xlabel: str, offline: Mapping[str, bool] | None = None, xlim: tuple[float, float] = (0, 1),
                ticks: Sequence[float] | None = None, tick_labels: Sequence[str] | None = None,
                missing: str = "no value") -> ReportFigure:
    """Horizontal bars, one row per item (in the order given: sort before), one bar per series
    (a run) side by side; a zero drawn as a point at 0, labelled, so it reads as a value; a row
    with no value at all labelled ``missing``. The legend sits below the axes, covering nothing. Sizes: one column wide up
    to 40 items, two beyond; the height grows with the rows, at most 9 in."""
    names = list(series)
    rows = len(items)
    height = min(9.0, 0.9 + rows * (0.12 + 0.09 * len(names)))
    fig = new_figure((ONE_COLUMN if rows <= 40 else TWO_COLUMNS, height), caption=caption)
    ax = fig.subplots()
    band = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        values = list(series[name])
        y = np.arange(rows) - 0.4 + band * (k + 0.5)
        style: dict[str, Any] = {"color": PALETTE[k % len(PALETTE)]}
        if (offline or {}).get(name):   # an offline approximation: hatched, its colour kept to tell runs apart
            # facecolor, not color: with color the hatch takes the fill's colour and vanishes
            style = {"facecolor": style["color"], "hatch": OFFLINE["hatch"], "edgecolor": "white",
                     "hatch_linewidth": OFFLINE["hatch_linewidth"]}
        ax.barh(y, [0 if v is None else v for v in values], height=band * 0.95, label=name, **style)
        for yy, v in zip(y, values):
            if v == 0:
                zero_marker(ax, xlim[0], yy)
    for row in range(rows):   # a row with no value at all says so (it is not a zero, nor forgotten)
        if all(series[name][row] is None for name in names):
            ax.annotate(missing, (xlim[0], row), xytext=(4, 0), textcoords="offset points", va="center",
                        ha="left", fontsize=6, fontstyle="italic", color="#555555")
    ax.set_yticks(range(rows), list(items))
    ax.invert_yaxis()   # the first item on top
    ax.set_xlim(*xlim)
    if ticks is not None:
        ax.set_xticks(list(ticks), list(tick_labels) if tick_labels is not None else None)
    ax.set_xlabel(xlabel)
    ax.tick_params(axis="y", labelsize=6)
    if len(names) > 1:
        fig.legend(loc="outside lower center", ncols=1 if max(map(len, names)) > 16 else min(len(names), 3))
    return fig
