"""``evalnb status PATH``: what a run, suite or compare directory holds, read from disk only.

For a run: what it is (benchmark, model, judges, subset), each stage's calls done out of its
total with the records' statuses, whether a stage failed and why, the headline numbers when
there are some, spend against any ceiling, batches in flight, and what the next command would
do. The totals are the calls the benchmark would list for the run's recorded parameters
(``config.json``): the benchmark reads its inputs to list them and makes no call; when its
inputs have moved, the counts of what is recorded are shown alone. Nothing is written or locked.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalnb.app import EXIT_OK
from evalnb.app.results import compare_results, compare_text, run_results, run_text, table_text
from evalnb.app.suite.state import SUITE_JSON, is_held, latest_by_stage
from evalnb.app.suite.state import status_text as suite_status
from evalnb.core.errors import ConfigError
from evalnb.records.stores import read_json_if_exists
from evalnb.core.types import STAGES

CALL_STORES = (("generate", "answers"), ("judge", "verdicts"))


def status_command(path: Path) -> int:
    if not path.is_dir():
        raise ConfigError(f"status: {path} is not a directory")
    path = path.resolve()
    if (path / SUITE_JSON).exists():
        print(suite_status(path) + "\nnext: " + ("wait for the running `evalnb suite` to end" if is_held(path) else
                                                  "`evalnb suite SUITE_FILE` runs what remains, then the leaderboard"))
    elif (path / "compare.json").exists() or (path / "05_compare.ipynb").exists():
        print(compare_status(path))
    else:
        print(run_status(path))
    return EXIT_OK


def compare_status(folder: Path) -> str:
    if not (folder / "compare.json").exists():
        return (f"compare: {folder}\nstate: not written (the compare notebook did not finish; see "
                f"{folder / '05_compare.ipynb'})\nnext: `evalnb compare RUN_DIR ... --out {folder}` again")
    doc = compare_results(folder)
    return "\n".join([f"compare: {folder}", compare_text(doc),
                      f"next: `evalnb render {folder}` for paper-ready HTML; `evalnb verify {folder}` to recompute it"])


def run_status(run_dir: Path) -> str:
    from evalnb.execution.batch.journal import JOURNAL_NAME
    from evalnb.execution.batch.views import status_text as batches_text
    from evalnb.execution.budget_views import status_lines

    config = read_json_if_exists(run_dir / "config.json")
    if config is None:
        return f"{run_dir}: not a run directory (no config.json): nothing has been recorded here"
    doc = run_results(run_dir)
    judges = ", ".join(f"{j.get('provider')}:{j.get('name')}" for j in config.get("judges") or []) or "none"
    lines = [f"run: {config.get('run_name')} ({config.get('benchmark')}) in {run_dir}",
             f"model: {doc['model']}; judges: {judges}"
             + (f"; subset: {json.dumps(config['subset'])}" if config.get("subset") else "")]
    records = latest_by_stage(run_dir)   # each store read once, here: the counts, totals and failures use it
    totals = _call_totals(config, records["generate"])
    rows, remaining = [], {}
    for stage, noun in CALL_STORES:
        statuses = Counter(str(r.get("status")) for r in records[stage].values())
        done = sum(statuses.values())
        total = totals.get(stage)
        if total is not None:
            remaining[noun] = max(0, total - statuses.get("ok", 0) - _answers(statuses))
        rows.append([stage, f"{done}/{total}" if total is not None else str(done),
                     ", ".join(f"{s} {n}" for s, n in sorted(statuses.items(), key=lambda x: (-x[1], x[0])))
                     or "-"])
    lines += ["calls:", table_text(["stage", "recorded", "by status"], rows)]
    lines += reuse_lines(records)   # answers taken from the response cache, per stage
    lines += failure_summary_lines(run_dir, None, records)
    failed = _failed_stage(run_dir)
    held = is_held(run_dir)
    state = doc["state"] if doc["state"] != "not aggregated" else "not aggregated yet"
    if doc.get("unfinished_stage") and not held and not failed:   # started, did not finish
        stage = doc["unfinished_stage"]
        state = f"interrupted: the {stage} stage did not finish ({_stage_words(doc['stages'][stage])})"
    lines.append("state: " + ("running now (a process holds the run directory)" if held else
                              f"the {failed[0]} stage failed: {failed[1]}" if failed else state))
    if doc["metrics"]:
        lines.append(run_text(doc).split("\n", 1)[1].rsplit("\n", 1)[0])
    lines += status_lines(run_dir)
    if (run_dir / JOURNAL_NAME).exists():
        lines += batches_text(run_dir).split("\n")[2:]
    lines.append("next: " + _next(doc, held, failed, remaining, run_dir))
    return "\n".join(lines)


def reuse_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    from evalnb.execution.cache.summary import reuse_summary, summary_line

    return [summary_line(stage, summary) for stage, stored in records.items()
            if (summary := reuse_summary(stored.values())) is not None]


def _stage_words(entry: Mapping[str, Any]) -> str:
    """``interrupted at cell 9 of 20``."""
    where = f" at cell {entry['cell']} of {entry['cells']}" if entry.get("cell") and entry.get("cells") else ""
    return f"{entry['state']}{where}"


def _answers(statuses: Mapping[str, int]) -> int:
    """Records that are an answer although not ``ok`` (empty, refused, out of context ...):
    anything not failed, which a resume does not redo."""
    return sum(n for s, n in statuses.items() if s and s != "ok" and not str(s).startswith("failed"))


def resume_command(run_dir: Path) -> str:
    """The one command that resumes ``run_dir``: ``evalnb run RUN_DIR/config.json``."""
    import shlex

    return f"evalnb run {shlex.quote(str(run_dir / 'config.json'))}"


def _next(doc: Mapping[str, Any], held: bool, failed: tuple[str, str] | None, remaining: Mapping[str, int],
          run_dir: Path) -> str:
    # The recorded parameters hold every --set option and the run's own output_dir, so this
    # command resumes this directory, whatever the parameters file and options that started it.
    again = f"`{resume_command(run_dir)}`"
    if held:
        return "wait for the process running it to end (or Ctrl-C where it runs), then look again"
    if failed:
        return f"fix the cause above, then {again} resumes from the {failed[0]} stage; nothing recorded is redone"
    if doc.get("unfinished_stage"):
        return (f"`evalnb run {run_dir / 'config.json'}` redoes the {doc['unfinished_stage']} stage (and the stages "
                "after it); nothing recorded is redone")
    if doc["state"] == "complete":
        return (f"nothing remains; `evalnb show {run_dir} ITEM` for one item, `evalnb compare {run_dir} OTHER_RUN ...` "
                "to compare")
    left = ", ".join(f"{n} {noun}" for noun, n in remaining.items() if n)
    return f"{again} resumes" + (f" and makes what remains ({left}, at most)" if left else
                                 ", makes no call, and aggregates")


def _call_totals(config: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, int]:
    """Calls each stage lists for the recorded parameters (none when the inputs cannot be read),
    the judge calls for ``answers`` (the generate store's latest records)."""
    try:
        from evalnb.pipeline.run import load_config, make_benchmark

        resolved, bench_class = load_config(dict(config))
        bench = make_benchmark(resolved, bench_class)
        return {"generate": len(bench.generation_calls()), "judge": len(bench.judge_calls(answers))}
    except Exception:   # noqa: BLE001 - moved inputs, an old record: the counts recorded are shown alone
        return {}


def _failed_stage(run_dir: Path) -> tuple[str, str] | None:
    """The last stage whose executed notebook holds an error, and its cause, unless a later
    stage has run since (the newer record says how the run stands)."""
    from evalnb.app.runs.notebooks import failure_cause, notebook_for

    latest: tuple[str, str] | None = None
    for stage in STAGES:
        record = run_dir / notebook_for(stage).name
        if not record.exists():
            continue
        text = record.read_text("utf-8", errors="replace")
        latest = (stage, failure_cause(record, RuntimeError("?"))) if '"output_type": "error"' in text else None
    return latest


def failure_summary_lines(run_dir: Path, stage: str | None,
                          records: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The failures by cause, per endpoint, of a stage (or of every stage), each cause counted
    with one example message (evalnb.evidence.failures): in `evalnb status` and at a
    stage's end. None when nothing failed. ``records``: the stages' latest records, when read."""
    from evalnb.evidence.failures import CALL_STAGES, failure_summary, summary_lines
    summary = failure_summary(run_dir, [stage] if stage else CALL_STAGES, records=records)
    if not summary:
        return []
    where = f"{stage}: failures" if stage else "failures (latest record of each call, by stage and endpoint)"
    return [f"{where}:", *summary_lines(summary)]


def stage_end_lines(run_dir: Path, stage: str) -> list[str]:
    """What the command says once a stage's notebook has finished: its failures by cause."""
    return failure_summary_lines(run_dir, stage)


def resumable_text(resumable: Any) -> str:
    """``{'generation': 2, 'judge_calls': 0}`` as ``2 generation``: what remains, in words."""
    if not isinstance(resumable, Mapping):
        return str(resumable)
    parts = [f"{n} {k.replace('_', ' ')}" for k, n in resumable.items() if n]
    return ", ".join(parts) or "nothing counted"


def interrupted_text(run_dir: Path) -> str:
    """The one line Ctrl-C ends ``evalnb run`` with: what the run's stores keep, and how to go on."""
    records = latest_by_stage(run_dir)
    kept = [f"{len(records[stage])} {noun}" for stage, noun in CALL_STORES]
    return (f"interrupted; {' and '.join(kept)} recorded in {run_dir} are kept (calls in flight are redone); "
            "run the same command again to resume")
