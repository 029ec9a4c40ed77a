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
    **dict.fromkeys(("Run", "open_run", "generate", "judge", "aggregate"), "evalnb.pipeline"),
    **dict.fromkeys(("headline", "status_breakdown", "score_histogram", "judge_distributions", "usage_table",
                     "breakdown", "benchmark_figure", "benchmark_tables", "tasks", "latency_table",
                     "reasoning_table"), "evalnb.report"),
    **dict.fromkeys(("open_compare", "leaderboard", "leaderboard_figure", "paired_differences", "repeats_table",
                     "save_compare"), "evalnb.compare"),
    **dict.fromkeys(("judge_means", "judge_agreement", "disagreements", "benchmark_analysis",
                     "benchmark_compare_figure"), "evalnb.agreement"),
    "show": "evalnb.evidence",
    "batches_table": "evalnb.batch.report",
}
__all__ = ["Run", "open_run", "generate", "judge", "aggregate", "headline", "status_breakdown",
           "score_histogram", "judge_distributions", "usage_table", "breakdown",
           "benchmark_figure", "benchmark_tables", "tasks", "open_compare", "leaderboard", "leaderboard_figure",
           "paired_differences", "repeats_table", "save_compare", "judge_means", "judge_agreement",
           "disagreements", "benchmark_analysis", "benchmark_compare_figure", "show",
           "batches_table", "latency_table", "reasoning_table"]   # the keys of _EXPORTS

if TYPE_CHECKING:
    from evalnb.batch.report import batches_table
    from evalnb.agreement import (benchmark_analysis, benchmark_compare_figure, disagreements, judge_agreement,
                                  judge_means)
    from evalnb.compare import (leaderboard, leaderboard_figure, open_compare, paired_differences,
                                repeats_table, save_compare)
    from evalnb.pipeline import Run, aggregate, generate, judge, open_run
    from evalnb.evidence import show
    from evalnb.report import (benchmark_figure, benchmark_tables, breakdown, headline, judge_distributions,
                               latency_table, reasoning_table, score_histogram, status_breakdown, tasks,
                               usage_table)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalnb' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value   # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
