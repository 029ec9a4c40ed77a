"""One table style for every view: the report, compare, the suite's leaderboard, the exports
and the paper render.

A table is a ``DataFrame`` whose values stay the raw numbers (what ``scores.json``,
``compare.json`` and the CSV files hold, and what code computes with) and whose display, and
only its display, is the one a paper prints (:func:`paper_view`):

- an estimate with its interval as one cell, ``0.551 [0.325, 0.781]``
  (:func:`evalnb.views.estimates.estimate_text`; decimals a parameter, 3 by default), with its
  ``n`` beside it;
- booleans and internal columns gone (a table's :class:`Layout` names what to hide);
- no bare integer index: a named index becomes ordinary leading columns, a ``RangeIndex``
  is not shown;
- other fractions with the same decimals, whole numbers (counts) as integers, a missing value
  as ``-``, every label whole (nothing cut at 50 characters with ``...``);
- text left-aligned, numbers right-aligned.

No pandas option is read or changed, so a researcher's own settings and frames are untouched.
A view that computes a table calls :func:`readable` with the table's :class:`Layout`; the
statistics lanes' new sections do the same.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evalnb.views.estimates import DEFAULT_DECIMALS, MISSING, estimate_text, number_text
from evalnb.views.labels import estimate_title, header, value_text

LAYOUT = "evalnb_layout"   # the key of DataFrame.attrs that carries a table's layout
# Columns that hold fractions wherever they appear: their whole values keep the decimals.
FRACTIONS = frozenset({"share", "mean", "std", "sd", "pearson_r", "mean_abs_diff", "share_over_threshold",
                       "award_rate", "mean_diff", "spread", "score", "ci_low", "ci_high", "p_first", "se",
                       "clustered_se", "design_effect", "SE_Δ", "ρ"})
# p-values: three decimals, and below 0.001 as "< 0.001" (never a bare 0.000).
PVALUES = frozenset({"p", "p (Holm)", "p_holm", "p (t)", "p_t"})


@dataclass(frozen=True)
class Estimate:
    """An estimate held in three columns, shown as one titled cell (and its n beside it)."""

    title: str
    value: str
    low: str | None = None
    high: str | None = None
    n: str | None = None


@dataclass(frozen=True)
class Layout:
    """How a table is shown: its estimates, the columns it hides, shown names for columns,
    and (for an empty table) why it is empty."""

    estimates: tuple[Estimate, ...] = ()
    hidden: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=dict)
    decimals: int = DEFAULT_DECIMALS
    empty: str = ""
    fractions: tuple[str, ...] = ()   # columns of fractions besides FRACTIONS (always with decimals)
    # column -> {machine value: shown word}: a metric's name shown as the word every table uses
    values: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class View:
    """What is drawn: every cell as text, and which columns are numbers (right-aligned)."""

    frame: pd.DataFrame
    numeric: tuple[bool, ...]
    empty: str = ""


def number(value: float, decimals: int = DEFAULT_DECIMALS) -> str:
    """A float as a table shows it: whole numbers (counts) without a fraction."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return number_text(value, decimals)


def cell(value: Any, decimals: int = DEFAULT_DECIMALS) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(float(value), decimals) if isinstance(value, float) else str(value)
    if hasattr(value, "item") and not isinstance(value, str):   # a numpy scalar
        return cell(value.item(), decimals)
    return str(value)


def p_value(value: Any, decimals: int = DEFAULT_DECIMALS) -> str:
    number_ = _float(value)
    if number_ is None:
        return MISSING
    return f"< {10 ** -decimals:.{decimals}f}" if number_ < 10 ** -decimals else number_text(number_, decimals)


def layout_of(frame: pd.DataFrame) -> Layout:
    found = frame.attrs.get(LAYOUT)
    return found if isinstance(found, Layout) else Layout()


