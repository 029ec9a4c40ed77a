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

A built-in benchmark is a folder here, one line in ``BENCHMARKS`` and one line in the
conformance block at the end (which mypy checks). A benchmark of your own needs no fork:
``benchmark: my_package.my_bench:MyBenchmark`` (an import path) or the name of an entry point
in the group ``evalnb.benchmarks`` selects it (:func:`benchmark_for`; docs/architecture.md
walks through ``examples/exact_qa``).

May import everything up to :mod:`evalnb.execution`; :mod:`evalnb.evidence` and every layer
above may import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib import import_module
from types import FunctionType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from evalnb.core.run_config import RunConfig
from evalnb.core.errors import ConfigError
from evalnb.core.types import Call, ItemEvidence, ItemResults, Metric, Record, RunScores

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.views.figures import ReportFigure


class Task(Protocol):
    """One item of a benchmark (a question, a case, a query): anything with a string ``task_id``,
    unique in the run. A frozen dataclass is the usual shape; its fields (as JSON) are hashed into
    the fingerprint's shared part, so a changed item refuses a resume."""

    @property
    def task_id(self) -> str: ...


class Benchmark(Protocol):
    """What a benchmark class declares; the shared layers loop over it and never name a benchmark.

    Class attributes: ``NAME`` (its name); ``OPTIONS`` (its own parameter keys and their
    defaults: they are read from the parameters file beside the shared keys, and an unknown key
    is refused); ``PATH_OPTIONS`` (those of ``OPTIONS`` that are paths, made relative to the
    parameters file); ``COMPARABLE_PARTS`` (its fingerprint parts that must agree for ``compare``;
    the shared part is always checked too, and its keys may be named: ``"tasks"``); ``STATUSES``
    (every response status it records, in display order); ``ITEM`` (the item type);
    ``ITEM_NOUN`` (``"question"``: for labels);
    ``FIGURE`` (its figure's file name, without suffix). Annotate them ``ClassVar`` so that mypy
    reads them as class attributes.

    Optional, read when present: ``prompts()`` (name -> prompt text, hashed into the
    fingerprint; ``BaseBenchmark`` returns ``PROMPTS``); ``MOVED_TO_SHARED`` (key paths inside
    its own parts that the shared part holds, ``"scoring.model"``: left out of its fingerprint,
    read past in its older records). A class that lacks any member named
    here is refused when the parameters select it, with the missing names.

    The fingerprint: the shared layer puts the retry policy, the judge panel (each judge's
    role, provider, model and reply-changing settings), the prompts' texts and the task set's
    hash into every run's fingerprint under ``shared``, whatever ``fingerprint_parts`` returns;
    ``fingerprint_parts`` adds only the benchmark's own parts (its contestant, caps, scoring
    rule): a part it names ``retry``, ``judge_panel``, ``prompts`` or ``tasks`` is left out, so
    each is fingerprinted once and a refusal names it once.
    """

    # --- what it is (class level) -------------------------------------------------------------
    NAME: ClassVar[str]
    OPTIONS: ClassVar[Mapping[str, Any]]         # benchmark-specific parameter keys and defaults
    PATH_OPTIONS: ClassVar[tuple[str, ...]]      # which of OPTIONS are paths
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]]  # fingerprint parts that must agree to compare runs
    STATUSES: ClassVar[tuple[str, ...]]          # every response status, in display order
    ITEM: ClassVar[type]                         # the item type (one task, case or query)
    ITEM_NOUN: ClassVar[str]                     # "task", "case", "query": for labels
    # (optional) ITEM_NOUN_PLURAL: "queries"; without it the views add the regular English plural.
    # (optional) record_prompts(self) -> {name: template text}: the prompts as sent, placeholders
    # unfilled, written to the run's prompts/ folder and shown in the report and the paper render.
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

    def generation_calls(self) -> list[Call]:
        """The first stage's calls: one per item (and repeat), each for the endpoint ``"model"``,
        keyed by a string unique in the stage (usually the item's ``task_id``)."""

    def generation_done(self, record: Record) -> bool:
        """Whether a stored generate record is final; the others are made again on a resume
        (``BaseBenchmark``: every status but ``failed_transient``)."""

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        """The second stage's calls, given the generate records by key (may be none). A judge
        call's endpoint is a judge's role, ``judge1``, ``judge2`` ... in the order of the
        parameters' ``judges`` (``config.judge_roles()``); its key is unique in the stage
        (``f"{task_id}::{role}"``)."""

    def judge_done(self, record: Record) -> bool:
        """Whether a stored judge record is final (``BaseBenchmark``: status ``ok`` only, so a
        reply without a verdict is asked again on a resume)."""

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        """The scores.json body: ``complete``, ``metrics`` (see :func:`evalnb.benchmarks.base.metric_summary`), the
        benchmark's own headline keys, and per-item ``tasks`` rows."""

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        """What a reviewer needs to judge each item, field by field from the records."""

    # --- reading its results (class level: a scores.json is enough) ----------------------------
    @classmethod
    def metrics(cls) -> tuple[Metric, ...]:
        """Its declared metrics, headline ones flagged (``BaseBenchmark``: ``METRICS``)."""

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        """Its items read back from a ``scores.json`` alone (for compare, agreement and the
        metrics): the scores matrix, statuses, and any named per-item channels."""

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """The report's breakdown table (a pandas DataFrame)."""

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """The report's figure (:func:`evalnb.api.new_figure`), saved as ``figures/<FIGURE>``."""

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        """Further tables the report shows under their titles (may be none)."""

    @classmethod
    def compare_tables(cls, runs: Sequence[RunScores], top: int) -> list[tuple[str, pd.DataFrame]]:
        """The benchmark's own analysis across runs (may be none)."""

    @classmethod
    def compare_figure(cls, runs: Sequence[RunScores]) -> ReportFigure | None:
        """The benchmark's own figure across runs, or None."""


