"""Opening a run: its parameters resolved and checked, its benchmark built (which loads and
checks every input once), the fingerprint checked or recorded, ``config.json`` and the prompt
templates written; and :class:`Run`, what every stage and view is handed.

Nothing is written before every check has passed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalnb import config as cfg
from evalnb.benchmarks import BENCHMARKS, Benchmark, Task, benchmark_for
from evalnb.benchmarks.base import contestant_label
from evalnb.core.run_config import RunConfig
from evalnb.records import lock
from evalnb.core import subset
from evalnb.core.errors import ConfigError
from evalnb.records.lock import RunLock
from evalnb.pipeline.preflight import check_paths
from evalnb.core.redaction import register_secret_values
from evalnb.records.fingerprint import check_or_record, moved_to_shared, run_fingerprint
from evalnb.records.prompts import read_prompts, write_prompts
from evalnb.providers import REGISTRY, prefetch
from evalnb.records.stores import JsonlStore, json_unchanged, read_json_if_exists, write_json

if TYPE_CHECKING:   # pandas is imported by the functions that return tables, when called
    import pandas as pd

OFFLINE_LABEL = ("OFFLINE APPROXIMATION: offline baselines stand in for models or judges in "
                 "this run; its numbers are not comparable with the paper's.")


@dataclass
class Run:
    config: RunConfig
    benchmark: Benchmark
    tasks: Sequence[Task]
    fingerprint: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    lock: RunLock | None = None
    stores: dict[str, JsonlStore] = field(default_factory=dict, repr=False, compare=False)

    def store(self, stage: str) -> JsonlStore:
        """The stage's store, one object per run: it parses its file once and keeps up with its
        own appends, so a stage pass reads each store once (:class:`JsonlStore`)."""
        if stage not in self.stores:
            self.stores[stage] = JsonlStore(self.path(f"{stage}.jsonl"))
        return self.stores[stage]

    def close(self) -> None:
        """Let another process run this directory, if this one holds it for good (``evalnb
        run``; a stage holds it only while it runs). The lock is also freed at exit."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @property
    def dir(self) -> Path:
        return self.config.output_dir

    def path(self, name: str) -> Path:
        return self.config.output_dir / name

    def summary(self) -> pd.DataFrame:
        import pandas as pd

        from evalnb.views.tables import readable

        c = self.config
        rows = [("benchmark", c.benchmark), ("run directory", str(self.dir)),
                ("tasks", len(self.tasks)),
                ("model", contestant_label(self.benchmark, c.model.provider, c.model.name, c.options)),
                ("judges", ", ".join(f"{j.provider}:{j.name}" for j in c.judges) or "-"),
                ("fingerprint", self.fingerprint["sha256"][:16]), *self.benchmark.summary_rows()]
        if c.offline:
            rows.append(("label", OFFLINE_LABEL))
        rows += [("warning", w) for w in self.warnings]
        return readable(pd.DataFrame(rows, columns=["", "value"]).set_index(""))


def load_config(source: str | Path | Mapping[str, Any], sets: Sequence[str] = ()
                ) -> tuple[RunConfig, type[Benchmark]]:
    """Parameters from a file path or a dictionary, with ``--set`` overrides applied; and the
    benchmark's class (``bench(config)`` checks its own parameters and loads its inputs)."""
    if isinstance(source, Mapping):
        params, origin = dict(source), "parameters"
    else:
        path = Path(source).expanduser().resolve()
        params, origin = cfg.read_params_file(path), str(path)
    # The benchmark as --set leaves it, resolved once: its path options are file-relative too.
    name = cfg.apply_sets(params, sets).get("benchmark")
    if name is None:
        raise ConfigError(f"{origin}: benchmark: required, one of {', '.join(sorted(BENCHMARKS))}, "
                          "an import path package.module:Class or an installed entry point's name")
    bench = benchmark_for(name, origin)
    if not isinstance(source, Mapping):
        params = cfg.absolutise(params, (*cfg.PATH_KEYS, *bench.PATH_OPTIONS), path.parent)
        params = cfg.absolutise_commands(params, path.parent)
    params = cfg.apply_sets(params, sets)
    return cfg.resolve(params, bench.OPTIONS, base=Path.cwd(), source=origin), bench


def make_benchmark(config: RunConfig, bench: type[Benchmark]) -> Benchmark:
    """The run's benchmark, built once: it checks its own parameters and loads its inputs.
    It is told what a run being resumed recorded (e.g. the date a rating header keeps)."""
    recorded = read_json_if_exists(config.output_dir / "fingerprint.json")
    return narrowed(bench(config, recorded["parts"] if recorded else None), config)


