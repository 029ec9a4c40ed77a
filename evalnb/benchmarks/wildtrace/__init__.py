"""WildTrace (its protocol is "WildTrace — Evaluation Protocol").

:mod:`.protocol` is the protocol read top to bottom, :mod:`.analysis`
what a reader sees of a run, :mod:`.tasks` the tasks and rubrics, :mod:`.prompt_text` the prompts
and their filling, :mod:`.verdicts` how a judge's reply is read, :mod:`.caps` the context caps
(with ``caps.json``), :mod:`.imported` answers imported from a file, :mod:`.repeats` the optional
contestant repeats (``repeats: K``, not the protocol)."""

from evalnb.benchmarks.wildtrace.analysis import WildTrace

__all__ = ["WildTrace"]
