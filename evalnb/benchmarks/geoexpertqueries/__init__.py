"""GeoExpertQueries (its protocol is in "Evaluation Protocol & Statistical Confidence Intervals").

:mod:`.protocol` is the protocol read top to bottom, :mod:`.analysis`
what a reader sees of a run, :mod:`.queries` the queries, :mod:`.rater_prompt` the rater's prompt
checked and filled, :mod:`.ratings` its replies read, :mod:`.trajectories` how a trace is
condensed for the rater."""

from evalnb.benchmarks.geoexpertqueries.analysis import GeoExpertQueries

__all__ = ["GeoExpertQueries"]
