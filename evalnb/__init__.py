"""evalnb: reproduce published LLM-benchmark evaluation protocols, notebook-first.

The stage notebooks call these functions, one per cell.
"""

from evalnb.agreement import (disagreements, judge_agreement, judge_means, points_distribution,
                              rubric_items)
from evalnb.compare import (leaderboard, leaderboard_figure, open_compare, paired_differences,
                            repeats_table, save_compare)
from evalnb.pipeline import Run, aggregate, generate, judge, open_run
from evalnb.report import (benchmark_figure, breakdown, headline, judge_distributions,
                           score_histogram, status_breakdown, usage_table)

__version__ = "0.1.0"
__all__ = ["Run", "open_run", "generate", "judge", "aggregate", "headline", "status_breakdown",
           "score_histogram", "judge_distributions", "usage_table", "breakdown",
           "benchmark_figure", "open_compare", "leaderboard", "leaderboard_figure",
           "paired_differences", "repeats_table", "save_compare", "judge_means", "judge_agreement",
           "disagreements", "rubric_items", "points_distribution"]