def _flat(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a named index as leading columns, and no integer index."""
    plain = pd.DataFrame(frame)
    if isinstance(frame.index, pd.RangeIndex) and frame.index.name is None:
        return plain.reset_index(drop=True)
    out = plain.copy()
    out.index = out.index.set_names(["" if n is None else n for n in frame.index.names])
    return out.reset_index(allow_duplicates=True)


def paper_view(frame: pd.DataFrame, layout: Layout | None = None, decimals: int | None = None) -> View:
    """``frame`` as every view draws it (see the module)."""
    layout = layout or layout_of(frame)
    places = layout.decimals if decimals is None else decimals
    flat = _flat(frame)
    records = flat.to_dict("records")
    used = {c for e in layout.estimates for c in (e.value, e.low, e.high, e.n) if c}
    titles: list[str] = []
    values: list[list[str]] = []
    numeric: list[bool] = []
    for position, name in enumerate(flat.columns):
        series = flat.iloc[:, position]
        estimate = next((e for e in layout.estimates if e.value == name), None)
        if estimate is not None:
            titles.append(estimate.title)
            values.append([_estimate(row, estimate, places) for row in records])
            numeric.append(True)
            if estimate.n and estimate.n in flat.columns:   # n beside its estimate
                titles.append("n")
                values.append([cell(row.get(estimate.n), places) for row in records])
                numeric.append(True)
            continue
        if name in used or name in layout.hidden or _boolean(series):
            continue
        titles.append(layout.rename.get(str(name)) or header(name))
        series = _words(series, layout.values.get(str(name)))
        # A whole number is a count (an integer), unless the column holds a fraction (a share,
        # a mean, a correlation): there a 1 reads 1.000 beside 0.983.
        fraction = str(name) in layout.fractions or str(name) in FRACTIONS
        if str(name) in PVALUES:
            values.append([p_value(v, places) for v in series])
        else:
            values.append([number_text(v, places) if fraction and isinstance(v, float) else cell(v, places)
                           for v in series])
        numeric.append(pd.api.types.is_numeric_dtype(series.dtype) or _all_numbers(series))
    shown = pd.DataFrame(dict(enumerate(values)), index=range(len(flat)), columns=range(len(values)))
    shown.columns = titles
    return View(shown, tuple(numeric), layout.empty)


def _words(series: pd.Series, words: Mapping[str, str] | None) -> pd.Series:
    """A column of machine names (a metric, a statistic) as the words every table uses."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return series
    return series.map(lambda v: (words or {}).get(v, value_text(v)) if isinstance(v, str) else v)


def _estimate(row: Mapping[str, Any], estimate: Estimate, places: int) -> str:
    value, low, high = (_float(row.get(c)) if c else None for c in (estimate.value, estimate.low, estimate.high))
    if low is None and high is None and value is not None and math.isfinite(value) and value.is_integer():
        return str(int(value))   # a count (no interval): as a count
    return estimate_text(value, low, high, places)


def _boolean(series: pd.Series) -> bool:
    """A column of booleans (an internal flag: the layout shows what it means otherwise)."""
    if series.dtype == bool:
        return True
    present = series.dropna()
    return series.dtype == object and bool(len(present)) and all(isinstance(v, bool) for v in present)


def _float(value: Any) -> float | None:
    """A finite number, or None (missing, NaN, text)."""
    try:
        number_ = None if value is None else float(value)
    except (TypeError, ValueError):
        return None
    return number_ if number_ is not None and math.isfinite(number_) else None


def _all_numbers(series: pd.Series) -> bool:
    present = series.dropna()
    return bool(len(present)) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)


def view_html(view: View) -> str:
    """The view as an HTML table (deterministic: a recomputed record shows the same bytes)."""
    if not len(view.frame):
        reason = view.empty or "nothing to show"
        return f'<p class="evalnb-empty">{html.escape(reason)}</p>'
    align = ["right" if n else "left" for n in view.numeric]
    head = "".join(f'<th style="text-align: {a}">{html.escape(str(c))}</th>' for c, a in zip(view.frame.columns, align))
    body = "".join("<tr>" + "".join(f'<td style="text-align: {a}">{html.escape(v)}</td>' for v, a in zip(row, align))
                   + "</tr>\n" for row in view.frame.itertuples(index=False))
    return f'<table class="evalnb-table">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>'


