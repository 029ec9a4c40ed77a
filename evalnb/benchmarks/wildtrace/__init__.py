"""WildTrace (spec 000): :mod:`.protocol` is the protocol read top to bottom, :mod:`.analysis`
what a reader sees of a run, :mod:`.caps` the context caps (with ``caps.json``), :mod:`.repeats`
the optional contestant repeats (``repeats: K``, not the protocol)."""

from evalnb.benchmarks.wildtrace.analysis import WildTrace

__all__ = ["WildTrace"]
