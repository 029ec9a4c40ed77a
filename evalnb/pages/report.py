"""Tables and figures for the report notebook.

Everything here loops over what the run's benchmark declares (its metrics, statuses,
breakdown, figure, tables and item evidence) and reads only the run directory.

Figures are :class:`evalnb.views.figures.ReportFigure` objects, built with matplotlib's object API
(no pyplot, no backend chosen): each is saved as PNG and PDF under ``figures/`` and returned,
so it shows as an image in the notebook whatever ``MPLBACKEND`` the kernel inherited.
matplotlib is imported when a figure is drawn, not with this module.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalnb.pipeline.accounting import usage_rows
from evalnb.benchmarks import Benchmark
from evalnb.evidence.items_html import TasksView, TitledTables, tasks_view
from evalnb.evidence.headline import headline_table
from evalnb.pipeline.run import Run, scores
from evalnb.benchmarks.base import contestant_label
from evalnb.views.tables import Layout, readable
from evalnb.views.words import count_of, item_plural
from evalnb.stats.latency import FIGURES, latency_rows

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure


def _bench(run: Run) -> type[Benchmark]:
    return type(run.benchmark)


def headline(run: Run) -> pd.DataFrame:
    """Every declared metric, headline metrics first, with its seeded bootstrap interval."""
    return headline_table(scores(run))


def status_breakdown(run: Run) -> pd.DataFrame:
    """Every status the benchmark declares, with zero rows kept so absences are visible."""
    statuses = _bench(run).STATUSES
    counts = Counter(row["status"] for row in scores(run)["tasks"])
    rows = [(s, counts.get(s, 0)) for s in statuses] + [(s, n) for s, n in counts.items() if s not in statuses]
    total = sum(n for _, n in rows)
    return readable(pd.DataFrame([(s, n, n / total if total else 0.0) for s, n in rows],
                                 columns=["status", "tasks", "share"]).set_index("status"))


def usage_table(run: Run) -> pd.DataFrame:
    """Token usage (and cost, where the parameters price the model): as reported, and, for
    calls whose reply reported none, as estimated from their texts (``estimated_usage_calls``
    says how many, shown only when there are some)."""
    rows = usage_rows(scores(run)["usage"])
    columns = ["stage", "model", "calls", "attempts", "input_tokens", "output_tokens", "cost_usd"]
    if any("batch_calls" in r for r in rows):   # batch mode: how many calls, at which price
        columns[3:3] = ["batch_calls"]
        columns.append("batch_price")
    if any(r.get("estimated_usage_calls") for r in rows):   # replies that reported no usage
        columns.insert(columns.index("input_tokens"), "estimated_usage_calls")
    return readable(pd.DataFrame(rows, columns=columns).set_index(["stage", "model"]))


def budget_table(run: Run) -> pd.DataFrame:
    """Spend against each spending ceiling (``budget.max_cost_usd``; a suite's over all its runs),
    as the aggregate stage read it; empty without a budget."""
    columns = ["scope", "max_cost_usd", "spent_usd", "in_doubt_usd", "reserved_usd", "left_usd",
               "this_run_spent_usd", "stopped"]
    rows = (scores(run).get("budget") or {}).get("ceilings", [])
    return readable(pd.DataFrame(rows, columns=columns).set_index("scope"),
                    Layout(empty="No spending ceiling: the parameters set no budget.max_cost_usd."))


def latency_table(run: Run) -> pd.DataFrame:
    """Per stage and model: calls made live, how many streamed, and the median and 90th
    percentile of each call's total time, time to first token and output tokens per second
    (the last two only where streamed)."""
    columns = ["stage", "model", "calls", "streamed", *(f"{f} {q}" for f in FIGURES for q in ("median", "p90"))]
    rows = latency_rows(scores(run).get("latency") or {})
    return readable(pd.DataFrame(rows, columns=columns).set_index(["stage", "model"]),
                    Layout(empty="No latency: no call was made live (offline or file-fed answers, no judge call)."))


def reasoning_table(run: Run) -> pd.DataFrame:
    """Per stage and model: calls that returned reasoning apart from the answer (recorded,
    never judged), and responses that began with an inline think block."""
    columns = ["stage", "model", "calls", "with_reasoning", "reasoning_chars", "think_block_kept",
               "think_block_stripped"]
    rows = [{"stage": stage, "model": model, **row}
            for stage, per_model in (scores(run).get("reasoning") or {}).items() for model, row in per_model.items()]
    return readable(pd.DataFrame(rows, columns=columns).set_index(["stage", "model"]),
                    Layout(empty="No reasoning: no call returned reasoning or a think block."))


def _save(run: Run, fig: ReportFigure, name: str) -> ReportFigure:
    from evalnb.views.figures import save_figure
    return save_figure(fig, run.path("figures"), name)


def score_histogram(run: Run) -> ReportFigure:
    """Each item's own score (for repeated items, the mean over repeats): one column wide,
    whole-number counts, the caption beside it (model, n, offline note)."""
    from evalnb.views.figures import ONE_COLUMN, OFFLINE, PALETTE, integer_ticks, new_figure, styled, with_offline_note

    data = scores(run)
    bench = _bench(run)
    noun, nouns = bench.ITEM_NOUN, item_plural(bench)
    values = [s for s in bench.results(data).scores.values() if s is not None]
    offline = bool(data.get("offline"))
    model = contestant_label(bench, run.config.model.provider, run.config.model.name, run.config.options)

    @styled
    def draw() -> ReportFigure:
        fig = new_figure((ONE_COLUMN, 2.3), caption=with_offline_note(
            f"Distribution of {count_of(len(values), noun, nouns)}' scores for {model} (ten bins of width 0.1; "
            f"an unanswered {noun} scores 0 where the benchmark says so).", offline))
        ax = fig.subplots()
        style: dict[str, Any] = OFFLINE if offline else {"color": PALETTE[0], "edgecolor": "white"}
        ax.hist(values, bins=10, range=(0, 1), **style)
        ax.set_xlabel(f"{noun} score")
        ax.set_ylabel(nouns)
        ax.set_xlim(0, 1)
        integer_ticks(ax.yaxis)
        return _save(run, fig, "score_histogram")
    return draw()


def judge_scores(run: Run) -> pd.DataFrame:
    """One row per (item, judge) score that exists: the judges of a panel, or a rater's runs."""
    results = _bench(run).results(scores(run))
    return pd.DataFrame([(item, judge, score) for item, judges in results.judges.items()
                         for judge, score in judges.items()], columns=["item", "judge", "score"])


def judge_distributions(run: Run) -> ReportFigure:
    """Each judge's (or rater run's) scores as a strip plot, with its mean and 95% interval."""
    from evalnb.views.plots import judge_strip_plot
    table = judge_scores(run)
    per_judge = {str(j): list(part["score"]) for j, part in table.groupby("judge")} if len(table) else {}
    fig = judge_strip_plot(per_judge, offline=bool(scores(run).get("offline")))
    return _save(run, fig, "judge_distributions")


def breakdown(run: Run) -> pd.DataFrame:
    """The benchmark's own breakdown table."""
    return readable(_bench(run).breakdown(scores(run)), Layout(rename={"count": "n", "std": "s.d."}))


def benchmark_figure(run: Run) -> ReportFigure:
    """The benchmark's own figure (built in evalnb's figure style), saved under the name it declares."""
    from evalnb.views.figures import figure_style

    bench = _bench(run)
    with figure_style():
        return _save(run, bench.figure(scores(run)), bench.FIGURE)


def benchmark_tables(run: Run) -> TitledTables:
    """Further tables the benchmark declares for its report, under their titles."""
    return TitledTables(_bench(run).report_tables(scores(run)),
                        empty="The benchmark declares no further tables.")


def tasks(run: Run) -> TasksView:
    """The Tasks section: every item in a compact table, and the evidence of the lowest-scoring
    and most-disagreed items (from evidence.json, written by the aggregate stage)."""
    return tasks_view(run.dir)
