"""The stages every benchmark shares: open a run, generate, judge, aggregate.

Each stage notebook calls one of these functions per cell. A stage reads what earlier
stages stored in the run directory and appends its own records, so any stage can be
re-run, and a re-run resumes. A stage holds the run directory (:mod:`evalnb.core.lock`) while it
makes calls and writes, and says in one line what it did (:mod:`evalnb.stages.stage_outcome`).
"""

from __future__ import annotations

import functools
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from evalnb import config as cfg
from evalnb.stages.accounting import endpoint_names, usage_by_stage
from evalnb.benchmarks import BENCHMARKS, Benchmark, Task, benchmark_for
from evalnb.benchmarks.base import contestant_label
from evalnb.core.run_config import EndpointConfig, RunConfig
from evalnb.core import lock, subset
from evalnb.core.errors import ConfigError, EndpointFailure
from evalnb.core.lock import RunLock
from evalnb.stages.preflight import check_paths
from evalnb.core.redaction import register_secret_values
from evalnb.core.fingerprint import check_or_record, moved_to_shared, run_fingerprint
from evalnb.core.prompts import read_prompts, write_prompts
from evalnb.core.manifest import stage_entry, store_digest, update_manifest, utc_now
from evalnb.providers import REGISTRY, prefetch
from evalnb.core.records import JsonlStore, json_unchanged, read_json_if_exists, read_lines, write_json
from evalnb.core.types import CALL_STAGES, Call, Record
from evalnb.core.validation import checked_calls
from evalnb.execution import run_stage_calls
from evalnb.execution.batch.journal import in_flight
from evalnb.execution.batch.views import stage_manifest
from evalnb.execution.runner import run_blocking
from evalnb.core.progress import say
from evalnb.stages.stage_outcome import outcome_line
from evalnb.stages.headline import headline_table   # here too: the aggregate stage returns it
from evalnb.stages.run_evidence import write_evidence   # here too: recompute calls it
from evalnb.stages.failure_summary import failure_summary, no_answer_line, stop_line, stopped_in, summary_lines, summary_table
from evalnb.execution.budget import Budget
from evalnb.execution.budget_views import budget_summary
from evalnb.core.latency import latency_summary
from evalnb.core.reasoning import reasoning_summary
from evalnb.stages import judge_retest, judge_stats

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

        from evalnb.core.tables import readable

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
    benchmark = bench(config, recorded["parts"] if recorded else None)
    if config.subset:   # part of the data only (evalnb run --limit/--items)
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
    fingerprint is refused (reading 11). Meanwhile the endpoints' SDKs are imported in the
    background (``prefetch_sdks=False`` in a process that makes no call: ``evalnb run``,
    whose kernel makes them).

    The run directory is held only while ``fingerprint.json`` and ``config.json`` are written,
    and only when they change (a new run, or other settings), so a notebook that only reads
    (the report, while another tab judges) is never refused. ``hold_lock``: hold it until
    :meth:`Run.close` (``evalnb run``, for the whole command). ``keep_config``: leave an
    existing ``config.json`` as it is (``evalnb run`` writes it once it knows a stage will run:
    evalnb.stages.rerun).
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


StageFunction = TypeVar("StageFunction", bound=Callable[[Run], Any])


def _writes(doing: str) -> Callable[[StageFunction], StageFunction]:
    """A stage function that holds the run directory while it runs (:func:`evalnb.core.lock.holding`)."""
    def wrap(stage: StageFunction) -> StageFunction:
        @functools.wraps(stage)
        def holding(run: Run) -> Any:
            with lock.holding(run.dir, doing):
                return stage(run)
        return cast(StageFunction, holding)
    return wrap


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


# --- running calls ----------------------------------------------------------------------------

