"""The stages every benchmark shares: open a run, generate, judge, aggregate.

Each stage notebook calls one of these functions per cell. A stage reads what earlier
stages stored in the run directory and appends its own records, so any stage can be
re-run, and a re-run resumes. A stage holds the run directory (:mod:`evalnb.records.lock`) while it
makes calls and writes, and says in one line what it did (:mod:`evalnb.pipeline.stage_outcome`).
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from evalnb.pipeline.accounting import endpoint_names, usage_by_stage
from evalnb.core.run_config import EndpointConfig
from evalnb.records import lock
from evalnb.core.errors import EndpointFailure
from evalnb.records.manifest import stage_entry, store_digest, update_manifest, utc_now
from evalnb.records.stores import latest_of, read_json_if_exists, write_json
from evalnb.core.chains import ready_calls
from evalnb.core.types import CALL_STAGES, FAILED_ENDPOINT, Call, Record
from evalnb.records.validation import checked_calls
from evalnb.execution import run_stage_calls
from evalnb.execution.batch.journal import in_flight
from evalnb.execution.batch.views import stage_manifest
from evalnb.execution.runner import run_blocking
from evalnb.views.progress import say
from evalnb.pipeline.run import OFFLINE_LABEL, Run
from evalnb.pipeline.stage_outcome import outcome_line
from evalnb.evidence.headline import headline_table   # here too: the aggregate stage returns it
from evalnb.evidence.run_evidence import write_evidence   # here too: recompute calls it
from evalnb.evidence.failures import failure_summary, no_answer_line, stop_line, stopped_in, summary_lines, summary_table
from evalnb.execution.budget import Budget
from evalnb.execution.cache import open_call_cache
from evalnb.execution.cache.summary import cache_lines
from evalnb.execution.budget_views import budget_summary
from evalnb.stats.latency import latency_summary
from evalnb.core.reasoning import reasoning_summary
from evalnb.judges import retest as judge_retest, scores as judge_stats

if TYPE_CHECKING:   # pandas is imported by the functions that return tables, when called
    import pandas as pd

StageFunction = TypeVar("StageFunction", bound=Callable[[Run], Any])


def _writes(doing: str) -> Callable[[StageFunction], StageFunction]:
    """A stage function that holds the run directory while it runs (:func:`evalnb.records.lock.holding`)."""
    def wrap(stage: StageFunction) -> StageFunction:
        @functools.wraps(stage)
        def holding(run: Run) -> Any:
            with lock.holding(run.dir, doing):
                return stage(run)
        return cast(StageFunction, holding)
    return wrap


# --- running calls ----------------------------------------------------------------------------

def _stage(run: Run, name: str, calls: list[Call], endpoints: Mapping[str, EndpointConfig], done: Any,
           after: Callable[[Run], None] | None = None) -> Counter[str]:
    """Run the stage's calls and record them, then ``after``; an endpoint failure ends it there."""
    store = run.store(name)   # parsed here, once; kept up with this pass's appends
    started, before = utc_now(), len(store.lines())   # this pass's lines come after
    cache = open_call_cache(run.config, endpoints)   # the response cache, unless the run turns it off
    counts: Counter[str] = Counter()
    waiting = calls
    while waiting:   # in rounds: a chained call once what it needs is recorded (evalnb.core.chains)
        ready, waiting = ready_calls(waiting, store.load(), done)
        if not ready:
            break   # what is left waits for a need that failed or was not made: pending
        checked = checked_calls(ready, type(run.benchmark).NAME, name, type(run.benchmark).STATUSES)   # bad records fail their call
        made = run_blocking(functools.partial(
            run_stage_calls, checked, endpoints, store, run.dir, policy=run.config.retry,
            concurrency=run.config.concurrency, done=done, stage=name,
            budget=Budget.open(run.config), cache=cache))   # the ceiling, with what the records say is spent
        counts += made
        if made.get(FAILED_ENDPOINT):
            break   # the endpoint stopped its calls: no later round sends more to it
    say(outcome_line(name, len(calls), counts, _calls_in_flight(run, name)))
    for line in cache_lines(cache, store.lines()[before:], name):
        say(line)
    if failures := failure_summary(run.dir, (name,), records={name: latest_of(store.lines())}):   # why, per endpoint and cause
        say("\n".join(summary_lines(failures)))
    entry = {"started_at": started, "finished_at": utc_now(), "calls": len(calls),
             "new_records": dict(counts), **_batch_manifest(run, name, endpoints)}
    update_manifest(run.path("manifest.json"), environment=not lock.is_stage_kernel(run.dir),
                    stages={name: stage_entry(run.path("manifest.json"), name, entry)},   # no call made: times kept
                    routes=routes(run, stage_records(run)))
    if after is not None:
        after(run)
    if stopped := stopped_in(failures, store.lines()[before:]):   # exit 1, the rest unanswered
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
    return {stage: run.store(stage).load() for stage in CALL_STAGES}


