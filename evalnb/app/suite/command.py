"""``evalnb suite SUITE.yaml``: every contestant an ordinary run, then the leaderboard.

Each contestant runs as ``evalnb run SUITE_DIR/params/<run_name>.json`` would run it, in a
process of its own (:mod:`evalnb.app.suite.child`), ``parallel_runs`` at a time, into
``SUITE_DIR/runs/<run_name>/``: the same four stage notebooks, resumable and comparable, and
runnable alone with the usual commands. Its output goes to ``SUITE_DIR/logs/<run_name>.log``.
A run that exits 1 is reported with its cause and the others go on; complete runs are not
started again. The runs share their endpoints' quotas through the quota ledgers
(:mod:`evalnb.providers.ledger`) and, under ``budget``, one spending ledger
(``SUITE_DIR/spend.json``, :mod:`evalnb.execution.budget`); once the suite's ceiling has
stopped a run, no further contestant is started.

When every run is complete, ``SUITE_DIR/leaderboard/`` is the compare notebook over them, with
its HTML. Otherwise, once at least one is complete, it is a provisional leaderboard over those,
marked so and listing what is missing; with none complete there is none. (It is written when
the suite's runs have ended, not while others are still running: ``evalnb status SUITE_DIR``
shows every run's numbers meanwhile.) ``SUITE_DIR/suite.json`` holds each contestant's state.

Exit status: 0 every contestant complete; 2 resumable work remains (run the same command again);
1 the suite file or a contestant is refused before anything runs, a contestant failed, or the
leaderboard could not be written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from evalnb.app import output
from evalnb.app.live import LiveView
from evalnb.app.results import suite_results, suite_text
from evalnb.app.suite.config import Contestant, Suite, load_suite
from evalnb.app.suite.state import SUITE_JSON, status_text, suite_record
from evalnb.records import lock
from evalnb.records.manifest import utc_now
from evalnb.views.progress_channel import PROGRESS_ENV
from evalnb.records.stores import read_json_if_exists, write_json
from evalnb.execution.budget import open_shared_ledger
from evalnb.execution.budget_views import ledger_totals, refusals_since
from evalnb.evidence.failures import run_did_not_run

EXIT_OK, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2
LOGS_DIR = "logs"
LEADERBOARD_DIR = "leaderboard"
# evalnb run's progress lines: not the line a run ends with
PROGRESS = re.compile(r"^evalnb: ((generate|judge|aggregate|report) -> |run (complete|incomplete|error): )")


@dataclass
class Child:
    contestant: Contestant
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_start: int


def suite_command(path: Path, sets: Sequence[str]) -> int:
    suite = load_suite(path, sets)   # everything checked before anything is written
    for contestant in suite.contestants:   # the runs' own terminals are their logs: say them here
        output.warnings(contestant.benchmark.warnings, f"{contestant.name}: ")
    held = lock.acquire(suite.dir)   # one `evalnb suite` per suite directory at a time
    # Each contestant's kernel writes its progress to a file of its own here; one view draws them all.
    progress = Path(tempfile.mkdtemp(prefix="evalnb-suite-progress-"))
    view = LiveView() if output.SETTINGS.verbosity > output.QUIET else None
    _VIEW[:] = [view.start()] if view else []
    output.SETTINGS.on_interrupt.append(lambda: f"interrupted; the suite's runs stopped, each keeping what it "
                                                f"recorded ({suite.dir}); run the same command again to resume")
    try:
        code = _run_suite(suite, progress)
    finally:
        if view is not None:
            view.stop()
        _VIEW.clear()
        shutil.rmtree(progress, ignore_errors=True)
        held.release()
    doc = suite_results(suite.dir, read_json_if_exists(suite.dir / SUITE_JSON) or {})
    output.results(suite_text(doc), doc)
    return code


_VIEW: list[LiveView] = []   # the suite's progress view while it runs (none with -q)


def _say(line: str) -> None:
    """A line of the suite's own, drawn clear of its runs' progress bars."""
    if _VIEW:
        _VIEW[0].message(line)
    else:
        output.say(line)


def _run_suite(suite: Suite, progress: Path) -> int:
    started = utc_now()
    for contestant in suite.contestants:
        write_json(suite.params_file(contestant), contestant.params)
    if suite.max_cost_usd is not None:   # every run of the suite on disk counts, removed ones too
        open_shared_ledger(suite.ledger, suite.max_cost_usd,
                           [c.dir for c in suite.contestants] + [suite.runs_dir / n for n in suite.removed()])
    previous = read_json_if_exists(suite.dir / SUITE_JSON) or {}
    outcomes: dict[str, dict[str, Any]] = {n: r["outcome"] for n, r in previous.get("runs", {}).items()
                                           if r.get("outcome")}
    rows = _record(suite, outcomes, running=True)["runs"]
    todo = deque(c for c in suite.contestants if rows[c.name]["state"] != "complete")
    done = len(suite.contestants) - len(todo)
    _say(f"evalnb suite: {suite.name}: {len(suite.contestants)} contestants, {done} complete, {len(todo)} to run "
          f"({suite.parallel_runs} at a time) in {suite.dir}")
    for name in suite.removed():
        _say(f"evalnb suite: {name}: no longer a contestant (kept on disk, left off the leaderboard)")
    children: dict[int, Child] = {}
    ceiling_reached = False
    try:
        while todo or children:
            while todo and len(children) < suite.parallel_runs and not ceiling_reached:
                child = _start(suite, todo.popleft(), progress)
                children[child.process.pid] = child
                outcomes[child.contestant.name] = {"state": "running", "at": utc_now()}
                _record(suite, outcomes, running=True)
            if not children:
                break
            pid, status = os.wait()   # the main thread waits: the children die with it (suite_child)
            if pid not in children:
                continue
            child = children.pop(pid)
            child.process.returncode = code = os.waitstatus_to_exitcode(status)
            outcomes[child.contestant.name] = _outcome(child, code, suite.file)
            _say(f"evalnb suite: {child.contestant.name}: exit {code}: {outcomes[child.contestant.name]['cause']}")
            if code == EXIT_INCOMPLETE and suite.max_cost_usd is not None and \
                    refusals_since(suite.ledger, started):
                ceiling_reached = True   # the suite's ceiling: a new run would be refused at its first call
            _record(suite, outcomes, running=True)
    except BaseException:
        for child in children.values():   # Ctrl-C: the runs stop (resumable) and say so in suite.json
            child.process.terminate()
        for child in children.values():
            child.process.wait()
            outcomes[child.contestant.name] = _outcome(child, child.process.returncode, suite.file)
        _record(suite, outcomes, running=False)
        raise
    finally:
        for child in children.values():
            child.log.close()
    for contestant in todo:   # never started: the suite's ceiling was reached
        outcomes[contestant.name] = {"state": "exited", "exit": EXIT_INCOMPLETE, "at": utc_now(),
                                     "cause": "not started: the suite's spending ceiling was reached"}
    rows = _record(suite, outcomes, running=True)["runs"]
    board = write_leaderboard(suite, rows)
    record = _record(suite, outcomes, running=False, leaderboard=board)
    return _finish(suite, record, board, started)


def _start(suite: Suite, contestant: Contestant, progress: Path) -> Child:
    logs = suite.dir / LOGS_DIR
    logs.mkdir(parents=True, exist_ok=True)
    log = (logs / f"{contestant.name}.log").open("ab")
    start = log.seek(0, os.SEEK_END)
    log.write(f"\n=== evalnb suite {suite.name}: {contestant.name} at {utc_now()}\n".encode())
    log.flush()
    channel = progress / f"{contestant.name}.jsonl"
    if _VIEW:
        _VIEW[0].watch(channel, contestant.name)
    process = _evalnb(["run", str(suite.params_file(contestant))], log, {PROGRESS_ENV: str(channel)})
    _say(f"evalnb suite: {contestant.name}: started (log {logs / (contestant.name + '.log')})")
    return Child(contestant, process, log, start)


def _evalnb(argv: list[str], log: IO[bytes], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``evalnb ARGV`` in a process of its own that dies with this one (evalnb.app.suite.child)."""
    return subprocess.Popen([sys.executable, "-m", "evalnb.app.suite.child", str(os.getpid()), *argv],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})