def view_text(view: View) -> str:
    if not len(view.frame):
        return view.empty or "(nothing to show)"
    cells = [[str(c) for c in view.frame.columns], *([str(v) for v in row] for row in view.frame.itertuples(index=False))]
    widths = [max(len(r[i]) for r in cells) for i in range(len(view.numeric))]
    return "\n".join("  ".join((v.rjust(w) if n else v.ljust(w)) for v, w, n in zip(row, widths, view.numeric)).rstrip()
                     for row in cells)


def view_markdown(view: View) -> str:
    if not len(view.frame):
        return f"_{view.empty or 'nothing to show'}_"
    escape = lambda v: str(v).replace("|", "\\|")   # noqa: E731
    rows = ["| " + " | ".join(escape(c) for c in view.frame.columns) + " |",
            "|" + "|".join("---:" if n else ":---" for n in view.numeric) + "|"]
    rows += ["| " + " | ".join(escape(v) for v in row) + " |" for row in view.frame.itertuples(index=False)]
    return "\n".join(rows)


class ReadableTable(pd.DataFrame):
    """A DataFrame drawn in the one table style (see the module); its values are the frame's own."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:   # what it computes is an ordinary frame
        return pd.DataFrame

    def _repr_html_(self) -> str:
        return view_html(paper_view(self))

    def _repr_markdown_(self) -> str:
        return view_markdown(paper_view(self))

    def __repr__(self) -> str:
        return view_text(paper_view(self))

    def __reduce__(self) -> Any:   # pickles (and copies) as a plain frame
        return pd.DataFrame(self).__reduce__()


def readable(frame: pd.DataFrame, layout: Layout | None = None) -> pd.DataFrame:
    """``frame`` drawn in the one table style (its values unchanged); ``layout`` says which
    columns hold estimates and which to hide."""
    table = ReadableTable(frame)
    table.attrs = {**frame.attrs, **({LAYOUT: layout} if layout is not None else {})}
    return table


def estimates_layout(metrics: Mapping[str, str], *, n: Mapping[str, str] | None = None,
                     hidden: Sequence[str] = (), rename: Mapping[str, str] | None = None, empty: str = "",
                     bounds: tuple[str, str] = ("_ci_low", "_ci_high"), fractions: Sequence[str] = ()) -> Layout:
    """The layout of a table holding ``NAME``, ``NAME_ci_low``, ``NAME_ci_high`` per metric
    (``metrics``: name -> shown title; ``n``: name -> the column holding its n; ``bounds``: the
    suffixes of the interval's columns, ``("_low", "_high")`` for the statistics tables)."""
    low, high = bounds
    return Layout(tuple(Estimate(title, m, f"{m}{low}", f"{m}{high}", (n or {}).get(m))
                        for m, title in metrics.items()), tuple(hidden), dict(rename or {}), empty=empty,
                  fractions=tuple(fractions))


def intervals_layout(names: Sequence[str], *, n: Mapping[str, str] | None = None, hidden: Sequence[str] = (),
                     rename: Mapping[str, str] | None = None, fractions: Sequence[str] = ()) -> Layout:
    """The layout of a statistics table holding ``NAME``, ``NAME_low``, ``NAME_high`` per
    estimate (the judges' and the standard errors' tables), each shown as one cell titled
    by the name's header (:mod:`evalnb.views.labels`): ``0.551 [0.325, 0.781]``."""
    return estimates_layout({name: estimate_title(name) for name in names}, n=n, hidden=hidden, rename=rename,
                            bounds=("_low", "_high"), fractions=fractions)


# The headline table (report, aggregate, exports): each metric's label, its estimate and n.
HEADLINE_LAYOUT = Layout((Estimate(estimate_title("value"), "value", "ci_low", "ci_high", "n"),), hidden=("metric",))


def table_html(frame: pd.DataFrame) -> str:
    """The HTML of any frame in the one style (for a view that holds several)."""
    return view_html(paper_view(frame))


def table_text(frame: pd.DataFrame) -> str:
    return view_text(paper_view(frame))
