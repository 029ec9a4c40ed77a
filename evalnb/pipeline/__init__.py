"""A run's stages: opening a run and generate, judge, aggregate (:mod:`.stages`), what each
stage notebook shows first (:mod:`.provenance`), the checks before any call
(:mod:`.preflight`, :mod:`.probe`), the calls' usage and cost (:mod:`.accounting`), which
stages a rerun executes (:mod:`.rerun`), what verify recomputes (:mod:`.recompute`), a stage's
outcome line and the retest study run on a finished run (:mod:`.retest_study`).

Imports everything below it, :mod:`evalnb.judges` included; :mod:`evalnb.pages` and the
command line import it.
"""
