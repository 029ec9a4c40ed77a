"""The stages every benchmark shares: open a run, generate, judge, aggregate.

Each stage notebook calls one of these functions per cell. A stage reads what earlier
stages stored in the run directory and appends its own records, so any stage can be
re-run, and a re-run resumes.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from evalnb import config as cfg
from evalnb.accounting import endpoint_names, usage_by_stage
from evalnb.benchmarks import BENCHMARKS, Benchmark, Task, benchmark_for
from evalnb.config import EndpointConfig, RunConfig
from evalnb import lock
from evalnb.errors import ConfigError
from evalnb.latency import latency_summary
from evalnb.lock import RunLock
from evalnb.preflight import check_paths
from evalnb.redaction import register_secret_values
from evalnb.fingerprint import check_or_record, fingerprint
from evalnb.manifest import update_manifest, utc_now
from evalnb.providers import make_provider, prefetch
from evalnb.providers.base import Provider
from evalnb.reasoning import reasoning_summary
from evalnb.records import JsonlStore, read_json_if_exists, write_json
from evalnb.runner import Call, Record, run_blocking, run_calls

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
        """Let another process run this directory (the lock is also freed when this one exits)."""
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

        c = self.config
        rows = [("benchmark", c.benchmark), ("run directory", str(self.dir)),
                ("tasks", len(self.tasks)), ("model", f"{c.model.provider}:{c.model.name}"),
                ("judges", ", ".join(f"{j.provider}:{j.name}" for j in c.judges) or "-"),
                ("fingerprint", self.fingerprint["sha256"][:16])]
        if c.offline:
            rows.append(("label", OFFLINE_LABEL))
        rows += [("warning", w) for w in self.warnings]
        return pd.DataFrame(rows, columns=["", "value"]).set_index("")


def load_config(source: str | Path | Mapping[str, Any], sets: Sequence[str] = ()
                ) -> tuple[RunConfig, type[Benchmark]]:
    """Parameters from a file path or a dictionary, with ``--set`` overrides applied; and the
    benchmark's class (``bench(config)`` checks its own parameters and loads its inputs)."""
    if isinstance(source, Mapping):
        params, origin = dict(source), "parameters"
    else:
        path = Path(source).expanduser().resolve()
        params, origin = cfg.read_params_file(path), str(path)
    if "benchmark" not in params:
        raise ConfigError(f"{origin}: benchmark: required, one of {', '.join(sorted(BENCHMARKS))}")
    bench = benchmark_for(params["benchmark"])
    if not isinstance(source, Mapping):
        params = cfg.absolutise(params, (*cfg.PATH_KEYS, *bench.PATH_OPTIONS), path.parent)
        params = cfg.absolutise_commands(params, path.parent)
    params = cfg.apply_sets(params, sets)
    bench = benchmark_for(params.get("benchmark"))
    return cfg.resolve(params, bench.OPTIONS, base=Path.cwd(), source=origin), bench


def make_benchmark(config: RunConfig, bench: type[Benchmark]) -> Benchmark:
    """The run's benchmark, built once: it checks its own parameters and loads its inputs.
    It is told what a run being resumed recorded (e.g. the date a rating header keeps)."""
    recorded = read_json_if_exists(config.output_dir / "fingerprint.json")
    return bench(config, recorded["parts"] if recorded else None)