def every_latest(run: Run) -> dict[str, dict[str, Record]]:
    """Each stage's latest line per key, endpoint failures included (what the failure summary
    reads), from the run's stores as already parsed."""
    return {stage: latest_of(run.store(stage).lines()) for stage in CALL_STAGES}


def responses(run: Run) -> dict[str, Record]:
    return run.store("generate").load()


def judgements(run: Run) -> dict[str, Record]:
    return run.store("judge").load()


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
    if nothing := no_answer_line(run.dir, every_latest(run)):
        say(f"judge: {nothing}; nothing to judge")
    calls = run.benchmark.judge_calls(responses(run))
    _stage(run, "judge", calls, dict(run.config.judge_roles()), run.benchmark.judge_done)
    return judge_status_table(judgements(run).values(), judge_names(run))


def judge_status_table(records: Iterable[Record], names: Mapping[str, str]) -> pd.DataFrame:
    """Judge calls by judge and status: what the judge stage shows, each judge named by
    ``names`` (its role and model, :func:`judge_names`)."""
    import pandas as pd

    from evalnb.views.tables import readable

    table = Counter((r.get("judge", r["endpoint"]), r["status"]) for r in records)
    return readable(pd.DataFrame([(names.get(str(j), j), s, n) for (j, s), n in sorted(table.items())],
                                 columns=["judge", "status", "calls"]))


def judge_names(run: Run) -> dict[str, str]:
    """``judge1`` -> ``judge1 (openai:gpt-x)``: a judge as its role and its model."""
    return {role: f"{role} ({e.provider}:{e.name})" for role, e in run.config.judge_roles()}


def write_responses(run: Run) -> None:
    """``responses.json``: one row per item. An item of one call (keyed by its id) is that
    call's record; an item of several calls (keyed ``ID::NAME``: the turns of a conversation)
    lists each under ``calls``, in the benchmark's order, named as the benchmark names them,
    and its ``status`` is that of its first call not ``ok`` (``ok`` once every call is)."""
    stored = responses(run)
    item_calls = calls_of_items(run.benchmark.generation_calls())
    rows = []
    for task in run.tasks:
        keys = item_calls.get(task.task_id, [task.task_id])
        if keys == [task.task_id]:
            rows.append(_response_row(stored.get(task.task_id), {"task_id": task.task_id}))
            continue
        calls = [_response_row(stored.get(key), {"call": key.partition("::")[2] or key}) for key in keys]
        status = next((c["status"] for c in calls if c["status"] != "ok"), "ok")
        rows.append({"status": status, "task_id": task.task_id, "calls": calls})
    write_json(run.path("responses.json"), {
        "benchmark": run.config.benchmark, "run_name": run.config.run_name,
        "model": {"provider": run.config.model.provider, "name": run.config.model.name},
        **({"label": OFFLINE_LABEL} if run.config.offline else {}),
        "records": rows})


def _response_row(record: Record | None, name: Mapping[str, str]) -> dict[str, Any]:
    row = dict(record or {"status": "pending"})
    row.pop("key", None)
    row.update(name)
    row["response"] = row.pop("text", None)
    return row


def calls_of_items(calls: Iterable[Call]) -> dict[str, list[str]]:
    """Item id -> the keys of its calls, in order: a key ``ID::NAME`` belongs to item ``ID``."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for call in calls:
        grouped[call.key.partition("::")[0]].append(call.key)
    return dict(grouped)


def status_table(run: Run) -> pd.DataFrame:
    import pandas as pd

    from evalnb.views.tables import readable

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
    latest = every_latest(run)
    if nothing := no_answer_line(run.dir, latest):   # no headline of nothing: say why, with the failure summary's table
        say(f"aggregate: {nothing}; no headline: such a run measures its endpoint, not its model")
    return summary_table(run.dir, latest) if nothing else headline_table(scores)


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