def interrupted_cause(code: int, suite_file: Path) -> str | None:
    """The cause of a run stopped by a signal (a negative exit status) or by Ctrl-C (130):
    interrupted, resumable, and the command that resumes it; None for any other exit."""
    import shlex
    import signal

    if code >= 0 and code != output.EXIT_INTERRUPTED:
        return None
    how = f"by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else "(Ctrl-C)"
    return (f"interrupted {how}: what it recorded is kept; `evalnb suite {shlex.quote(str(suite_file))}` "
            "resumes it")


def _outcome(child: Child, code: int, suite_file: Path) -> dict[str, Any]:
    """How a run's process ended, with the last line it said about it (an interrupted run:
    that it was interrupted, and how to resume, never a bare signal number)."""
    child.log.close()
    path = Path(child.log.name)
    with path.open("rb") as f:
        f.seek(child.log_start)
        text = f.read().decode("utf-8", "replace")
    said = [line.strip() for line in re.split(r"[\r\n]", text)
            if line.startswith("evalnb: ") and not PROGRESS.match(line)]
    cause = interrupted_cause(code, suite_file) or (
        said[-1].removeprefix("evalnb: ") if said else ("run complete" if code == EXIT_OK else f"exit {code}; see {path}"))
    return {"state": "exited", "exit": code, "cause": cause, "at": utc_now()}


