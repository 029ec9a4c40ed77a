"""The benchmark interface and registry.

A benchmark is one module that provides the functions of :class:`Benchmark`; the
pipeline (stores, runner, notebooks, CLI) is shared. Adding a benchmark means adding a
module here and one line to ``BENCHMARKS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any, Protocol

from evalnb.config import RunConfig
from evalnb.errors import ConfigError
from evalnb.runner import Call, Record


class Task(Protocol):
    @property
    def task_id(self) -> str: ...


class Benchmark(Protocol):
    NAME: str
    OPTIONS: Mapping[str, Any]        # benchmark-specific parameter keys and their defaults
    PATH_OPTIONS: tuple[str, ...]     # which of OPTIONS are paths
    COMPARABLE_PARTS: tuple[str, ...]  # fingerprint parts that must agree for runs to be compared

    def check_config(self, config: RunConfig) -> list[str]:
        """Raise ConfigError on a bad configuration; return warnings to show."""

    def load_tasks(self, config: RunConfig) -> Sequence[Task]:
        """Every task, validated (DataError naming file, line or task, and field)."""

    def fingerprint_parts(self, config: RunConfig, tasks: Sequence[Task]) -> dict[str, Any]:
        """What makes this run's scores comparable with another's."""

    def generation_calls(self, config: RunConfig, tasks: Sequence[Task]) -> list[Call]: ...

    def generation_done(self, record: Record) -> bool: ...

    def judge_calls(self, config: RunConfig, tasks: Sequence[Task],
                    responses: Mapping[str, Record]) -> list[Call]: ...

    def judge_done(self, record: Record) -> bool: ...

    def score(self, config: RunConfig, tasks: Sequence[Task], responses: Mapping[str, Record],
              judgements: Mapping[str, Record]) -> dict[str, Any]:
        """The scores.json body: headline numbers, ``complete``, and per-task ``tasks`` rows."""

    def items(self, scores: Mapping[str, Any]) -> dict[str, tuple[float | None, bool]]:
        """From a scores.json: item -> (score, attempted), the units paired across runs."""

    def verdicts(self, scores: Mapping[str, Any]) -> list[tuple[str, str, float]]:
        """From a scores.json: (item, judge, score) for judge-agreement statistics."""


BENCHMARKS = {"wildtrace": "evalnb.benchmarks.wildtrace", "geoktools": "evalnb.benchmarks.geoktools",
              "geoexpertqueries": "evalnb.benchmarks.geoexpertqueries"}


def benchmark_for(name: Any) -> Benchmark:
    if name not in BENCHMARKS:
        raise ConfigError(f"benchmark: {name!r} is not one of {', '.join(sorted(BENCHMARKS))}")
    module: Any = import_module(BENCHMARKS[name])
    return module  # a module providing the Benchmark functions
