"""GeoKTools (its protocol is in "Evaluation Protocol & Statistical Confidence Intervals").

:mod:`.protocol` is the protocol read top to bottom, :mod:`.analysis`
what a reader sees of a run, :mod:`.scoring` the exact-match and deterministic scorers."""

from evalnb.benchmarks.geoktools.analysis import GeoKTools

__all__ = ["GeoKTools"]