def _stage(run: Run, name: str, calls: list[Call], endpoints: Mapping[str, EndpointConfig], done: Any,
           after: Callable[[Run], None] | None = None) -> Counter[str]:
    """Run the stage's calls and record them, then ``after``; an endpoint failure (reading 30) ends it there."""
    started, before = utc_now(), len(read_lines(run.path(f"{name}.jsonl")))   # this pass's lines come after
    store = JsonlStore(run.path(f"{name}.jsonl"))
    calls = checked_calls(calls, type(run.benchmark).NAME, name, type(run.benchmark).STATUSES)   # bad records fail their call
    counts = run_blocking(lambda: run_stage_calls(
        calls, endpoints, store, run.dir, policy=run.config.retry, concurrency=run.config.concurrency, done=done,
        stage=name, budget=Budget.open(run.config)))   # the ceiling, with what the records say is spent
    say(outcome_line(name, len(calls), counts, _calls_in_flight(run, name)))
    if failures := failure_summary(run.dir, (name,)):   # why, per endpoint and cause
        say("\n".join(summary_lines(failures)))
    entry = {"started_at": started, "finished_at": utc_now(), "calls": len(calls),
             "new_records": dict(counts), **_batch_manifest(run, name, endpoints)}
    update_manifest(run.path("manifest.json"), environment=not lock.is_stage_kernel(run.dir),
                    stages={name: stage_entry(run.path("manifest.json"), name, entry)},   # no call made: times kept
                    routes=routes(run, stage_records(run)))
    if after is not None:
        after(run)
    if stopped := stopped_in(failures, read_lines(run.path(f"{name}.jsonl"))[before:]):   # exit 1, the rest unanswered
        stored = store.load()
        raise EndpointFailure(stop_line(stopped, sum(not (c.key in stored and done(stored[c.key])) for c in calls)))
    return counts


def _calls_in_flight(run: Run, name: str) -> int:
    """Calls of this stage still in batches in flight (batch mode; else 0)."""
    if not run.path("batches.jsonl").exists():
        return 0
    return sum(e["calls"] for e in in_flight(run.dir) if e["stage"] == name)


def _batch_manifest(run: Run, name: str, endpoints: Mapping[str, EndpointConfig]) -> dict[str, Any]:
    """Batch mode's part of a stage's manifest entry: modes and batches (nothing for a live run)."""
    if not run.path("batches.jsonl").exists() and all(e.mode == "live" for e in endpoints.values()):
        return {}
    return stage_manifest(run.dir, name, endpoints)


def stage_records(run: Run) -> dict[str, dict[str, Record]]:
    """Each stage's stored records, latest per key: read once, used for scores, usage, routes."""
    return {stage: JsonlStore(run.path(f"{stage}.jsonl")).load() for stage in CALL_STAGES}


def responses(run: Run) -> dict[str, Record]:
    return JsonlStore(run.path("generate.jsonl")).load()


def judgements(run: Run) -> dict[str, Record]:
    return JsonlStore(run.path("judge.jsonl")).load()


@_writes("evalnb.generate")
def generate(run: Run) -> pd.DataFrame:
    """Stage 1: the contestant answers every task not already answered."""
    for label, value in run.benchmark.summary_rows():   # whole, where the summary table shortens it
        print(f"{label}: {value}")
    calls = run.benchmark.generation_calls()
    endpoints = {"model": run.config.model} if run.benchmark.calls_model else {}   # imported answers: no client
    _stage(run, "generate", calls, endpoints, run.benchmark.generation_done, after=write_responses)
    return status_table(run)


@_writes("evalnb.judge")
def judge(run: Run) -> pd.DataFrame:
    """Stage 2: every configured judge grades every answer it has not yet graded."""
    if nothing := no_answer_line(run.dir):
        say(f"judge: {nothing}; nothing to judge")
    calls = run.benchmark.judge_calls(responses(run))
    _stage(run, "judge", calls, dict(run.config.judge_roles()), run.benchmark.judge_done)
    return judge_status_table(judgements(run).values(), judge_names(run))


def judge_status_table(records: Iterable[Record], names: Mapping[str, str]) -> pd.DataFrame:
    """Judge calls by judge and status: what the judge stage shows, each judge named by
    ``names`` (its role and model, :func:`judge_names`)."""
    import pandas as pd

    from evalnb.core.tables import readable

    table = Counter((r.get("judge", r["endpoint"]), r["status"]) for r in records)
    return readable(pd.DataFrame([(names.get(str(j), j), s, n) for (j, s), n in sorted(table.items())],
                                 columns=["judge", "status", "calls"]))


def judge_names(run: Run) -> dict[str, str]:
    """``judge1`` -> ``judge1 (openai:gpt-x)``: a judge as its role and its model."""
    return {role: f"{role} ({e.provider}:{e.name})" for role, e in run.config.judge_roles()}


