"""Several runs side by side: loading comparable runs and the leaderboard (:mod:`.compare`), one
cluster bootstrap over them behind every added statistic (:mod:`.joint`), paired differences
on the common items (:mod:`.paired`), the judges' agreement across runs (:mod:`.agreement`) and
``evalnb plan`` (:mod:`.planning`).

Imports the foundation, :mod:`evalnb.config`, :mod:`evalnb.benchmarks` and :mod:`evalnb.evidence`.
"""
