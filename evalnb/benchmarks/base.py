"""What the benchmark classes share: option checks, the defaults of the interface, and the
step that adds the declared metrics to a scores.json body."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.stats import clustered, intervals as stats
from evalnb.core.run_config import RunConfig
from evalnb.core.types import ItemResults, JudgeStatus, Metric, Record, RunScores, Status

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.views.figures import ReportFigure

BOOTSTRAP_OPTIONS: Mapping[str, Any] = {"n_boot": stats.N_BOOT, "seed": 0}
GENERIC_STAGE_NOTES = {
    "generate": "Each item's answer is recorded in `generate.jsonl` as it arrives; re-running resumes.",
    "judge": "Each answer is graded as the benchmark says; a verdict that cannot be read is a "
             "judge failure, resumable, never a zero.",
    "aggregate": "Every declared metric, with its seeded bootstrap interval, into `scores.json`; "
                 "null while anything is resumable.",
    "report": "The headline numbers, statuses, the benchmark's own tables and figure, usage, and "
              "each item's evidence (`tasks.html` has every item whole).",
}
NAN = math.nan


class BaseBenchmark:
    """Defaults for the parts of :class:`~evalnb.benchmarks.Benchmark` most benchmarks share.

    A subclass gives ``NAME``, ``OPTIONS``, ``PATH_OPTIONS``, ``COMPARABLE_PARTS``, ``ITEM``,
    ``ITEM_NOUN``, ``FIGURE`` and ``METRICS``; sets ``self.tasks`` in its constructor (after
    ``super().__init__(config)``, which sets ``self.config`` and ``self.warnings``); and
    implements ``fingerprint_parts``, ``generation_calls``, ``judge_calls``, ``score``,
    ``evidence``, ``results``, ``breakdown`` and ``figure``. Everything else has a default here:
    ``STATUSES`` (every :class:`Status`), ``PROMPTS`` and ``prompts()``, ``check_documents``,
    ``describe`` (``STAGE_NOTES``), ``calls_model``, ``summary_rows``, ``generation_done``,
    ``judge_done``, ``metrics``, ``report_tables``, ``compare_tables``, ``compare_figure``.
    """

    NAME: ClassVar[str]
    METRICS: ClassVar[tuple[Metric, ...]]   # the declared metrics, headline ones flagged
    STATUSES: ClassVar[tuple[str, ...]] = tuple(s.value for s in Status)
    # What one cluster is, for labels; the clusters themselves are ItemResults.clusters.
    # None: every item is its own cluster, named by ITEM_NOUN.
    CLUSTER_NOUN: ClassVar[str | None] = None
    # Key paths inside its own fingerprint parts that the shared part holds ("scoring.model"):
    # left out of the fingerprint, read past in older records (evalnb.records.fingerprint.readings).
    MOVED_TO_SHARED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.warnings: list[str] = []

    # --- options ---------------------------------------------------------------------------------

    def positive_int(self, key: str) -> int:
        """The option ``key``, checked to be an integer >= 1; else the one-line ConfigError
        naming the parameters file and the key."""
        value = self.config.options[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise self.config.error(key, f"expected a positive integer, got {value!r}")
        return value

    def check_bootstrap(self) -> None:
        """Check ``n_boot`` (a positive integer) and ``seed`` (an integer), the options
        ``BOOTSTRAP_OPTIONS`` adds."""
        self.positive_int("n_boot")
        seed = self.config.options["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise self.config.error("seed", f"expected an integer, got {seed!r}")

    # --- interface defaults -------------------------------------------------------------------------

    def check_documents(self) -> None:
        return None

    STAGE_NOTES: ClassVar[Mapping[str, str]] = {}   # stage -> what it does for this benchmark
    PROMPTS: ClassVar[Mapping[str, str]] = {}       # name -> a prompt template's text (fingerprinted)

    def prompts(self) -> Mapping[str, str]:
        """The texts of the prompts this run sends (name -> template), which the shared layer
        hashes into the fingerprint's ``shared`` part: by default ``PROMPTS``."""
        return self.PROMPTS

    def describe(self, stage: str) -> str:
        return self.STAGE_NOTES.get(stage, GENERIC_STAGE_NOTES[stage])

    @property
    def calls_model(self) -> bool:
        return True

    def summary_rows(self) -> list[tuple[str, str]]:
        return []

    def generation_done(self, record: Record) -> bool:
        return bool(record["status"] != Status.FAILED_TRANSIENT)

    def judge_done(self, record: Record) -> bool:
        return bool(record["status"] == JudgeStatus.OK)

    def with_metrics(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with its declared metrics (values and intervals) under ``metrics``.

        ``body`` is the scores.json body so far: it must hold ``complete`` and whatever
        ``results`` reads (the per-item ``tasks`` rows). Each metric is computed from
        ``results(body)`` with the run's ``n_boot`` and ``seed``; one that is not ``partial``
        is null while ``complete`` is false."""
        bench: Any = type(self)   # the subclass gives results()
        n_boot, seed = self.config.options["n_boot"], self.config.options["seed"]
        results = bench.results(body)   # built once: both summaries read the same items
        body["metrics"] = metric_summary(bench, body, n_boot, seed, results=results)
        body["uncertainty"] = uncertainty_summary(bench, body, n_boot, seed, results=results)
        return body

    @classmethod
    def metrics(cls) -> tuple[Metric, ...]:
        return cls.METRICS

    @classmethod
    def metrics_for(cls, results: ItemResults) -> tuple[Metric, ...]:
        """The metrics of a run whose items are ``results``: by default the fixed ``metrics()``.
        A benchmark whose metrics follow its data (one per category, language or K found in
        the items) overrides this; every metric it returns gets the value, interval, strata
        and clusters a fixed one gets, in ``scores.json`` and in ``compare``'s leaderboard."""
        return cls.metrics()

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        return []

    @classmethod
    def compare_tables(cls, runs: Sequence[RunScores], top: int) -> list[tuple[str, pd.DataFrame]]:
        return []

    @classmethod
    def compare_figure(cls, runs: Sequence[RunScores]) -> ReportFigure | None:
        return None


def declared_metrics(bench: Any, results: ItemResults) -> tuple[Metric, ...]:
    """The metrics ``bench`` declares for these items: ``metrics_for(results)`` where it has
    one (a class that does not derive from BaseBenchmark may not), else ``metrics()``."""
    data = getattr(bench, "metrics_for", None)
    return tuple(data(results)) if data is not None else tuple(bench.metrics())


def ready_metrics(bench: Any, body: Mapping[str, Any], results: ItemResults | None = None) -> list[Metric]:
    """The declared metrics that have a value yet: all of them once the run is complete, the
    ``partial`` ones before."""
    declared = declared_metrics(bench, results) if results is not None else bench.metrics()
    return [m for m in declared if body["complete"] or m.partial]


def metric_summary(bench: Any, body: Mapping[str, Any], n_boot: int, seed: int,
                   results: ItemResults | None = None) -> dict[str, Any]:
    """Every declared metric's value and seeded bootstrap interval, for scores.json.

    A metric that is not ``partial`` is null while the run is incomplete. ``n`` is how many
    items its value rests on (:func:`evalnb.stats.metric_n.items_read`; the interval's own
    ``n`` is the items it resamples). ``results``: ``bench.results(body)`` when the caller
    has it already.
    """
    from evalnb.stats.metric_n import items_read

    results = bench.results(body) if results is None else results
    strata = [results.strata.get(i, "") for i in results.ids]
    intervals = stats.metric_intervals(results.values, ready_metrics(bench, body, results), strata=strata,
                                       n_boot=n_boot, seed=seed, channels=results.channels,
                                       resample_repeats=getattr(bench, "RESAMPLE_REPEATS", True))
    return {m.name: {"label": m.label, "headline": m.headline,
                     "value": intervals[m.name].mean if m.name in intervals else None,
                     "n": items_read(results.values, m, strata, results.channels) if m.name in intervals else None,
                     "ci": intervals[m.name].as_dict() if m.name in intervals and m.interval else None}
            for m in declared_metrics(bench, results)}


def uncertainty_summary(bench: Any, body: Mapping[str, Any], n_boot: int, seed: int,
                        results: ItemResults | None = None) -> dict[str, Any]:
    """Beside the declared metrics (never replacing them): each mean metric's standard error, n,
    clustered standard error, number of clusters and design effect, and, when items share
    clusters, its cluster-bootstrap interval (:mod:`evalnb.stats.clustered`). ``results``:
    ``bench.results(body)`` when the caller has it already."""
    results = bench.results(body) if results is None else results
    return clustered.metric_uncertainty(results.values, ready_metrics(bench, body, results),
                                        strata=[results.strata.get(i, "") for i in results.ids],
                                        clusters=cluster_labels(results), cluster_noun=cluster_noun(bench),
                                        n_boot=n_boot, seed=seed, channels=results.channels)


def cluster_labels(results: ItemResults) -> list[str] | None:
    """Each item's cluster (None when the benchmark declares none: every item its own)."""
    return [results.clusters.get(i, f"item {i}") for i in results.ids] if results.clusters else None


def cluster_noun(bench: Any) -> str:
    """What one cluster is: the benchmark's ``CLUSTER_NOUN``, else its item noun."""
    return str(getattr(bench, "CLUSTER_NOUN", None) or getattr(bench, "ITEM_NOUN", "item"))


def judge_table(results: ItemResults) -> pd.DataFrame:
    """Per judge (or rater run): how many verdicts, their mean and s.d."""
    import pandas as pd

    rows = [(judge, score) for item in results.ids for judge, score in results.judges.get(item, {}).items()]
    table = pd.DataFrame(rows, columns=["judge", "score"])
    if not len(table):
        return pd.DataFrame(columns=["count", "mean", "std"])
    return table.groupby("judge")["score"].agg(["count", "mean", "std"])


def metric_value(scores: Mapping[str, Any], name: str) -> float | None:
    """The value of the declared metric ``name`` in a scores.json (None while it is null)."""
    entry = (scores.get("metrics") or {}).get(name) or {}
    value = entry.get("value")
    return float(value) if value is not None else None


def metric_ci(scores: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The interval of the declared metric ``name`` in a scores.json: ``low``, ``high``,
    ``n``, ``n_boot``, ``seed``, ``confidence``, ``method`` ...; None when it has none."""
    entry = (scores.get("metrics") or {}).get(name) or {}
    ci = entry.get("ci")
    return dict(ci) if ci else None


def score_or_nan(value: Any) -> float:
    """``value`` as a float, NaN for None: a scores.json row's score as a cell of ``values``."""
    return float(value) if value is not None else NAN


def contestant_label(bench: Any, provider: str, name: str, options: Mapping[str, Any]) -> str:
    """What a run's contestant is called in every view. A model called through an endpoint:
    ``provider:name``. Answers read from a file (``provider: none``): the model's ``name`` when the
    parameters give one, else the file's name (the first of the benchmark's path options that is
    set: its predictions, traces or responses file), never ``none:none``."""
    if provider != "none":
        return f"{provider}:{name}"
    if name and name != "none":
        return name
    for option in getattr(bench, "PATH_OPTIONS", ()):
        if options.get(option):
            return Path(str(options[option])).name
    return "answers from a file"
