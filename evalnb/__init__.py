"""evalnb: reproduce published LLM-benchmark evaluation protocols, notebook-first.

The stage notebooks call these functions, one per cell. Importing the package loads none of
pandas, matplotlib, IPython or papermill, and changes no global state (no matplotlib backend,
event-loop policy, warnings filter or logging configuration): each function's module is
imported on first use (``evalnb.open_run``, ``evalnb.headline`` ...).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(("Run", "open_run"), "evalnb.pipeline.run"),
    **dict.fromkeys(("generate", "judge", "aggregate"), "evalnb.pipeline.stages"),
    **dict.fromkeys(("headline", "status_breakdown", "score_histogram", "judge_distributions", "usage_table",
                     "budget_table", "breakdown", "benchmark_figure", "benchmark_tables", "tasks", "latency_table",
                     "reasoning_table"), "evalnb.pages.report"),
    "open_compare": "evalnb.comparison.compare",
    **dict.fromkeys(("leaderboard", "leaderboard_figure", "repeats_table", "save_compare"),
                    "evalnb.comparison.leaderboard"),
    "paired_differences": "evalnb.comparison.paired",
    **dict.fromkeys(("judge_means", "judge_agreement", "disagreements", "benchmark_analysis",
                     "benchmark_compare_figure"), "evalnb.comparison.agreement"),
    **dict.fromkeys(("judge_retest", "judge_retest_table", "run_reliability", "run_length_bias"),
                    "evalnb.pipeline.retest_study"),
    **dict.fromkeys(("panel_reliability", "leave_one_judge_out"), "evalnb.judges.panel"),
    **dict.fromkeys(("self_preference", "length_bias"), "evalnb.judges.bias"),
    "panel_change": "evalnb.judges.panel_change",
    **dict.fromkeys(("standard_errors", "pairwise"), "evalnb.pages.statistics"),
    "plan": "evalnb.comparison.planning",
    "show": "evalnb.evidence.items_html",
    "about": "evalnb.pipeline.provenance",
    "batches_table": "evalnb.execution.batch.views",
}
__all__ = ["Run", "open_run", "generate", "judge", "aggregate", "headline", "status_breakdown",
           "score_histogram", "judge_distributions", "usage_table", "budget_table", "breakdown",
           "benchmark_figure", "benchmark_tables", "tasks", "open_compare", "leaderboard", "leaderboard_figure",
           "paired_differences", "repeats_table", "save_compare", "judge_means", "judge_agreement",
           "disagreements", "benchmark_analysis", "benchmark_compare_figure", "show",
           "batches_table", "about", "latency_table", "reasoning_table", "standard_errors", "pairwise",
           "plan", "run_reliability", "run_length_bias", "judge_retest", "judge_retest_table", "panel_reliability",
           "leave_one_judge_out", "self_preference", "length_bias", "panel_change"]   # the keys of _EXPORTS

if TYPE_CHECKING:
    from evalnb.execution.batch.views import batches_table
    from evalnb.comparison.agreement import (benchmark_analysis, benchmark_compare_figure, disagreements, judge_agreement,
                                  judge_means)
    from evalnb.comparison.compare import open_compare
    from evalnb.comparison.leaderboard import leaderboard, leaderboard_figure, repeats_table, save_compare
    from evalnb.comparison.paired import paired_differences
    from evalnb.pipeline.run import Run, open_run
    from evalnb.pipeline.stages import aggregate, generate, judge
    from evalnb.evidence.items_html import show
    from evalnb.judges.bias import length_bias, self_preference
    from evalnb.judges.panel_change import panel_change
    from evalnb.judges.panel import leave_one_judge_out, panel_reliability
    from evalnb.pipeline.retest_study import judge_retest, judge_retest_table, run_length_bias, run_reliability
    from evalnb.comparison.planning import plan
    from evalnb.pipeline.provenance import about
    from evalnb.pages.statistics import pairwise, standard_errors
    from evalnb.pages.report import (benchmark_figure, benchmark_tables, breakdown, budget_table, headline,
                               judge_distributions, latency_table, reasoning_table, score_histogram, status_breakdown, tasks, usage_table)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalnb' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value   # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
