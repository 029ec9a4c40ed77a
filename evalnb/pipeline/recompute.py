"""A finished run recomputed from its stores and inputs, trusting none of its results.

``evalnb verify`` (evalnb.app.record.verify) opens a run directory read-only: the run's resolved
parameters (``config.json``) and fingerprint, its stores, and the inputs the parameters name
(data, corpus, prompt and scale files, answer files), at the recorded paths or where
``--set KEY=PATH`` says they are now. Everything the run reports is then rebuilt by the code
that reported it, into a scratch directory (never the run's own):

- each stored record is prepared again from the inputs (a call decided without a model, out
  of context, an imported or file-fed answer, an exact match: all its fields), and each
  judge's reply is read again by the benchmark (its verdict from its reply text): the fields
  must be those stored, so a document whose length changed, or a score edited in a store,
  shows;
- ``scores.json`` from the benchmark's own ``score()`` over the stores (every item's score,
  every declared metric and interval with the recorded seed, usage and cost, status counts),
  ``responses.json``, ``evidence.json`` and ``tasks.html``, as the aggregate stage writes them.

Each difference is one line naming the file and the field. What could not be checked (an
input outside the record that cannot be read, a record that cannot be prepared again) is a line
of its own kind, :class:`Unchecked`: verify says "could not check" apart from "does not match".
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalnb.benchmarks import Benchmark
from evalnb.core.errors import EvalnbError
from evalnb.records.fingerprint import SHARED, SHARED_KEYS, fingerprint, in_force, moved_to_shared, readings, run_fingerprint
from evalnb.records.manifest import store_digest
from evalnb.core.jsondiff import as_json, difference_lines, differences, short
from evalnb.records.stores import JsonlStore, read_json_if_exists, write_json
from evalnb.core.chains import bound
from evalnb.core.types import Call, Completion, Record
from evalnb.execution.batch.journal import CALLS_DIR, JOURNAL_NAME
from evalnb.pipeline.accounting import usage_by_stage
from evalnb.evidence.items import EVIDENCE_FILE, TASKS_PAGE
from evalnb.pipeline.run import Run, load_config, narrowed
from evalnb.pipeline.stages import scores_document, write_evidence, write_responses

STORES = ("generate", "judge")
# A stored reply's status -> the completion status it was read from (other statuses had no reply).
REPLY_STATUSES = {"ok": "ok", "refused": "refused", "empty": "empty", "failed_parse": "ok",
                  "judge_refused": "refused", "judge_empty": "empty"}
# Which inputs a fingerprint part stands for, for the message when it no longer matches.
PART_INPUTS = {"tasks": "the data file", "prompts": "the prompt files", "likert": "the likert scale file",
               "judge_panel": "the judges", "retry": "the retry policy",
               "contestant": "the answers file (responses, predictions or traces)",
               "judge_prompt": "the judge prompt file", "autorater": "the autorater prompt or scale file",
               "shared": "the data file, the prompts, the judge panel or the retry policy"}


class Unchecked(str):
    """A line naming what could not be checked and why: not a discrepancy (nothing was found
    to differ), and not a pass either (``evalnb verify`` exits 2 when only these remain)."""


@dataclass
class Recomputed:
    """A run rebuilt in ``scratch``: the run as recorded (``run``) and as rebuilt there (``shadow``)."""

    run_dir: Path
    scratch: Path
    run: Run
    shadow: Run
    stores: dict[str, dict[str, Record]]
    scores: dict[str, Any]
    lines: list[str] = field(default_factory=list)


def _name(run_dir: Path, label: str, file: str) -> str:
    return f"{label}/{file}" if label else str(run_dir / file)


def open_recorded(run_dir: Path, scratch: Path, sets: Sequence[str], label: str) -> tuple[Run, Run] | str:
    """The run's benchmark built from its recorded parameters (inputs where ``sets`` say), as
    recorded and as it is rebuilt in ``scratch``; or the one line saying why it cannot be."""
    config_json = read_json_if_exists(run_dir / "config.json")
    recorded = read_json_if_exists(run_dir / "fingerprint.json")
    if config_json is None or recorded is None:
        missing = "config.json" if config_json is None else "fingerprint.json"
        return f"{_name(run_dir, label, missing)}: missing: the run cannot be recomputed without it"
    try:
        config, bench = load_config(config_json, sets)
        benchmark: Benchmark = narrowed(bench(config, recorded.get("parts")), config)   # the run's own subset
    except EvalnbError as e:
        return Unchecked(f"{_name(run_dir, label, 'config.json')}: could not check: the run's inputs cannot be read "
                         f"({e}); give where they are now with --set KEY=PATH")
    # An older record that says the same (its duplicates of the shared part read past) stands as written.
    now = in_force(recorded, run_fingerprint(config, benchmark), moved_to_shared(benchmark))
    run = Run(config, benchmark, benchmark.tasks, now, benchmark.warnings)
    shadow = Run(replace(config, output_dir=scratch), benchmark, benchmark.tasks, run.fingerprint, run.warnings)
    return run, shadow


def check_fingerprint(run_dir: Path, label: str, run: Run) -> list[str]:
    """The inputs still have the hashes recorded; the recorded hashes are those of their values."""
    name = _name(run_dir, label, "fingerprint.json")
    recorded = read_json_if_exists(run_dir / "fingerprint.json")
    lines = []
    parts = recorded.get("parts") or {}
    if fingerprint({k: v.get("value") for k, v in parts.items()}) != recorded:
        lines.append(f"{name}: sha256: not the hash of the recorded parts (the file was edited)")
    fresh = run.fingerprint   # the recorded one itself when nothing differs (open_recorded)
    moved = moved_to_shared(run.benchmark)
    then, now = readings(recorded, moved), readings(fresh, moved)   # thing by thing, each once
    if (SHARED in parts) != (SHARED in fresh["parts"]):   # a record from before the shared part: that, once
        then, now = ({k: v for k, v in side.items() if k not in SHARED_KEYS} for side in (then, now))
        then[SHARED], now[SHARED] = parts.get(SHARED) or {}, fresh["parts"].get(SHARED) or {}
    for part in sorted(set(then) | set(now)):
        old, new = (then.get(part) or {}).get("sha256"), (now.get(part) or {}).get("sha256")
        if old != new:
            what = PART_INPUTS.get(part, "the run's inputs or settings")
            where = f"{SHARED}.{part}" if part in SHARED_KEYS and SHARED in parts else part
            lines.append(f"{name}: parts.{where}: recorded sha256 {str(old)[:12]}, {what} now give {str(new)[:12]} "
                         f"(recorded {short((then.get(part) or {}).get('value'), 60)}, now "
                         f"{short((now.get(part) or {}).get('value'), 60)})")
    return lines


def load_stores(run_dir: Path, scratch: Path, label: str) -> tuple[dict[str, dict[str, Record]], list[str]]:
    """The stores, read from copies (reading heals a torn last line: never in the record itself)."""
    stores, lines = {}, []
    for stage in STORES:
        source, copy = run_dir / f"{stage}.jsonl", scratch / f"{stage}.jsonl"
        if source.exists():
            shutil.copyfile(source, copy)
        try:
            stores[stage] = JsonlStore(copy).load()
        except EvalnbError as e:
            lines.append(f"{_name(run_dir, label, copy.name)}: {str(e).split(': ', 1)[-1]}")
            stores[stage] = {}
        if source.exists() and copy.read_bytes() != source.read_bytes():
            lines.append(f"{_name(run_dir, label, copy.name)}: its last line is torn (a record cut short)")
    if (run_dir / JOURNAL_NAME).exists():   # batch mode: the report's batches table reads them
        shutil.copyfile(run_dir / JOURNAL_NAME, scratch / JOURNAL_NAME)
        if (run_dir / CALLS_DIR).is_dir():
            shutil.copytree(run_dir / CALLS_DIR, scratch / CALLS_DIR, dirs_exist_ok=True)
    return stores, lines


def _replayed(call: Call, record: Record, read_reply: bool) -> dict[str, Any]:
    """What the record's fields should be: prepared again from the inputs and, with
    ``read_reply``, where a model replied, its reply read again. (Only verdicts are read
    again: an answer's fields are its text as the provider returned it, nothing derived.)"""
    prepared = call.prepare()
    expected = dict(prepared.fields)
    status = REPLY_STATUSES.get(str(record.get("status")))
    if read_reply and prepared.request is not None and (record.get("attempts") or record.get("cache")) \
            and status is not None:
        completion = Completion(text=record.get("text") or "", status=status,  # type: ignore[arg-type]
                                finish_reason=record.get("finish_reason"), model_route=record.get("model_route"),
                                request_id=record.get("request_id"), raw=record.get("provider_meta") or {})
        expected.update(call.interpret(completion))
    return expected


def check_records(run_dir: Path, label: str, run: Run, stores: Mapping[str, Mapping[str, Record]]) -> list[str]:
    """Every stored record whose fields the inputs (and its reply) decide, decided again."""
    lines: list[str] = []
    stage_calls = {"generate": run.benchmark.generation_calls(),
                   "judge": run.benchmark.judge_calls(stores["generate"])}
    for stage, calls in stage_calls.items():
        name = _name(run_dir, label, f"{stage}.jsonl")
        for call in calls:
            record = stores[stage].get(call.key)
            if record is None:
                continue   # not made (yet): the scores say so
            if any(k not in stores[stage] for k in call.needs):
                lines.append(Unchecked(f"{name}: {call.key}: could not check: a call it needs has no record"))
                continue
            call = bound(call, stores[stage])   # a chained call, from the records it was made from
            try:
                expected = as_json(_replayed(call, record, read_reply=stage == "judge"))
            except (EvalnbError, OSError) as e:
                lines.append(Unchecked(f"{name}: {call.key}: could not check: cannot be decided again ({e})"))
                continue
            recorded = as_json({key: record.get(key, "<absent>") for key in expected})
            lines += [f"{name}: {call.key}: {where}: recorded {short(a)}, recomputed {short(b)}"
                      for where, a, b in differences(recorded, expected)]
    return lines


def rebuild(run_dir: Path, scratch: Path, sets: Sequence[str] = (), label: str = "") -> Recomputed | str:
    """The run rebuilt in ``scratch`` with every difference from its record as a line (or the
    one line saying why it cannot be rebuilt)."""
    opened = open_recorded(run_dir, scratch, sets, label)
    if isinstance(opened, str):
        return opened
    run, shadow = opened
    stores, lines = load_stores(run_dir, scratch, label)
    lines += check_fingerprint(run_dir, label, run)
    lines += check_records(run_dir, label, run, stores)
    config_json = read_json_if_exists(run_dir / "config.json")
    # The recorded parameters and fingerprint stand in the recomputed document (the lines above
    # check them against the inputs): a changed input is reported once, where it changed.
    scores = as_json(scores_document(run, stores) | {"config": config_json,
                                                    "fingerprint": read_json_if_exists(run_dir / "fingerprint.json")})
    write_json(scratch / "scores.json", scores)
    write_responses(shadow)
    write_evidence(shadow, stores, scores)
    done = Recomputed(run_dir, scratch, run, shadow, stores, scores, lines)
    done.lines += compare_files(done, label)
    return done


def compare_files(done: Recomputed, label: str) -> list[str]:
    """The run's result files against those rebuilt."""
    lines = []
    for file in ("scores.json", "responses.json", EVIDENCE_FILE):
        recorded = read_json_if_exists(done.run_dir / file)
        name = _name(done.run_dir, label, file)
        if recorded is None:
            lines.append(f"{name}: missing")
            continue
        lines += difference_lines(name, recorded, read_json_if_exists(done.scratch / file))
    page = done.run_dir / TASKS_PAGE
    if not page.exists():
        lines.append(f"{_name(done.run_dir, label, TASKS_PAGE)}: missing")
    elif page.read_bytes() != (done.scratch / TASKS_PAGE).read_bytes():
        lines.append(f"{_name(done.run_dir, label, TASKS_PAGE)}: differs from the page rebuilt from the recomputed "
                     "evidence")
    status = read_json_if_exists(done.run_dir / "status.json") or {}
    expected_state = "complete" if done.scores["complete"] else "incomplete"
    if status.get("state") != expected_state:
        lines.append(f"{_name(done.run_dir, label, 'status.json')}: state: recorded {short(status.get('state'))}, "
                     f"recomputed {short(expected_state)}")
    if as_json(status.get("resumable")) != done.scores.get("resumable", {}):
        lines.append(f"{_name(done.run_dir, label, 'status.json')}: resumable: recorded {short(status.get('resumable'))}, "
                     f"recomputed {short(done.scores.get('resumable', {}))}")
    manifest = read_json_if_exists(done.run_dir / "manifest.json") or {}
    for stage, digest in (manifest.get("stores") or {}).items():
        now = store_digest(done.run_dir / f"{stage}.jsonl")
        if now != digest:
            lines.append(f"{_name(done.run_dir, label, f'{stage}.jsonl')}: {short(now, 60)}, but at aggregation it was "
                         f"{short(digest, 60)} (manifest.json stores.{stage}): records changed since")
    usage = as_json(usage_by_stage(done.run.config, done.stores))
    if "usage" in manifest and as_json(manifest["usage"]) != usage:
        lines += difference_lines(_name(done.run_dir, label, "manifest.json") + ": usage", manifest["usage"], usage)
    return lines
