"""The benchmark interface and registry.

A benchmark is a class. An instance is built once per run from the run's validated
configuration: its constructor checks the benchmark's own parameters and loads every
input once (tasks, predictions, traces, prompt and scale files), then makes the run's
calls and scores them. The class itself declares what its results are, for readers that
have only a ``scores.json`` (the report, compare, agreement): its statuses, its metrics
(functions over a repeats x items matrix, each with a label and a headline flag), how to
read its items from a ``scores.json``, its breakdown table, figure and extra tables, and
(per instance) each item's evidence. The shared layers loop over these declarations and
never name a benchmark.

Adding a benchmark means adding a module here, one line to ``BENCHMARKS`` and one line to
the conformance block at the end (which mypy checks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from evalnb.core.run_config import RunConfig
from evalnb.core.errors import ConfigError
from evalnb.core.types import Call, ItemEvidence, ItemResults, Metric, Record, RunScores

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.core.figures import ReportFigure


class Task(Protocol):
    @property
    def task_id(self) -> str: ...


class Benchmark(Protocol):
    # --- what it is (class level) -------------------------------------------------------------
    NAME: ClassVar[str]
    OPTIONS: ClassVar[Mapping[str, Any]]         # benchmark-specific parameter keys and defaults
    PATH_OPTIONS: ClassVar[tuple[str, ...]]      # which of OPTIONS are paths
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]]  # fingerprint parts that must agree to compare runs
    STATUSES: ClassVar[tuple[str, ...]]          # every response status, in display order
    ITEM: ClassVar[type]                         # the item type (one task, case or query)
    ITEM_NOUN: ClassVar[str]                     # "task", "case", "query": for labels
    FIGURE: ClassVar[str]                        # the file name of its own figure

    # --- one run (instance) --------------------------------------------------------------------
    @property
    def config(self) -> RunConfig: ...

    @property
    def tasks(self) -> Sequence[Task]:
        """Every item, validated (DataError naming file, line or task, and field)."""

    @property
    def warnings(self) -> list[str]:
        """What the configuration check wants shown."""

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        """Check the configuration and load every input once. ``recorded``: the fingerprint
        parts an earlier open of this run directory recorded (None for a new run)."""

    def check_documents(self) -> None:
        """Expensive input checks an ``evalnb run`` makes once, before its stage kernels."""

    @property
    def calls_model(self) -> bool:
        """False when the contestant's answers come from a file: its endpoint is never called
        (and its key never needed)."""

    def summary_rows(self) -> list[tuple[str, str]]:
        """Rows the run's summary table shows besides the common ones (e.g. an answers file's hash)."""

    def fingerprint_parts(self) -> dict[str, Any]:
        """What makes this run's scores comparable with another's."""

    def describe(self, stage: str) -> str:
        """What ``stage`` does for this benchmark and this run, in a sentence or two (Markdown):
        the prose each stage notebook shows under its title."""

    def generation_calls(self) -> list[Call]: ...

    def generation_done(self, record: Record) -> bool: ...

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]: ...

    def judge_done(self, record: Record) -> bool: ...

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        """The scores.json body: ``complete``, ``metrics`` (see :func:`evalnb.benchmarks.base.metric_summary`), the
        benchmark's own headline keys, and per-item ``tasks`` rows."""

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        """What a reviewer needs to judge each item, field by field from the records."""

    # --- reading its results (class level: a scores.json is enough) ----------------------------
    @classmethod
    def metrics(cls) -> tuple[Metric, ...]: ...

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults: ...

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame: ...

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure: ...

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        """Further tables the report shows under their titles (may be none)."""

    @classmethod
    def compare_tables(cls, runs: Sequence[RunScores], top: int) -> list[tuple[str, pd.DataFrame]]:
        """The benchmark's own analysis across runs (may be none)."""

    @classmethod
    def compare_figure(cls, runs: Sequence[RunScores]) -> ReportFigure | None: ...


BENCHMARKS = {"wildtrace": "evalnb.benchmarks.wildtrace:WildTrace",
              "geoktools": "evalnb.benchmarks.geoktools:GeoKTools",
              "geoexpertqueries": "evalnb.benchmarks.geoexpertqueries:GeoExpertQueries"}


def benchmark_for(name: Any) -> type[Benchmark]:
    """The benchmark class registered under ``name`` (its module imported on first use)."""
    if name not in BENCHMARKS:
        raise ConfigError(f"benchmark: {name!r} is not one of {', '.join(sorted(BENCHMARKS))}")
    module, _, cls = BENCHMARKS[name].partition(":")
    found: type[Benchmark] = getattr(import_module(module), cls)
    return found


if TYPE_CHECKING:   # mypy checks that every registered class conforms to Benchmark
    from evalnb.benchmarks.geoexpertqueries import GeoExpertQueries
    from evalnb.benchmarks.geoktools import GeoKTools
    from evalnb.benchmarks.wildtrace import WildTrace

    _WILDTRACE: type[Benchmark] = WildTrace
    _GEOKTOOLS: type[Benchmark] = GeoKTools
    _GEOEXPERTQUERIES: type[Benchmark] = GeoExpertQueries