def open_run(source: str | Path | Mapping[str, Any], sets: Sequence[str] = (), *,
             require_keys: bool = False, prefetch_sdks: bool = True) -> Run:
    """Check parameters and data, then create or resume the run directory.

    Everything is validated before anything is written (with ``require_keys``, that every
    named key variable is set too); resuming into a run started under a different
    fingerprint is refused (reading 11). Meanwhile the endpoints' SDKs are imported in the
    background (``prefetch_sdks=False`` in a process that makes no call: ``evalnb run``,
    whose kernel makes them).
    """
    config, bench = load_config(source, sets)
    if prefetch_sdks:
        prefetch((config.model, *config.judges))
    if require_keys:
        check_keys(config)
    check_paths(config, "parameters" if isinstance(source, Mapping) else str(source))
    benchmark = make_benchmark(config, bench)
    warnings = benchmark.warnings
    if not lock.is_stage_kernel(config.output_dir):
        benchmark.check_documents()   # a stage kernel's evalnb checked them moments ago
    run = Run(config, benchmark, benchmark.tasks,
              fingerprint(benchmark.fingerprint_parts() | config.response_parts()), warnings)
    register_secret_values(e.api_key_env for e in (config.model, *config.judges))
    run.lock = lock.acquire(run.dir)   # the first write: refused if another process runs here
    check_or_record(run.path("fingerprint.json"), run.fingerprint)
    write_json(run.path("config.json"), config.to_dict())
    for warning in warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    return run


def check_keys(config: RunConfig) -> None:
    """Fail before anything runs when a named key variable is unset (values never shown)."""
    from evalnb.providers.base import api_key
    for endpoint in (config.model, *config.judges):
        if endpoint.provider not in ("offline", "command", "none"):
            try:
                api_key(endpoint.api_key_env, endpoint.role)
            except ConfigError as e:
                raise ConfigError(f"{config.source}: {e}") from None


# --- running calls ----------------------------------------------------------------------------

async def _run_stage(calls: Sequence[Call], endpoints: Mapping[str, EndpointConfig],
                     store: JsonlStore, run: Run, *, done: Any, desc: str) -> Counter[str]:
    # Clients are made inside the event loop that uses them, and closed with it.
    pool: dict[str, Provider] = {}
    try:
        for role, endpoint in endpoints.items():
            provider = make_provider(endpoint)
            if provider is not None:
                pool[role] = provider
        if any(e.mode == "batch" for e in endpoints.values()) or run.path("batches.jsonl").exists():
            from evalnb.batch.engine import run_stage   # batch mode, or batches still in flight
            return await run_stage(calls, pool, endpoints, store, run, done=done, desc=desc)
        return await run_calls(calls, pool, store, run.config.retry, is_done=done, desc=desc,
                               concurrency=run.config.concurrency)
    finally:
        for provider in pool.values():
            await provider.aclose()


def _stage(run: Run, name: str, calls: list[Call], endpoints: Mapping[str, EndpointConfig],
           done: Any) -> Counter[str]:
    started = utc_now()
    store = JsonlStore(run.path(f"{name}.jsonl"))
    counts = run_blocking(lambda: _run_stage(calls, endpoints, store, run, done=done, desc=name))
    update_manifest(run.path("manifest.json"), environment=not lock.is_stage_kernel(run.dir), stages={name: {
        "started_at": started, "finished_at": utc_now(), "calls": len(calls),
        "new_records": dict(counts), **_batch_manifest(run, name, endpoints)}},
        routes=routes(run, stage_records(run)))
    return counts


def _batch_manifest(run: Run, name: str, endpoints: Mapping[str, EndpointConfig]) -> dict[str, Any]:
    """Batch mode's part of a stage's manifest entry: modes and batches (nothing for a live run)."""
    if not run.path("batches.jsonl").exists() and all(e.mode == "live" for e in endpoints.values()):
        return {}
    from evalnb.batch.engine import stage_manifest
    return stage_manifest(run.dir, name, endpoints)


def stage_records(run: Run) -> dict[str, dict[str, Record]]:
    """Each stage's stored records, latest per key: read once, used for scores, usage, routes."""
    return {stage: JsonlStore(run.path(f"{stage}.jsonl")).load() for stage in ("generate", "judge")}


def responses(run: Run) -> dict[str, Record]:
    return JsonlStore(run.path("generate.jsonl")).load()


def judgements(run: Run) -> dict[str, Record]:
    return JsonlStore(run.path("judge.jsonl")).load()


