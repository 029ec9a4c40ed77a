"""What the notebook shows reads well. Tables: counts as integers, text whole, no
pandas option changed. Evidence: no length over "(none)". Figures: an ordinary figure's size."""

from __future__ import annotations

import struct

import pandas as pd

from evalnb.evidence.items import evidence_text
from evalnb.evidence.items_html import evidence_html
from evalnb.views.figures import new_figure
from evalnb.views.tables import readable
from evalnb.core.types import Fact, ItemEvidence, Passage

LONG = "All: mean over every task in the data file (not answered ok = 0), with its seeded interval"


def headline_like() -> pd.DataFrame:
    return pd.DataFrame({"metric": ["all_tasks", "scored_n"], "label": [LONG, "tasks scored"],
                         "value": [0.551389, 10.0], "n": [12, None], "cost_usd": [None, 0.25]}).set_index("metric")


def test_a_readable_table_shows_counts_as_integers_and_text_whole() -> None:
    frame = headline_like()
    table = readable(frame)
    html, text = table._repr_html_(), repr(table)
    for shown in (html, text):
        assert LONG in shown and "..." not in shown
        assert "12.0" not in shown and "10.000000" not in shown
    # The one table style: fractions with three decimals, counts as integers.
    assert '">10</td>' in html and '">12</td>' in html and '">0.551</td>' in html
    assert "None" not in html and html.count('">-</td>') == 2   # the missing n and the missing cost
    assert table.equals(frame) and table["n"].dtype == frame["n"].dtype   # the values are the frame's own


def test_a_readable_table_changes_no_pandas_option() -> None:
    before = {name: pd.get_option(name) for name in ("display.max_colwidth", "display.float_format",
                                                     "display.precision", "display.max_rows")}
    repr(readable(headline_like()))
    readable(headline_like())._repr_html_()
    assert {name: pd.get_option(name) for name in before} == before
    assert "..." in headline_like()._repr_html_()   # a researcher's own frame displays as pandas draws it
    assert type(readable(headline_like()).head(1)) is pd.DataFrame


def test_an_unanswered_item_says_none_without_a_length() -> None:
    item = ItemEvidence("wt-10", "out_of_context", 0.0, {},
                        (Fact("status", "out_of_context"), Passage("question", "When?"), Passage("response", None)))
    text, html = evidence_text(item), evidence_html(item)
    assert "== response: (none) ==" in text and "<b>response</b>: (none)" in html
    assert "characters) ==\n(none)" not in text and "(6 characters)" not in html
    assert "== question (5 characters) ==" in text   # a passage with text keeps its length


def test_a_figure_shows_at_an_ordinary_figures_size() -> None:
    """Displayed at the size an ordinary figure of the same ``figsize`` takes (matplotlib's
    100 dpi, the inline backend's), drawn with three times as many pixels (300 dpi, what a
    journal asks of a PNG) and at its exact print size (no tight crop: a 3.3-inch figure is
    one column wide)."""
    fig = new_figure((6, 3.5))
    ax = fig.subplots()
    ax.plot([0, 1], [1, 0])
    png, size = fig._repr_png_()
    drawn = struct.unpack(">II", png[16:24])
    assert (size["width"], size["height"]) == (600, 350), size
    assert drawn == (1800, 1050)