BENCHMARKS = {"wildtrace": "evalnb.benchmarks.wildtrace:WildTrace",
              "geoktools": "evalnb.benchmarks.geoktools:GeoKTools",
              "geoexpertqueries": "evalnb.benchmarks.geoexpertqueries:GeoExpertQueries"}


ENTRY_POINT_GROUP = "evalnb.benchmarks"
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# What a class must have to stand behind the interface, read from the Protocol itself: its
# class attributes (NAME, OPTIONS, ...) and its methods. Its properties (config, tasks,
# warnings) belong to an instance and are set by the constructor, so a class cannot show them.
CLASS_ATTRIBUTES = tuple(Benchmark.__annotations__)
METHODS = tuple(n for n, v in vars(Benchmark).items()
                if not n.startswith("_") and isinstance(v, (FunctionType, classmethod, staticmethod)))


def benchmark_for(name: Any, where: str | None = None) -> type[Benchmark]:
    """The benchmark class ``name`` selects, its module imported on first use:

    - a built-in name (``BENCHMARKS``);
    - an import path ``package.module:Class``, importable wherever the run runs (the stage
      kernels inherit the environment of ``evalnb``, ``PYTHONPATH`` included);
    - the name of an entry point in the group ``evalnb.benchmarks`` that an installed
      distribution declares (``exact_qa = "exact_qa_bench:ExactQA"`` in its pyproject.toml).

    A built-in name wins over an entry point of the same name, and the distribution's entry
    point is never loaded: a plug-in cannot replace a protocol the package pins with tests.
    Two distributions declaring one name for different classes are refused rather than one
    picked by the order of ``sys.path``. What the user wrote is what outputs record
    (``config.json``, ``scores.json``), so a resume and ``compare`` select the class again.
    A class from outside is checked to have every member of the interface (the missing ones
    named); mypy checks the built-ins. ``where`` (a parameters file, "compare") starts every
    error's line.
    """
    try:
        return _resolve(name)
    except ConfigError as e:
        if where is None:
            raise
        raise ConfigError(f"{where}: {e}") from None


def _resolve(name: Any) -> type[Benchmark]:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"benchmark: expected a name or an import path module:Class, got {name!r}")
    if name in BENCHMARKS:
        return _load(BENCHMARKS[name], f"benchmark: {name!r}")
    if ":" in name:
        return conforming(_load(name, f"benchmark: {name!r}"), f"benchmark: {name!r}")
    target = _entry_point(name)
    origin = f"benchmark: {name!r} (entry point {ENTRY_POINT_GROUP} -> {target})"
    return conforming(_load(target, origin), origin)


def installed_entry_points() -> list[str]:
    """The names installed distributions declare in the ``evalnb.benchmarks`` group."""
    from importlib.metadata import entry_points   # ~25 ms, and scans sys.path: only when asked

    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def _entry_point(name: str) -> str:
    from importlib.metadata import entry_points

    found = {f"{ep.module}:{ep.attr}" if ep.attr else ep.module
             for ep in entry_points(group=ENTRY_POINT_GROUP, name=name)}
    if not found:
        names = installed_entry_points()
        usable = [n for n in names if n not in BENCHMARKS]   # the others are shadowed by a built-in
        listed = ", ".join(usable) or ("none besides built-in names" if names else "none installed")
        raise ConfigError(
            f"benchmark: {name!r} is not one of {', '.join(sorted(BENCHMARKS))} (built-in) nor an entry point "
            f"of {ENTRY_POINT_GROUP} ({listed}); a benchmark of your own: an import path package.module:Class")
    if len(found) > 1:
        raise ConfigError(f"benchmark: {name!r}: installed distributions declare it as different classes "
                          f"({', '.join(sorted(found))}); select one by its import path")
    return found.pop()


def _load(target: str, origin: str) -> Any:
    module, _, attr = target.partition(":")
    if not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(attr):
        raise ConfigError(f"{origin}: expected an import path package.module:Class")
    try:
        found: Any = import_module(module)
    except Exception as e:   # ImportError, or whatever the module raised while it ran
        message = str(e) if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"
        raise ConfigError(f"{origin}: cannot import module {module!r}: {message}") from None
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"{origin}: module {module!r} has no {attr!r}")
        found = getattr(found, part)
    return found


def conforming(found: Any, origin: str) -> type[Benchmark]:
    """``found`` if it is a class with every member of :class:`Benchmark`, else a ConfigError
    naming what it lacks."""
    if not isinstance(found, type):
        raise ConfigError(f"{origin}: expected a class, got {type(found).__name__}")
    missing = [n for n in CLASS_ATTRIBUTES if not hasattr(found, n)]
    missing += [f"{n}()" for n in METHODS if not callable(getattr(found, n, None))]
    if missing:
        raise ConfigError(f"{origin}: {found.__qualname__} is not a benchmark: it lacks {', '.join(missing)} "
                          "(see evalnb.benchmarks.Benchmark; evalnb.benchmarks.base.BaseBenchmark has defaults)")
    bench: type[Benchmark] = found
    return bench


if TYPE_CHECKING:   # mypy checks that every registered class conforms to Benchmark
    from evalnb.benchmarks.geoexpertqueries import GeoExpertQueries
    from evalnb.benchmarks.geoktools import GeoKTools
    from evalnb.benchmarks.wildtrace import WildTrace

    _WILDTRACE: type[Benchmark] = WildTrace
    _GEOKTOOLS: type[Benchmark] = GeoKTools
    _GEOEXPERTQUERIES: type[Benchmark] = GeoExpertQueries
