"""The statistics tables as a reader sees them: each is computed by its own view, drawn through
its :class:`evalnb.views.tables.Layout`, and every estimate cell reads the numbers the frame
holds (``value [low, high]``, three decimals), with its n beside it and no ``_low``/``_high``
column shown."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import evalnb
from evalnb.comparison.compare import open_compare
from evalnb.judges.bias import length_bias, self_preference
from evalnb.judges.panel import panel_reliability
from evalnb.pipeline.retest_study import run_length_bias, run_reliability
from evalnb.views.labels import estimate_title
from evalnb.views.tables import layout_of, paper_view, view_text
from tests.conftest import offline_params
from tests.test_judge_panel import judged_run, panel_verdicts, three_models
from tests.test_metrics import run_all


def expected(value: float | None, low: float | None, high: float | None) -> str:
    """The cell, written out here rather than through the code under test."""
    def text(x: float | None) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
    if all(x is None or (isinstance(x, float) and math.isnan(x)) for x in (low, high)):
        return text(value)
    return f"{text(value)} [{text(low)}, {text(high)}]"


def check_estimates(table: pd.DataFrame | None, names: list[str], with_n: str | None = None) -> list[str]:
    """Each of ``names`` shown as one cell matching its raw columns; returns the shown titles."""
    assert table is not None and layout_of(table).estimates, "the table declares its estimates"
    view = paper_view(table)
    flat = table.reset_index()
    titles = list(view.frame.columns)
    for name in names:
        title = estimate_title(name)   # the vocabulary's header, and the interval it carries
        assert title in titles
        raw = zip(flat[name], flat[f"{name}_low"], flat[f"{name}_high"])
        assert list(view.frame[title]) == [expected(v, lo, hi) for v, lo, hi in raw]
    assert not any(t.endswith(("_low", "_high")) for t in titles)
    if with_n is not None:   # n right after its estimate
        assert titles[titles.index(estimate_title(with_n)) + 1] == "n"
    text = view_text(view)
    assert all(expected(v, lo, hi) in text for v, lo, hi in zip(flat[names[0]], flat[f"{names[0]}_low"],
                                                                  flat[f"{names[0]}_high"]))
    return titles


def test_compare_judge_tables_show_their_intervals(tmp_path: Path) -> None:
    cmp = open_compare(three_models(tmp_path, 0.15, seed=10), tmp_path / "cmp", n_boot=300)
    table = panel_reliability(cmp)
    titles = check_estimates(table, ["estimate"], with_n="estimate")
    # the statistic named in a column headed so, in words, never in the model or judge column
    assert titles[:3] == ["model", "statistic", "judge"]
    shown = paper_view(table).frame
    assert set(shown["statistic"]) == {"Krippendorff's alpha (interval)", "offset from the panel mean"}
    assert "alpha" not in set(shown["model"]) | set(shown["judge"])
    check_estimates(self_preference(cmp), ["self_preference", "own_family_gap", "other_contestants_gap"])


def test_length_bias_table_shows_its_intervals(tmp_path: Path) -> None:
    lengths = [300 + 50 * i for i in range(60)]
    runs = [judged_run(tmp_path, "a", panel_verdicts(4, 0.5), lengths=lengths),
            judged_run(tmp_path, "b", panel_verdicts(5, 0.5), lengths=lengths[::-1])]
    cmp = open_compare(runs, tmp_path / "cmp", n_boot=200)
    check_estimates(length_bias(cmp), ["spearman_rho", "slope_per_log_char"], with_n="spearman_rho")


def test_a_runs_statistics_tables_show_their_intervals(tmp_path: Path) -> None:
    params = offline_params(tmp_path) | {"n_boot": 300}
    run_all(params)
    run = evalnb.open_run(params)
    try:
        errors = evalnb.standard_errors(run)
        check_estimates(errors, ["value", "cluster_bootstrap"], with_n="value")
        assert errors is not None and pd.api.types.is_numeric_dtype(errors["value"])   # the frame stays raw
        check_estimates(run_reliability(run), ["estimate"], with_n="estimate")
        check_estimates(run_length_bias(run), ["spearman_rho", "slope_per_log_char"], with_n="spearman_rho")
    finally:
        run.close()