def generate(run: Run) -> pd.DataFrame:
    """Stage 1: the contestant answers every task not already answered."""
    calls = run.benchmark.generation_calls()
    _stage(run, "generate", calls, {"model": run.config.model}, run.benchmark.generation_done)
    write_responses(run)
    return status_table(run)


def judge(run: Run) -> pd.DataFrame:
    """Stage 2: every configured judge grades every answer it has not yet graded."""
    import pandas as pd

    calls = run.benchmark.judge_calls(responses(run))
    _stage(run, "judge", calls, dict(run.config.judge_roles()), run.benchmark.judge_done)
    records = judgements(run).values()
    table = Counter((r.get("judge", r["endpoint"]), r["status"]) for r in records)
    return (pd.DataFrame([(j, s, n) for (j, s), n in sorted(table.items())],
                         columns=["judge", "status", "calls"]) if table
            else pd.DataFrame(columns=["judge", "status", "calls"]))


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

    counts = Counter(r["status"] for r in read_json_if_exists(run.path("responses.json"))["records"])
    return pd.DataFrame(sorted(counts.items()), columns=["status", "tasks"]).set_index("status")


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


def aggregate(run: Run) -> pd.DataFrame:
    """Stage 3: scores.json and status.json. Incomplete runs keep ``overall`` null."""
    stores = stage_records(run)
    body = run.benchmark.score(stores["generate"], stores["judge"])
    scores = {
        "benchmark": run.config.benchmark, "run_name": run.config.run_name,
        "offline": run.config.offline,
        **({"label": OFFLINE_LABEL} if run.config.offline else {}),
        **body,   # a benchmark may label its own approximations (offline: true, label)
        "fingerprint": run.fingerprint,
        "usage": usage_by_stage(run.config, stores),
        "latency": latency_summary(endpoint_names(run.config), stores),
        "reasoning": reasoning_summary(endpoint_names(run.config), stores),
        "config": run.config.to_dict(),
        "warnings": run.warnings,
        "updated_at": utc_now(),
    }
    write_json(run.path("scores.json"), scores)
    write_json(run.path("status.json"), {
        "state": "complete" if body["complete"] else "incomplete",
        "resumable": body.get("resumable", {}), "updated_at": scores["updated_at"]})
    update_manifest(run.path("manifest.json"), environment=not lock.is_stage_kernel(run.dir),
                    complete=body["complete"], routes=routes(run, stores),
                    usage=scores["usage"])
    write_evidence(run, stores, scores)
    return headline_table(scores)


def write_evidence(run: Run, stores: Mapping[str, Mapping[str, Record]], scores: Mapping[str, Any]) -> None:
    """Every item's evidence, as its benchmark declares it: evidence.json and tasks.html."""
    from evalnb import evidence

    items = run.benchmark.evidence(stores["generate"], stores["judge"], scores)
    bench = type(run.benchmark)
    evidence.write_evidence(run.dir, evidence.run_meta(scores, metric_rows(scores), bench.STATUSES,
                                                       bench.ITEM_NOUN), items)


def metric_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared metrics of a scores.json, headline metrics first."""
    metrics = scores.get("metrics") or {}
    rows = [{"metric": name, "label": m["label"], "headline": m["headline"], "value": m["value"],
             "ci_low": (m.get("ci") or {}).get("low"), "ci_high": (m.get("ci") or {}).get("high"),
             "n": (m.get("ci") or {}).get("n")} for name, m in metrics.items()]
    return sorted(rows, key=lambda r: not r["headline"])


def headline_table(scores: Mapping[str, Any]) -> pd.DataFrame:
    """Every metric the benchmark declares, headline metrics first, each with its interval."""
    import pandas as pd

    columns = ["metric", "label", "headline", "value", "ci_low", "ci_high", "n"]
    return pd.DataFrame(metric_rows(scores), columns=columns).set_index("metric")
