"""The judges' studies: a run's judge section of scores.json (:mod:`.scores`), the retest study
(:mod:`.retest`), the panel's reliability and leave-one-judge-out (:mod:`.panel`),
self-preference and length bias (:mod:`.bias`) and a change of panel (:mod:`.panel_change`).

Imports everything up to :mod:`evalnb.comparison`; the pipeline imports it (a run's judge
stage writes the judges' section).
"""
