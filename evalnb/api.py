"""The public benchmark API: every name a benchmark of your own may use, in one module.

``from evalnb.api import BaseBenchmark, Call, ChatRequest, Metric, ...``. The names listed in
``__all__`` (and documented in docs/benchmark-api.md, generated from these docstrings by
``python -m evalnb.app.apidoc``) are public and stable: within a major version they keep
their names, arguments and meaning. Everything else under ``evalnb`` is private to evalnb
and may change in any release, even where it is importable; a benchmark that imports it
does so at its own risk. Built-in benchmarks import from ``evalnb.core`` directly (the
layers), which is where these names live.

Importing this module loads numpy (the metric combinators) but not pandas or matplotlib:
``new_figure`` and ``ReportFigure`` import matplotlib when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.benchmarks import Benchmark, Task
from evalnb.benchmarks.base import BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, metric_ci, metric_value, score_or_nan
from evalnb.core.data import Where, read_json, read_jsonl, record_id, require, unique_ids
from evalnb.core.chains import chained
from evalnb.core.errors import ConfigError, DataError, NotYet
from evalnb.stats.metrics import channel_mean, count_scored, macro_mean, mean, ratio, share_scored, stratum_mean
from evalnb.core.replies import JudgeReplyError, as_number, field_of, interpreter, json_objects, reply_of
from evalnb.core.run_config import EndpointConfig, RunConfig
from evalnb.stats.arena import WIN_SCORE, Battle, battles_against, bradley_terry, consistency, contestant_label, read_verdict, win_rate
from evalnb.stats.intervals import N_BOOT, cell_mean
from evalnb.core.types import (Call, ChatRequest, Completion, Fact, ItemEvidence, ItemResults, JudgeStatus, Metric,
                               Passage, Prepared, Record, RunScores, Status, Table, Turn, Usage,
                               answer_fields)

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure as ReportFigure

# The reference page's sections, in order: (title, what the section is for, names).
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("The benchmark class",
     "A benchmark is a class that stands behind `Benchmark`; deriving from `BaseBenchmark` gives the defaults. "
     "The run's parameters reach it as a `RunConfig`.",
     ("Benchmark", "BaseBenchmark", "Task", "RunConfig", "EndpointConfig", "BOOTSTRAP_OPTIONS")),
    ("Calls and records",
     "Each stage's work is a list of `Call`s; each finished call is one `Record` in the stage's store.",
     ("Call", "Prepared", "ChatRequest", "Turn", "chained", "NotYet", "Completion", "Usage", "Record", "Status",
      "JudgeStatus", "answer_fields")),
    ("Judge replies",
     "A judge's reply becomes a verdict or a resumable judge failure, never a zero.",
     ("interpreter", "JudgeReplyError", "json_objects", "field_of", "as_number", "reply_of")),
    ("Metrics and results",
     "Declared metrics are functions over a repeats x items matrix and named per-item channels; the shared "
     "statistics give each its seeded bootstrap interval.",
     ("Metric", "ItemResults", "mean", "stratum_mean", "macro_mean", "share_scored", "count_scored",
      "channel_mean", "ratio", "cell_mean", "N_BOOT", "NAN", "score_or_nan", "metric_value", "metric_ci",
      "RunScores")),
    ("Pairwise judging",
     "A judge comparing the contestant's answer with a baseline's in both orders (`[[A>>B]]` ... `[[B>>A]]`): "
     "the verdict read, each game from the contestant's side, the two orders' consistency, the win rate with "
     "its cluster bootstrap interval, and Bradley-Terry scores with intervals and ranks "
     "([a worked example](#pairwise-judging-against-a-baseline) above).",
     ("read_verdict", "contestant_label", "WIN_SCORE", "consistency", "win_rate", "Battle", "battles_against",
      "bradley_terry")),
    ("Evidence",
     "What a reviewer reads for one item, in the report and tasks.html.",
     ("ItemEvidence", "Fact", "Passage", "Table")),
    ("Inputs and errors",
     "Reading a data file so that every error is one line naming the file, the line or item, and the field.",
     ("read_jsonl", "read_json", "Where", "require", "record_id", "unique_ids", "ConfigError", "DataError")),
    ("Figures", "", ("new_figure", "ReportFigure")),
)

# Contracts of the names that are data, not classes or functions (they cannot carry a docstring).
DATA_DOCS = {
    "Record": "`dict[str, Any]`: one stored line of a stage (`generate.jsonl`, `judge.jsonl`). The runner sets "
              "`key`, `endpoint`, `attempts` and the completion's metadata; the benchmark's `Prepared.fields` and "
              "`interpret` give the rest. Every record has `status` (one of the shared statuses, `Status` for the "
              "generate stage and `JudgeStatus` for the judge stage, or one the benchmark declares in `STATUSES`) "
              "and, when an interpreter returned it, `text` (a string, or None; a string when `status` is `ok`). "
              "A record that breaks this rule "
              "fails its own call (recorded `failed_transient`, code `unexpected`, with a message naming the "
              "benchmark, the call and the field) and is never stored.",
    "RunScores": "`tuple[str, Mapping[str, Any]]`: a finished run as `compare_tables` and `compare_figure` get it, "
                 "its label and its scores.json.",
    "BOOTSTRAP_OPTIONS": "`{'n_boot': 10000, 'seed': 0}`: the bootstrap's options, to spread into a benchmark's "
                         "`OPTIONS`; `BaseBenchmark.check_bootstrap` checks them and `with_metrics` uses them.",
    "WIN_SCORE": "`{'A>>B': 1.0, 'A>B': 1.0, 'A=B': 0.5, 'B>A': 0.0, 'B>>A': 0.0}`: a game's score for answer A, "
                 "strong or not (a win rate counts each game once; `bradley_terry` weighs strong verdicts).",
    "N_BOOT": "`10000`: the default number of bootstrap replicates.",
    "NAN": "`math.nan`: a cell of `ItemResults.values` (or of a channel) with no value of its own (not yet "
           "scored, or nothing to score). NaN never means zero: say 0.0 for a zero.",
}


def new_figure(figsize: tuple[float, float], **kwargs: Any) -> ReportFigure:
    """A new :class:`ReportFigure` of ``figsize`` inches (matplotlib's object API, no pyplot: it
    never touches the researcher's backend or pyplot's figure registry). Draw on
    ``fig.subplots()`` and return it from ``figure(scores)``; the report saves it as
    ``figures/<FIGURE>.png`` and ``.pdf``. ``kwargs`` go to ``matplotlib.figure.Figure``."""
    from evalnb.views.figures import new_figure as make

    return make(figsize, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "ReportFigure":   # matplotlib is imported only when a figure is asked for
        from evalnb.views.figures import ReportFigure

        return ReportFigure
    raise AttributeError(f"module 'evalnb.api' has no attribute {name!r}")


__all__ = ["Benchmark", "BaseBenchmark", "Task", "RunConfig", "EndpointConfig", "BOOTSTRAP_OPTIONS",
           "Call", "Prepared", "ChatRequest", "Turn", "chained", "NotYet", "Completion", "Usage", "Record", "Status", "JudgeStatus",
           "answer_fields", "interpreter", "JudgeReplyError", "json_objects", "field_of", "as_number", "reply_of",
           "Metric", "ItemResults", "mean", "stratum_mean", "macro_mean", "share_scored", "count_scored",
           "channel_mean", "ratio", "cell_mean", "N_BOOT", "NAN", "score_or_nan", "metric_value", "metric_ci",
           "RunScores", "read_verdict", "contestant_label", "WIN_SCORE", "consistency", "win_rate", "Battle", "battles_against",
           "bradley_terry", "ItemEvidence", "Fact", "Passage", "Table", "read_jsonl", "read_json", "Where", "require",
           "record_id", "unique_ids", "ConfigError", "DataError", "new_figure", "ReportFigure"]