def write_responses(run: Run) -> None:
    stored = responses(run)
    rows = []
    for task in run.tasks:
        record = dict(stored.get(task.task_id) or {"status": "pending"})
        record.pop("key", None)
        record["task_id"] = task.task_id
        record["response"] = record.pop("text", None)
        rows.append(record)
    write_json(run.path("responses.json"), {
        "benchmark": run.config.benchmark, "run_name": run.config.run_name,
        "model": {"provider": run.config.model.provider, "name": run.config.model.name},
        **({"label": OFFLINE_LABEL} if run.config.offline else {}),
        "records": rows})


def status_table(run: Run) -> pd.DataFrame:
    import pandas as pd

    from evalnb.core.tables import readable

    counts = Counter(r["status"] for r in read_json_if_exists(run.path("responses.json"))["records"])
    return readable(pd.DataFrame(sorted(counts.items()), columns=["status", "tasks"]).set_index("status"))


# --- aggregation ------------------------------------------------------------------------------

def routes(run: Run, stores: Mapping[str, Mapping[str, Record]]) -> dict[str, Any]:
    """Model routes as sent and as the endpoints reported them."""
    returned: dict[str, set[str]] = defaultdict(set)
    for records in stores.values():
        for record in records.values():
            if record.get("model_route"):
                returned[record["endpoint"]].add(record["model_route"])
    endpoints = {"model": run.config.model, **dict(run.config.judge_roles())}
    return {role: {"provider": e.provider, "as_sent": e.name, "base_url": e.base_url,
                   "as_returned": sorted(returned.get(role, ()))} for role, e in endpoints.items()}


@_writes("evalnb.aggregate")
def aggregate(run: Run) -> pd.DataFrame:
    """Stage 3: scores.json and status.json. Incomplete runs keep ``overall`` null.

    scores.json is a function of the stores and inputs alone, so aggregating the same records
    twice writes the same bytes (``evalnb verify`` recomputes it): the time of aggregation is
    kept in the manifest (``aggregated_at``) and in status.json, which says what state the run
    is in and when, not what it scored."""
    stores = stage_records(run)
    scores = scores_document(run, stores)
    aggregated_at = utc_now()
    write_json(run.path("scores.json"), scores)
    write_json(run.path("status.json"), {
        "state": "complete" if scores["complete"] else "incomplete",
        "resumable": scores.get("resumable", {}), "updated_at": aggregated_at})
    update_manifest(run.path("manifest.json"), environment=not lock.is_stage_kernel(run.dir),
                    complete=scores["complete"], routes=routes(run, stores),
                    usage=scores["usage"], aggregated_at=aggregated_at,
                    **({"budget": scores["budget"]} if "budget" in scores else {}),
                    stores={stage: store_digest(run.path(f"{stage}.jsonl"))
                            for stage in judge_retest.digested_stages(run.config)})
    write_evidence(run, stores, scores)
    if nothing := no_answer_line(run.dir):   # no headline of nothing: say why, with the failure summary's table
        say(f"aggregate: {nothing}; no headline: such a run measures its endpoint, not its model")
    return summary_table(run.dir) if nothing else headline_table(scores)


def scores_document(run: Run, stores: Mapping[str, Mapping[str, Record]]) -> dict[str, Any]:
    """The body of scores.json, from the stores and the run's inputs only (no time, no path
    but those the parameters hold)."""
    body = run.benchmark.score(stores["generate"], stores["judge"])
    # The judges' statistics and the retest study: beside the protocol's numbers, never in them.
    retests = judge_retest.store_records(run.dir) if run.config.judge_retest else {}
    return {
        "benchmark": run.config.benchmark, "run_name": run.config.run_name,
        "offline": run.config.offline,
        **({"label": OFFLINE_LABEL} if run.config.offline else {}),
        **body,   # a benchmark may label its own approximations (offline: true, label)
        "fingerprint": run.fingerprint,
        "usage": usage_by_stage(run.config, {**stores, **({judge_retest.STAGE: retests} if retests else {})}),
        **({"budget": spend} if (spend := budget_summary(run.config)) else {}),
        "latency": latency_summary(endpoint_names(run.config), stores),
        "reasoning": reasoning_summary(endpoint_names(run.config), stores),
        **judge_stats.scores_section(type(run.benchmark), run.config.to_dict(), body, stores["generate"]),
        **judge_retest.scores_section(run.config, stores["judge"], retests),
        "config": run.config.to_dict(),
        "warnings": run.warnings,
    }
