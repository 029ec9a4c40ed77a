"""How numbers reach a reader: the one table layout and estimate format (:mod:`.tables`,
:mod:`.estimates`), the figure style and shared plots (:mod:`.figures`, :mod:`.plots`), the
words a view builds from a benchmark's item noun (:mod:`.words`), and a stage's progress
(:mod:`.progress`, its channel to the command's terminal, and :mod:`.frontend`: where the code
runs, a kernel or a terminal).

Imports :mod:`evalnb.core` and :mod:`evalnb.stats`; every layer above (records and up, the
benchmarks included) may import it. matplotlib and pandas load only when a function that
draws or tabulates is called.
"""
