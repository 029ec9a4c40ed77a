"""evalnb: reproduce published LLM-benchmark evaluation protocols, notebook-first.

The stage notebooks call these functions, one per cell.
"""

from evalnb.pipeline import Run, aggregate, generate, judge, open_run
from evalnb.report import (benchmark_figure, breakdown, headline, judge_distributions,
                           score_histogram, status_breakdown, usage_table)

__version__ = "0.1.0"
__all__ = ["Run", "open_run", "generate", "judge", "aggregate", "headline", "status_breakdown",
           "score_histogram", "judge_distributions", "usage_table", "breakdown",
           "benchmark_figure"]
