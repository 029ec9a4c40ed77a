"""Tables as a person reads them in a notebook: counts as integers, text whole.

pandas' own notebook display cuts every text cell at 50 characters with ``...`` (a metric's
label, the offline note, a judge panel) and prints a float column's whole numbers as
``12.0`` or ``10.000000`` (a count beside fractions, or a count column with one missing
value). A :class:`ReadableTable` is a ``DataFrame`` whose display, and only its display,
differs: a whole number shows as one (``12``), other floats with six significant digits
(``0.551389``), a missing value as ``-``, every text whole (the notebook's HTML table
wraps it). Its values, and every frame computed from it, are plain pandas; no pandas option
is read or changed, so a researcher's own settings and tables are untouched.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

MISSING = "-"


def number(value: float) -> str:
    """A float as the table shows it: whole numbers (counts) without a fraction."""
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _cell(value: Any) -> Any:
    """A value of a mixed (object) column, as a float column's would show."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return number(value) if isinstance(value, float) else value


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """What is drawn: ``frame`` with its mixed columns' missing values and floats as text
    (pandas formats only float columns, and draws a missing object as ``None``)."""
    mixed = [i for i, dtype in enumerate(frame.dtypes) if dtype == object]
    if not mixed:
        return frame
    out = pd.DataFrame(frame).copy()
    for i in mixed:
        out.isetitem(i, frame.iloc[:, i].map(_cell))
    return out


def display_options(frame: pd.DataFrame) -> dict[str, Any]:
    """``to_html`` / ``to_string`` arguments that draw ``frame`` readably (no truncation)."""
    return {"float_format": number, "na_rep": MISSING, "max_rows": 500, "max_cols": 60,
            "show_dimensions": len(frame) > 500}


class ReadableTable(pd.DataFrame):
    """A DataFrame that shows counts as integers and text whole (see the module)."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:   # what it computes is an ordinary frame
        return pd.DataFrame

    def _repr_html_(self) -> str:
        return table_html(self)

    def __repr__(self) -> str:
        return table_text(self)

    def __reduce__(self) -> Any:   # pickles (and copies) as a plain frame
        return pd.DataFrame(self).__reduce__()


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the readable display (its values unchanged)."""
    return ReadableTable(frame)


def table_html(frame: pd.DataFrame) -> str:
    """The readable HTML of any frame (for a view that holds several)."""
    return pd.DataFrame.to_html(shown(frame), **display_options(frame))


def table_text(frame: pd.DataFrame) -> str:
    return pd.DataFrame.to_string(shown(frame), max_colwidth=None, **display_options(frame))