def narrowed(benchmark: Benchmark, config: RunConfig) -> Benchmark:
    """``benchmark`` over the run's subset of the data (``evalnb run --limit/--items``), if
    it has one: every process that opens the run (a stage, ``verify``) must see the same items."""
    if config.subset:
        tasks = benchmark.tasks
        try:
            benchmark.tasks = subset.select(tasks, config.subset, [t.task_id for t in tasks], config.source)  # type: ignore[misc]
        except AttributeError:
            raise config.error("subset", f"benchmark {config.benchmark} does not let its tasks be narrowed") from None
    return benchmark


def open_run(source: str | Path | Mapping[str, Any], sets: Sequence[str] = (), *,
             require_keys: bool = False, prefetch_sdks: bool = True, hold_lock: bool = False,
             keep_config: bool = False) -> Run:
    """Check parameters and data, then create or resume the run directory.

    Everything is validated before anything is written (with ``require_keys``, that every
    named key variable is set too); resuming into a run started under a different
    fingerprint is refused. Meanwhile the endpoints' SDKs are imported in the
    background (``prefetch_sdks=False`` in a process that makes no call: ``evalnb run``,
    whose kernel makes them).

    The run directory is held only while ``fingerprint.json`` and ``config.json`` are written,
    and only when they change (a new run, or other settings), so a notebook that only reads
    (the report, while another tab judges) is never refused. ``hold_lock``: hold it until
    :meth:`Run.close` (``evalnb run``, for the whole command). ``keep_config``: leave an
    existing ``config.json`` as it is (``evalnb run`` writes it once it knows a stage will run:
    evalnb.pipeline.rerun).
    """
    config, bench = load_config(source, sets)
    if prefetch_sdks:
        prefetch((config.model, *config.judges))
    check_paths(config, "parameters" if isinstance(source, Mapping) else str(source))
    benchmark = make_benchmark(config, bench)
    if require_keys:
        check_keys(config, model=benchmark.calls_model)
    warnings = benchmark.warnings
    if not lock.is_stage_kernel(config.output_dir):
        benchmark.check_documents()   # a stage kernel's evalnb checked them moments ago
    run = Run(config, benchmark, benchmark.tasks, run_fingerprint(config, benchmark), warnings)
    register_secret_values(e.api_key_env for e in (config.model, *config.judges))
    if hold_lock:
        run.lock = lock.acquire(run.dir, "evalnb run")   # refused if another process runs here
    starting = not run.path("fingerprint.json").exists()
    _record_run(run, keep_config)
    if starting:   # once per run, as it starts; the run's summary table shows them every time
        for warning in warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
    return run


def scores(run: Run) -> dict[str, Any]:
    data = read_json_if_exists(run.path("scores.json"))
    if data is None:
        raise FileNotFoundError(f"{run.path('scores.json')}: run the aggregate stage first")
    return data


def _record_run(run: Run, keep_config: bool = False) -> None:
    """fingerprint.json (or the refusal of a different one), config.json and the prompt
    templates as text (``prompts/``), written under the lock when any changes."""
    recorded = read_json_if_exists(run.path("fingerprint.json"))
    texts: dict[str, str] = getattr(run.benchmark, "record_prompts", dict)()   # optional in the interface
    moved = moved_to_shared(run.benchmark)
    if recorded is not None:
        # refuses, never writes; an older record that says the same goes on as it was written
        run.fingerprint = check_or_record(run.path("fingerprint.json"), run.fingerprint, moved)
        kept = keep_config and run.path("config.json").exists()
        if (kept or json_unchanged(run.path("config.json"), run.config.to_dict())) and read_prompts(run.dir) == texts:
            return
    with lock.holding(run.dir, "evalnb.open_run"):
        run.fingerprint = check_or_record(run.path("fingerprint.json"), run.fingerprint, moved)
        if not (keep_config and run.path("config.json").exists()):
            write_json(run.path("config.json"), run.config.to_dict())
        write_prompts(run.dir, texts)


def check_keys(config: RunConfig, model: bool = True) -> None:
    """Fail before anything runs when a named key variable is unset (values never shown).
    ``model=False``: the contestant is not called (its answers come from a file)."""
    from evalnb.providers.base import api_key
    for endpoint in ((config.model,) if model else ()) + config.judges:
        if REGISTRY[endpoint.provider].needs_key:
            try:
                api_key(endpoint.api_key_env, endpoint.role)
            except ConfigError as e:
                raise ConfigError(f"{config.source}: {e}") from None
