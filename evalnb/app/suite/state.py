"""A suite's state, read from disk alone: ``SUITE_DIR/suite.json`` and ``evalnb status SUITE_DIR``.

Each contestant's state comes from its run directory, whatever ran it (the suite, or
``evalnb run`` on its parameters file):

- ``not started``: nothing recorded yet;
- ``running``: a process holds the run directory (its lock), or the suite says it started it
  and the suite is still running;
- ``complete``: its aggregate stage says so;
- ``failed``: its last run under the suite ended with exit 1 (a stage failed), with the cause
  that run printed, and nothing newer was recorded since;
- ``resumable``: anything else (work remains: run the suite again to resume it).

The headline numbers are its scores.json's headline metrics (the partial ones are defined
before the run is complete); calls and tokens are its stores' latest records; ``spent_usd``
every attempt's reported usage at its prices (:func:`evalnb.execution.budget.run_spend`).
Nothing here writes, locks a run, or calls anything.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.core.types import CALL_STAGES
from evalnb.records.lock import LOCK_NAME
from evalnb.records.stores import latest_records, read_json_if_exists
from evalnb.execution.spend import run_spend
from evalnb.execution.budget_views import ledger_totals

SUITE_JSON = "suite.json"


def is_held(folder: Path) -> bool:
    """A process holds the folder's run lock (checked with a shared lock attempt: nothing written)."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)   # frees the shared lock if it was taken
    return False


def latest_by_stage(run_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Each call stage's latest record per key (stage -> key -> record), read only
    (:func:`evalnb.records.stores.latest_records`)."""
    return {stage: latest_records(run_dir / f"{stage}.jsonl") for stage in CALL_STAGES}


def run_row(run_dir: Path, outcome: Mapping[str, Any] | None, suite_running: bool) -> dict[str, Any]:
    """One contestant's state, numbers and cause (see the module docstring)."""
    status = read_json_if_exists(run_dir / "status.json")
    scores = read_json_if_exists(run_dir / "scores.json")
    started = (run_dir / "fingerprint.json").exists()
    cause = None
    if is_held(run_dir) or (suite_running and outcome and outcome.get("state") == "running"):
        state = "running"
    elif status and status.get("state") == "complete":
        state = "complete"
    elif outcome and outcome.get("exit") == 1 and (not status or status.get("updated_at", "") <= outcome["at"]):
        state, cause = "failed", outcome.get("cause")
    elif not started:
        state = "not started"
    else:
        state = "resumable"
        if outcome and outcome.get("cause"):
            cause = outcome["cause"]   # the line its last run ended with (the ceiling, batches waiting ...)
        elif status:
            cause = f"resumable work remains {status.get('resumable')}"
    called = [r for records in latest_by_stage(run_dir).values() for r in records.values() if r.get("attempts")]
    usage = [r.get("usage") or {} for r in called]
    headline = {name: m.get("value") for name, m in ((scores or {}).get("metrics") or {}).items()
                if m.get("headline")}
    return {"state": state, "cause": cause, "run_dir": str(run_dir), "headline": headline,
            "calls": len(called), "input_tokens": sum(u.get("input_tokens", 0) for u in usage),
            "output_tokens": sum(u.get("output_tokens", 0) for u in usage),
            "spent_usd": round(run_spend(run_dir), 6) if started else 0.0}


def suite_record(suite_dir: Path, names: Sequence[str], outcomes: Mapping[str, Mapping[str, Any]],
                 suite_running: bool, extra: Mapping[str, Any]) -> dict[str, Any]:
    """What suite.json holds: every contestant's row, the removed ones, and ``extra``
    (the suite's name and file, its leaderboard and budget)."""
    runs_dir = suite_dir / "runs"
    runs = {name: run_row(runs_dir / name, outcomes.get(name), suite_running) for name in names}
    removed = sorted(p.name for p in runs_dir.iterdir() if p.is_dir() and p.name not in runs) \
        if runs_dir.is_dir() else []
    counts: dict[str, int] = {}
    for row in runs.values():
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return {**extra, "suite_dir": str(suite_dir), "contestants": list(names), "states": counts,
            "runs": runs, "removed": {name: run_row(runs_dir / name, None, False) for name in removed}}


def status_text(suite_dir: Path, running: bool | None = None) -> str:
    """``evalnb status SUITE_DIR``: the suite's contestants as its directory shows them now
    (``running``: whether an `evalnb suite` runs it; by default, whether one holds its lock)."""
    recorded = read_json_if_exists(suite_dir / SUITE_JSON) or {}
    running = is_held(suite_dir) if running is None else running
    current = suite_record(suite_dir, recorded.get("contestants", []),
                           {n: r.get("outcome") or {} for n, r in recorded.get("runs", {}).items()}, running,
                           {k: recorded.get(k) for k in ("suite_name", "suite_file", "leaderboard", "budget")})
    lines = [f"suite: {current.get('suite_name')} ({suite_dir}; file {current.get('suite_file')})",
             f"state: {'running' if running else 'not running'}; "
             + ", ".join(f"{n} {s}" for s, n in sorted(current["states"].items()))]
    lines += _runs_table(current["runs"])
    for name, row in current["runs"].items():
        if row["cause"]:
            lines.append(f"{name}: {row['cause']}")
    if current["removed"]:
        lines.append("removed from the suite (kept on disk, not on the leaderboard): " + ", ".join(current["removed"]))
    board = current.get("leaderboard") or {}
    lines.append(f"leaderboard: {board.get('state', 'none')}"
                 + (f" in {board['dir']}" if board.get("dir") else "")
                 + (f"; missing {', '.join(board['missing'])}" if board.get("missing") else ""))
    budget = current.get("budget")
    if budget:
        spent = sum(r["spent_usd"] for r in (*current["runs"].values(), *current["removed"].values()))
        held = ledger_totals(suite_dir / "spend.json")
        lines.append(f"budget: ${spent:.4f} spent of ${budget['max_cost_usd']:.4f} over every run of the suite "
                     f"(removed ones included); ${held['in_doubt_usd']:.4f} in doubt, "
                     f"${held['reserved_usd']:.4f} reserved for calls in flight"
                     + (f"; {budget['stopped']}" if budget.get("stopped") else ""))
    return "\n".join(lines)


def _runs_table(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The contestants in the one table style: each headline metric as an estimate with its
    interval and its own n (from the run's scores.json), then what each run spent."""
    from evalnb.app.results import estimate_cells, metric_entries, table_text
    from evalnb.views.labels import CI, header

    entries = {name: {m["metric"]: m for m in metric_entries(read_json_if_exists(Path(row["run_dir"]) / "scores.json")
                                                            or {})} for name, row in runs.items()}
    words = {m: (e["label"] or m).split(":")[0] for found in entries.values() for m, e in found.items()}
    metrics = sorted(words)
    head = [header("contestant"), header("state"), *(t for m in metrics for t in (f"{words[m]} {CI}", header("n"))),
            header("calls"), header("input_tokens"), header("output_tokens"), header("spent_usd")]
    rows = [[name, row["state"], *(c for m in metrics for c in estimate_cells(entries[name].get(m))), str(row["calls"]),
             f"{row['input_tokens']:,}", f"{row['output_tokens']:,}", f"{row['spent_usd']:.4f}"]
            for name, row in runs.items()]
    return table_text(head, rows, indent="").splitlines()
