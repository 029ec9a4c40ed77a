"""Every number a reviewer reads, as pure functions over arrays: the one resampler
(:mod:`.resample`), percentile and bootstrap intervals (:mod:`.intervals`), clustered standard
errors (:mod:`.clustered`), paired verdicts and Holm (:mod:`.pairwise`), rank intervals, power
and planning formulas, the judges' reliability and bias, an estimate's n, the metric
combinators a benchmark declares (:mod:`.metrics`) and call latencies.

Imports only :mod:`evalnb.core` (and numpy/scipy); no pandas tables, notebooks or files.
Methods and their small-sample behaviour: docs/statistics.md.
"""
