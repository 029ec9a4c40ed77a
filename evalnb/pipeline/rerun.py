"""What ``evalnb run`` has to do in a run directory that has run before, decided from the
stores before any stage notebook is executed.

A record says only what happened. A stage whose work is all in its store, whose executed
notebook stands (complete, no failed cell) and which finished (the manifest records it ran to
its last cell, :mod:`evalnb.records.completion`) is not executed again: its notebook, its HTML and
its manifest entry stay byte for byte as they were. From the stores:

- **generate** has nothing to do when every call the benchmark lists has a done record
  (``generation_done``), no batch of it is in flight, and ``responses.json`` is there;
- **judge**, the same with the judge calls over the stored answers (``judge_done``);
- **aggregate**, when ``scores.json``, ``status.json`` and ``evidence.json`` are there and the
  stores are byte for byte those it aggregated (the sha256 the manifest recorded);
- **report**, when the aggregate has nothing to do (its inputs are the aggregate's outputs).

Stages run in order and each reads what the one before wrote, so the stages skipped are a
prefix: once one stage runs, every later one runs too.

Settings the fingerprint does not hold (``concurrency``, an endpoint's ``base_url``, timeouts,
modes ...) may differ from the recorded ``config.json`` on a rerun (``--set concurrency=8``).
``config.json`` and the executed notebooks never disagree:

- nothing to do in any stage: nothing is executed and ``config.json`` stays as it is (no call
  was made under the new settings); the invocation and its settings are recorded in the
  manifest's ``reruns``, beside its other fields, over none of them;
- something to do: a stage notebook is skipped only when it was given this invocation's
  settings; ``config.json`` is written with them, the stages from the first one not skipped
  run under them, and the invocation is recorded in ``reruns`` too. A stage executed with no
  call to make keeps its manifest times (:func:`evalnb.records.manifest.stage_entry`).

``evalnb run --stage NAME`` executes the stages it names whatever their state (the user asked
for them): a rerun that made no call still keeps the stage's manifest times.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalnb.core.errors import EvalnbError
from evalnb.core.jsondiff import as_json, differences
from evalnb.records import completion
from evalnb.records.manifest import store_digest, utc_now
from evalnb.records.stores import read_json_if_exists
from evalnb.core.types import Call, Record
from evalnb.execution.batch.journal import JOURNAL_NAME, in_flight
from evalnb.judges import retest as judge_retest
from evalnb.pipeline.run import Run
from evalnb.pipeline.stages import stage_records

AGGREGATE_OUTPUTS = ("scores.json", "status.json", "evidence.json")


@dataclass(frozen=True)
class Plan:
    """The stages skipped (their records stand) and those executed, in order; and what this
    invocation's settings change from the recorded ``config.json`` (path, recorded, now)."""

    skip: tuple[str, ...]
    execute: tuple[str, ...]
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)

    def rerun_entry(self) -> dict[str, Any]:
        """The manifest's ``reruns`` entry for this invocation."""
        return {"at": utc_now(), "stages_executed": list(self.execute), "stages_with_nothing_to_do": list(self.skip),
                "settings": {path: {"recorded": old, "this_invocation": new} for path, old, new in self.changed}}


def plan(run: Run, records: Mapping[str, Path], *, forced: bool = False) -> Plan:
    """What to do for the stages ``records`` names (stage -> its executed notebook), in order."""
    stages = tuple(records)
    now = as_json(run.config.to_dict())
    recorded = read_json_if_exists(run.path("config.json"))
    changed = differences(recorded, now, whole_lists=True) if recorded is not None else []
    if forced:
        return Plan((), stages, changed)
    standing: list[tuple[str, Any]] = []   # (stage, the config its notebook was given)
    try:
        stores = stage_records(run)
        for stage in stages:
            given = standing_config(records[stage])
            if given is _NO_RECORD or not completion.finished(run.dir, stage) or has_work(run, stage, stores):
                break
            standing.append((stage, given))
    except EvalnbError:   # a store that cannot be read: the stage itself says so, in its record
        return Plan((), stages, changed)
    if len(standing) == len(stages):
        return Plan(stages, (), changed)
    skip: list[str] = []
    for stage, given in standing:   # a notebook given other settings would disagree with config.json
        if given != now:
            break
        skip.append(stage)
    return Plan(tuple(skip), stages[len(skip):], changed)


_NO_RECORD = object()


def standing_config(notebook: Path) -> Any:
    """The ``config`` an executed stage notebook was given, when it is a complete record (every
    code cell completed, no exception); else ``_NO_RECORD``."""
    try:
        nb = json.loads(notebook.read_text("utf-8"))
    except (OSError, ValueError):
        return _NO_RECORD
    meta = (nb.get("metadata") or {}).get("papermill") or {}
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if (not meta.get("end_time") or meta.get("exception") or not cells
            or any(((c.get("metadata") or {}).get("papermill") or {}).get("status") != "completed" for c in cells)):
        return _NO_RECORD
    return (meta.get("parameters") or {}).get("config", _NO_RECORD)


def has_work(run: Run, stage: str, stores: Mapping[str, Mapping[str, Record]]) -> bool:
    """Whether ``stage`` has anything to do, judged from the stores (module docstring)."""
    bench = run.benchmark
    if stage == "generate":
        return (_pending(bench.generation_calls(), stores["generate"], bench.generation_done)
                or _batches_in_flight(run, stage) or not run.path("responses.json").exists())
    if stage == "judge":
        calls = bench.judge_calls(stores["generate"])
        spec = run.config.judge_retest   # the retest study, resumed in the judge stage once the protocol is done
        return (_pending(calls, stores["judge"], bench.judge_done) or _batches_in_flight(run, stage)
                or bool(spec and _pending(judge_retest.retest_calls(spec, calls, stores["judge"], bench.judge_done),
                                          judge_retest.store_records(run.dir), bench.judge_done)))
    if stage == "aggregate":
        aggregated = (read_json_if_exists(run.path("manifest.json")) or {}).get("stores")
        return (not all(run.path(name).exists() for name in AGGREGATE_OUTPUTS)
                or aggregated != {s: store_digest(run.path(f"{s}.jsonl")) for s in judge_retest.digested_stages(run.config)})
    return False   # report: reads only what the aggregate wrote


def _pending(calls: Sequence[Call], records: Mapping[str, Record], done: Callable[[Record], bool]) -> bool:
    return any(call.key not in records or not done(records[call.key]) for call in calls)


def _batches_in_flight(run: Run, stage: str) -> bool:
    return run.path(JOURNAL_NAME).exists() and any(e["stage"] == stage for e in in_flight(run.dir))