def _record(suite: Suite, outcomes: Mapping[str, Mapping[str, Any]], *, running: bool,
            leaderboard: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """suite.json, as the directory shows the suite now."""
    previous = read_json_if_exists(suite.dir / SUITE_JSON) or {}
    extra = {"suite_name": suite.name, "suite_file": str(suite.file), "parallel_runs": suite.parallel_runs,
             "leaderboard": leaderboard or previous.get("leaderboard") or {"state": "none"},
             "budget": _budget(suite), "updated_at": utc_now()}
    record = suite_record(suite.dir, [c.name for c in suite.contestants], outcomes, running, extra)
    for name, outcome in outcomes.items():
        if name in record["runs"]:
            record["runs"][name]["outcome"] = dict(outcome)
    write_json(suite.dir / SUITE_JSON, record)
    return record


def _budget(suite: Suite) -> dict[str, Any] | None:
    if suite.max_cost_usd is None:
        return None
    return {"max_cost_usd": suite.max_cost_usd, "ledger": str(suite.ledger), **ledger_totals(suite.ledger)}


def write_leaderboard(suite: Suite, rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The compare notebook over the complete runs: final, provisional, or none."""
    complete = [c for c in suite.contestants if rows[c.name]["state"] == "complete"]
    missing = [f"{c.name} ({rows[c.name]['state']})" for c in suite.contestants if rows[c.name]["state"] != "complete"]
    for contestant, why in [(c, run_did_not_run(c.dir)) for c in complete]:   # left off, listed as such
        if why:
            complete.remove(contestant)
            missing.append(f"{contestant.name} (did not run: {why})")
            _say(f"evalnb suite: {why}")
    out = suite.dir / LEADERBOARD_DIR
    shutil.rmtree(out, ignore_errors=True)   # derived from the runs: an older board would mislead
    if not complete:
        return {"state": "none", "missing": missing}
    info = {"name": suite.name, "provisional": bool(missing), "complete": [c.name for c in complete],
            "missing": missing}
    # `evalnb compare --params` on a file naming the runs, the board and what it is (open_compare's suite=)
    params = suite.dir / "params" / "leaderboard.json"
    write_json(params, {"runs": [str(c.dir) for c in complete], "out": str(out), "suite": info})
    logs = suite.dir / LOGS_DIR
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "leaderboard.log").open("ab") as log:
        code = _evalnb(["compare", "--params", str(params)], log).wait()
    state = "failed" if code != EXIT_OK else "provisional" if missing else "final"
    _say(f"evalnb suite: leaderboard ({state}) in {out}" + ("" if code == EXIT_OK else
                                                             f"; see {logs / 'leaderboard.log'}"))
    return {"state": state, "dir": str(out), "runs": info["complete"], "missing": missing}


def _finish(suite: Suite, record: Mapping[str, Any], board: Mapping[str, Any], started: str) -> int:
    output.say(status_text(suite.dir, running=False), level=output.VERBOSE)   # the results table follows
    states = [row["state"] for row in record["runs"].values()]
    if "failed" in states or board.get("state") == "failed":
        return EXIT_ERROR
    if all(s == "complete" for s in states):
        return EXIT_OK
    budget = record.get("budget")
    if budget and refusals_since(suite.ledger, started):
        doubt = f" (+${budget['in_doubt_usd']:.4f} in doubt)" if budget["in_doubt_usd"] else ""
        _say(f"evalnb suite: spending ceiling of suite {suite.name} reached: ${budget['spent_usd']:.4f} spent so "
              f"far{doubt}, ${budget['reserved_usd']:.4f} reserved, ceiling ${budget['max_cost_usd']:.4f}; raise "
              f"budget.max_cost_usd in {suite.file} and run the same command to continue")
    else:
        _say(f"evalnb suite: resumable work remains; run the same command again to resume ({suite.file})")
    return EXIT_INCOMPLETE
