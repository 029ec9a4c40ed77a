"""A suite file: the parameters its contestants share, and the contestants.

```yaml
suite_name: my-leaderboard
benchmark: my_benchmark
data: ../data/tasks.json
judges: [ ... ]                 # every run parameter here is shared ...
parallel_runs: 4                # contestant runs in flight at once (default 1)
budget: {max_cost_usd: 2500}    # optional: a ceiling over all the runs together
contestants:                    # ... and each contestant's own parameters are merged over them
  - {run_name: gpt-5.5, model: {provider: openai, name: gpt-5.5}}
```

How a contestant's parameters are merged (decided here, where the issue is silent): a mapping
is merged key by key (``model: {name: x}`` over a shared ``model`` keeps its provider, base URL
and key variable; ``model: {caps: ...}`` adds caps), anything else (a list such as ``judges``,
a number, a string) replaces the shared value whole. Relative paths are relative to the suite
file, as in a parameters file. ``output_dir`` is the suite's: each contestant runs in
``SUITE_DIR/runs/<run_name>``. A contestant's own ``budget`` is a ceiling on that run alone,
besides the suite's.

Everything is checked before anything runs, every contestant as ``evalnb run`` checks a run
(parameters, keys, paths, data, documents), and also: run names unique; the contestants
comparable with one another (the benchmark's ``COMPARABLE_PARTS``, as ``evalnb compare``
requires), since a leaderboard of them could not be written otherwise; and each contestant
that has run before still has its run's fingerprint (a changed contestant is refused, as
``evalnb run`` refuses to resume into a different configuration). A failure is one line
naming the suite file, the contestant and the key.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb import config as cfg
from evalnb.benchmarks import Benchmark, benchmark_for
from evalnb.config import RunConfig
from evalnb.core.errors import ConfigError, EvalnbError, FingerprintMismatch
from evalnb.records.fingerprint import check_or_record, comparable_parts, differing, moved_to_shared, run_fingerprint
from evalnb.execution.budget import LEDGER_NAME
from evalnb.pipeline.run import check_keys, make_benchmark
from evalnb.pipeline.preflight import check_paths

SUITE_KEYS = ("suite_name", "output_dir", "parallel_runs", "budget", "contestants")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RUNS_DIR = "runs"
PARAMS_DIR = "params"


@dataclass(frozen=True)
class Contestant:
    name: str
    params: dict[str, Any]      # the merged run parameters, paths absolute: what its params file holds
    config: RunConfig
    benchmark: Benchmark
    fingerprint: dict[str, Any]   # computed once, when the suite is checked: resume and comparability use it

    @property
    def dir(self) -> Path:
        return self.config.output_dir


@dataclass(frozen=True)
class Suite:
    name: str
    file: Path
    dir: Path
    parallel_runs: int
    max_cost_usd: float | None
    contestants: tuple[Contestant, ...]

    @property
    def runs_dir(self) -> Path:
        return self.dir / RUNS_DIR

    @property
    def ledger(self) -> Path:
        return self.dir / LEDGER_NAME

    def params_file(self, contestant: Contestant) -> Path:
        return self.dir / PARAMS_DIR / f"{contestant.name}.json"

    def removed(self) -> list[str]:
        """Run directories of the suite that no contestant names any more (kept on disk)."""
        names = {c.name for c in self.contestants}
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir() and p.name not in names)


def is_suite_file(path: Path) -> bool:
    """A parameters file with ``contestants:`` is a suite."""
    try:
        return "contestants" in cfg.read_params_file(path.expanduser().resolve())
    except ConfigError:
        return False


def merge(shared: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``own`` over ``shared``: mappings key by key, anything else replaced whole."""
    out = copy.deepcopy(dict(shared))
    for key, value in own.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_suite(path: Path, sets: Sequence[str] = (), *, require_keys: bool = True) -> Suite:
    """Read and check a suite file (see the module docstring); nothing is written. Without
    ``require_keys`` (an estimate, which calls nothing) the key variables may be unset."""
    path = path.expanduser().resolve()
    raw = cfg.apply_sets(cfg.read_params_file(path), sets)
    source = str(path)
    _check_suite_keys(raw, source)
    name = raw.get("suite_name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(f"{source}: suite_name: required, letters, digits, '.', '_' or '-'")
    parallel = raw.get("parallel_runs", 1)
    if not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1:
        raise ConfigError(f"{source}: parallel_runs: expected a positive integer, got {parallel!r}")
    entries = raw.get("contestants")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{source}: contestants: expected a non-empty list of mappings, each with its run_name")
    budget = cfg.check_budget(raw.get("budget"), source)
    if budget is not None and set(budget) != {"max_cost_usd"}:
        raise ConfigError(f"{source}: budget: expected {{max_cost_usd: USD}} for the whole suite")
    suite_dir = Path(str(raw.get("output_dir") or Path("outputs") / name)).expanduser()
    suite_dir = suite_dir if suite_dir.is_absolute() else (
        (path.parent / suite_dir) if raw.get("output_dir") else (Path.cwd() / suite_dir)).resolve()
    shared = {k: v for k, v in raw.items() if k not in SUITE_KEYS}
    seen: dict[str, int] = {}
    prepared: list[tuple[str, str, dict[str, Any]]] = []
    for i, own in enumerate(entries):
        where = f"{source}: contestants[{i}]"
        if not isinstance(own, Mapping) or not isinstance(own.get("run_name"), str):
            raise ConfigError(f"{where}: run_name: required, a mapping of run parameters with its run_name")
        run_name = own["run_name"]
        where = f"{source}: contestant {run_name}"
        if run_name in seen:
            raise ConfigError(f"{where}: run_name: given twice (contestants[{seen[run_name]}] and [{i}]); "
                              "each contestant needs its own")
        seen[run_name] = i
        if "output_dir" in own:
            raise ConfigError(f"{where}: output_dir: a contestant runs in the suite's directory "
                              f"({suite_dir / RUNS_DIR / run_name}); set output_dir for the whole suite")
        params = merge(shared, own)
        params["output_dir"] = str(suite_dir / RUNS_DIR / run_name)
        if budget is not None:
            params["budget"] = dict(params.get("budget") or {}) | {"suite": {
                "name": name, "max_cost_usd": budget["max_cost_usd"], "ledger": str(suite_dir / LEDGER_NAME)}}
        prepared.append((run_name, where, params))
    contestants = tuple(_contestant(run_name, where, params, path.parent, require_keys)
                        for run_name, where, params in prepared)
    _check_comparable(contestants, source)
    return Suite(name, path, suite_dir, parallel, budget["max_cost_usd"] if budget else None, contestants)


def _check_suite_keys(raw: Mapping[str, Any], source: str) -> None:
    """The suite file's top-level keys are suite keys or run parameters its contestants share: a
    typo (``paralel_runs``) is named as the suite file's key, with the closest known one, before
    any contestant is read (where it would be that contestant's unknown parameter)."""
    entries = raw["contestants"] if isinstance(raw.get("contestants"), list) else []
    names = {n for n in [raw.get("benchmark"), *(c.get("benchmark") for c in entries if isinstance(c, Mapping))]
             if isinstance(n, str)}
    try:   # no benchmark named anywhere: its options unknown, the contestants' own check says so
        options = {key for n in names for key in benchmark_for(n).OPTIONS} if names else None
    except EvalnbError:   # an unknown benchmark: the contestant's own check names it
        options = None
    if options is None:
        return
    known = {*SUITE_KEYS, *cfg.COMMON_KEYS, *options}
    if unknown := sorted(set(raw) - known, key=str):
        raise ConfigError(f"{source}: unknown suite key(s) {cfg.unknown_keys(unknown, known)}: neither a suite "
                          f"key ({', '.join(SUITE_KEYS)}) nor a run parameter the contestants share")


def _contestant(run_name: str, where: str, params: dict[str, Any], base: Path, require_keys: bool) -> Contestant:
    """One contestant checked as ``evalnb run`` checks a run, without writing anything."""
    if "benchmark" not in params:
        raise ConfigError(f"{where}: benchmark: required")
    try:
        bench = benchmark_for(params["benchmark"])
        params = cfg.absolutise(params, (*cfg.PATH_KEYS, *bench.PATH_OPTIONS), base)
        params = cfg.absolutise_commands(params, base)
        config = cfg.resolve(params, bench.OPTIONS, base=base, source=where)
        if require_keys:
            check_keys(config)
        check_paths(config, where)
        benchmark = make_benchmark(config, bench)
        benchmark.check_documents()
        fingerprint = _check_fingerprint(where, config, benchmark)
    except EvalnbError as e:   # a data file's own error names its file and task: say whose it is
        raise (e if str(e).startswith(where) else ConfigError(f"{where}: {e}")) from None
    return Contestant(run_name, params, config, benchmark, fingerprint)


def _check_fingerprint(where: str, config: RunConfig, benchmark: Benchmark) -> dict[str, Any]:
    """A contestant that has run before must still be that run: the resume check ``evalnb run``
    makes, read only. Returns the contestant's fingerprint as computed (not the recorded one:
    comparability is judged on what each contestant is now)."""
    new = run_fingerprint(config, benchmark)
    try:
        check_or_record(config.output_dir / "fingerprint.json", new, moved_to_shared(benchmark), record=False)
    except FingerprintMismatch as e:
        details = "\n".join(f"  {line}" for line in e.changes)
        raise ConfigError(f"{where}: changed since its run started in {config.output_dir}:\n{details}\n"
                          "Its scores would not be comparable: give the changed contestant a new run_name") from None
    return new


def _check_comparable(contestants: Sequence[Contestant], source: str) -> None:
    """The leaderboard compares the runs under compare's rules: refuse what it would refuse."""
    first = contestants[0]
    benchmarks = {c.config.benchmark for c in contestants}
    if len(benchmarks) > 1:
        raise ConfigError(f"{source}: benchmark: the contestants run {', '.join(sorted(benchmarks))}; "
                          "a leaderboard compares runs of one benchmark")
    parts = comparable_parts(type(first.benchmark).COMPARABLE_PARTS)
    for other in contestants[1:]:
        differ = differing(first.fingerprint, other.fingerprint, parts)
        if differ:
            raise ConfigError(f"{source}: contestant {other.name}: {', '.join(differ)} differ from contestant "
                              f"{first.name}'s; runs that differ there cannot share a leaderboard")
