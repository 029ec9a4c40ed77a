"""The judges' tables of a comparison, as a paper takes them: what a reviewer of an LLM-judged
benchmark asks for (the judges' mean scores, their reliability, the leaderboard without each
judge, self-preference, length bias, a panel change, the items they disagree on most, the
repeats).

Each is read back from ``compare.json``'s ``tables`` (never recomputed) and shown through the
layout the compare notebook shows it with, under a caption saying what it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from evalnb.views.tables import Layout, intervals_layout


def _reliability(_: Mapping[str, Any]) -> Layout:
    return intervals_layout(["estimate"], n={"estimate": "n"})


def _leave_one_out(_: Mapping[str, Any]) -> Layout:
    return Layout(fractions=("score_full", "score_without", "kendall_tau"))


def _self_preference(_: Mapping[str, Any]) -> Layout:
    return intervals_layout(["self_preference", "own_family_gap", "other_contestants_gap"])


def _length(_: Mapping[str, Any]) -> Layout:
    return intervals_layout(["spearman_rho", "slope_per_log_char"], n={"spearman_rho": "n"})


def _panel_change(compared: Mapping[str, Any]) -> Layout:
    from evalnb.judges.panel_change import change_layout

    rows = (compared.get("tables") or {}).get("panel_change") or [{}]
    return change_layout(str(rows[0].get("cluster") or "cluster"))


def _means(_: Mapping[str, Any]) -> Layout:
    return Layout(rename={"mean": "mean score"})


def _plain(_: Mapping[str, Any]) -> Layout:
    return Layout()


# name in compare.json's tables -> (caption, layout maker); in the order the compare shows them
JUDGE_TABLES: dict[str, tuple[str, Callable[[Mapping[str, Any]], Layout]]] = {
    "judge_means": ("Each judge's mean score per model, and the number of verdicts it rests on.", _means),
    "judge_reliability": ("The judges' reliability: Krippendorff's alpha (interval level) over the panel and each "
                          "judge's offset from the panel mean, per model and pooled over models, with bootstrap "
                          "intervals resampling items (whole clusters where the benchmark declares them).",
                          _reliability),
    "leave_one_judge_out": ("The leaderboard without each judge (each item scored by the other judges' mean): each "
                            "model's first headline metric and rank with the full panel and without the judge, the "
                            "rank change (positive: the model rises without it), and Kendall's tau-b between the "
                            "two orders.", _leave_one_out),
    "self_preference": ("Self-preference, where a judge's family matches a contestant's: the judge's score minus the "
                        "other judges' mean on its family's items, minus the same on other contestants' items, with "
                        "a paired bootstrap interval (above 0: the judge favours its family).", _self_preference),
    "length_bias": ("Length bias per judge, within each model and pooled: Spearman's rho of score with response "
                    "length in characters and the slope of score on log(length), with bootstrap intervals.", _length),
    "panel_change": ("Panel change: each model's first headline metric under the first panel (the leaderboard's) "
                     "and a second one, the shift with its paired cluster-bootstrap interval, both ranks, and "
                     "Kendall's tau-b between the two orders.", _panel_change),
    "disagreements": ("The items whose judges disagree most: the spread of their scores, each judge's score, and "
                      "where the item's evidence is.", _plain),
    "repeats": ("Each headline metric's mean and standard deviation across repeats, for runs that have them.", _plain),
}

# columns left out of a paper's table by default (in the CSV, and shown with --columns all)
JUDGE_HIDDEN: dict[str, tuple[str, ...]] = {"disagreements": ("show", "record"),
                                            "panel_change": ("answers_differ",)}


def judge_tables(compared: Mapping[str, Any]) -> list[tuple[str, str, pd.DataFrame, Layout]]:
    """Each judges' table the comparison recorded: name, caption, raw rows and layout."""
    tables = compared.get("tables") or {}
    return [(name, caption, pd.DataFrame(tables[name]), layout(compared))
            for name, (caption, layout) in JUDGE_TABLES.items() if tables.get(name)]


def run_judge_tables(folder: Any) -> list[tuple[str, str, pd.DataFrame, Layout]]:
    """A run's own judges' tables, from its scores.json (each None when the run has no such
    section): the panel's reliability, length bias and the retest study."""
    from pathlib import Path
    from types import SimpleNamespace

    from evalnb.pipeline.retest_study import judge_retest_table, run_length_bias, run_reliability
    from evalnb.views.tables import layout_of

    record: Any = SimpleNamespace(path=lambda name: Path(folder) / name)   # what the views read: scores.json
    found = [("judge_reliability", "The judges' reliability: Krippendorff's alpha (interval level) over the panel and "
              "each judge's offset from the panel mean, with bootstrap intervals.", run_reliability(record)),
             ("length_bias", "Length bias per judge: Spearman's rho of score with response length in characters and "
              "the slope of score on log(length), with bootstrap intervals.", run_length_bias(record)),
             ("judge_retest", "The retest study: per judge, the answers judged again, the verdicts, the test-retest "
              "standard deviation and the share of score variance that is noise, with intervals.",
              judge_retest_table(record))]
    return [(name, caption, pd.DataFrame(frame), layout_of(frame)) for name, caption, frame in found
            if frame is not None]
