"""Soak evalnb against the fault-injecting fake server; ``make soak``, not part of ``make test``.

    python bench/soak.py [--tasks 200] [--kills 20] [--seed 0] [--keep]

Four phases, each with its own fake server (``python -m tests.fakeserver``) in its own process,
so that each phase's ``/_stats`` counts only its own calls:

1. reference:   ~200 WildTrace tasks x (1 answer + 3 judges: openai, anthropic, gemini) with no
                fault: the numbers to match (the soak stops here if this run fails).
2. faults:      the same tasks into another directory at a 20% fault rate of every kind;
                ``evalnb run`` again until it exits 0.
3. kills:       on a fresh directory (fewer faults), ``evalnb run`` is SIGKILLed (its whole
                process group) at random moments, each kill followed by a resume; then it
                runs to completion. A stage kernel left alive after a kill is a failure.
4. concurrent:  two ``evalnb run`` started at once on one directory: one must be refused (exit 1).

It prints faults injected by kind, reruns needed, records lost and duplicated, successful
calls made twice, whether the final numbers equal the fault-free run's, kills survived, and
whether the second concurrent run was refused; it exits 1 when any of them is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EVALNB = Path(sys.executable).parent / "evalnb"   # the CLI of the environment running this script
LATENCY = 0.05              # seconds per fake reply
CONCURRENCY = 16
CALL_TIMEOUT = 2.0          # per attempt: the "hang" fault (TIMEOUT_HANG) is a timeout
TIMEOUT_HANG = 30.0
FAULT_HINT = 0.3            # seconds a 429-with-hint asks for
FAULT_RATE = 0.2
KILL_FAULT_RATE = 0.05
MAX_RUNS = 8                # evalnb runs allowed to complete the fault phase
RUN_TIMEOUT = 600.0         # one evalnb run
ORPHAN_GRACE = 3.0          # seconds a killed run's kernel gets to die with it
CAPS = {"en": 20_000, "cjk": 8_000}
SCORE_FIELDS = ("scored_overall", "all_tasks_overall", "overall")
JUDGES = ("openai", "anthropic", "gemini")
FINAL_GENERATION = frozenset({"ok", "refused", "empty", "out_of_context", "failed_permanent"})


# --- workload -----------------------------------------------------------------------------------

def document(rng: random.Random, vocab: list[str], chars: int, title: str) -> str:
    words = rng.choices(vocab, k=chars // 5 + 16)
    sentences = (" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, len(words), 12))
    return (title + "\n\n" + " ".join(sentences))[:chars]


def chinese(rng: random.Random, chars: int, title: str) -> str:
    """Over 20 CJK characters in the first 4,000: the cjk cap applies."""
    return (title + "\n\n" + "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(chars)))[:chars]


def make_workload(root: Path, tasks: int, seed: int) -> tuple[Path, Path]:
    """Seeded WildTrace data in the sample's format (``evalnb/data/wildtrace``): a few documents
    over the cap (out of context), a few Chinese ones, rubrics of varying points so that a task
    lost or zeroed changes the overall score."""
    rng = random.Random(seed)
    syllables = "ta ri mon el ka vor sen di lu pra ne tho gar is ben qua lo fe dra min os tel".split()
    vocab = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(3000)})
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    items = []
    for i in range(tasks):
        name, title = f"doc_{i:04d}.txt", f"Document {i:04d}"
        if i % 40 == 7:
            text, language = document(rng, vocab, CAPS["en"] + 4000, title), "en"   # out of context
        elif i % 50 == 3:
            text, language = chinese(rng, rng.randint(2000, 6000), title), "zh"
        else:
            text, language = document(rng, vocab, rng.randint(3000, 12000), title), "en"
        (corpus / name).write_text(text, "utf-8")
        points = rng.choice(([100], [60, 40], [40, 35, 25], [30, 30, 20, 10], [50, 30]))
        items.append({
            "task_id": f"soak-{i:04d}", "question_text": f"What does document {i:04d} say about "
                                                         f"{rng.choice(vocab)}?",
            "corpus_file": name, "language": language,
            "ground_truth": {"answer": f"Fact {i}.", "supporting_clues": [],
                             "scoring_rubric": [{"points": p, "correct_criterion": f"States fact {i}.{j}."}
                                                for j, p in enumerate(points)]},
        })
    data = root / "tasks.json"
    data.write_text(json.dumps({"benchmark": "wildtrace-soak", "version": "0.1", "tasks": items}), "utf-8")
    return data, corpus


def write_params(path: Path, url: str, out: Path, data: Path, corpus: Path) -> Path:
    def judge(provider: str) -> dict[str, Any]:
        return {"provider": provider, "name": f"judge-{provider}", "timeout": CALL_TIMEOUT,
                "base_url": f"{url}/v1" if provider == "openai" else url}
    params = {
        "benchmark": "wildtrace", "run_name": "soak", "output_dir": str(out),
        "data": str(data), "corpus": str(corpus), "concurrency": CONCURRENCY,
        "model": {"provider": "openai", "name": "soak-model", "base_url": f"{url}/v1",
                  "caps": CAPS, "timeout": CALL_TIMEOUT},
        "judges": [judge(p) for p in JUDGES],
        "retry": {"max_retries": 5, "base_delay": 0.05, "max_delay": 0.5, "retry_after_cap": 1.0},
    }
    path.write_text(json.dumps(params, indent=2), "utf-8")   # JSON is YAML
    return path


# --- the fake server, out of process -----------------------------------------------------------

@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/_stats", timeout=30) as response:
            return dict(json.loads(response.read()))


@contextmanager
def fake_server(log: Path, fault_rate: float, seed: int, latency: float = LATENCY) -> Iterator[Server]:
    argv = [sys.executable, "-m", "tests.fakeserver", "--latency", str(latency),
            "--fault-rate", str(fault_rate), "--fault-seed", str(seed),
            "--timeout-hang", str(TIMEOUT_HANG), "--fault-hint", str(FAULT_HINT)]
    with log.open("w") as err:
        process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
        yield Server(line.split(" ", 1)[1], process)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


# --- running evalnb ----------------------------------------------------------------------------

def start_run(params: Path, log: Path) -> subprocess.Popen[bytes]:
    """``evalnb run`` as the leader of its own process group, so one killpg reaches everything
    it started in that group (the stage kernel makes a session of its own: see orphans())."""
    with log.open("ab") as out:
        return subprocess.Popen([str(EVALNB), "run", str(params)], cwd=params.parent,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def last_line(log: Path) -> str:
    lines = [line for line in log.read_text("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_to_end(params: Path, log: Path) -> tuple[int, float]:
    started = time.monotonic()
    process = start_run(params, log)
    try:
        code = process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
    return code, time.monotonic() - started


def run_until_complete(params: Path, log: Path, label: str) -> list[int]:
    """Rerun until exit 0 (at most MAX_RUNS runs); the exit codes in order."""
    codes: list[int] = []
    while len(codes) < MAX_RUNS and (not codes or codes[-1] != 0):
        code, seconds = run_to_end(params, log)
        codes.append(code)
        print(f"  {label} run {len(codes)}: exit {code} in {seconds:.0f} s  [{last_line(log)}]", flush=True)
    return codes


# --- orphan kernels ----------------------------------------------------------------------------

def processes_in(directory: Path) -> list[int]:
    """Live processes of a run: working in its run directory, or carrying the lock token its
    killed evalnb wrote there (evalnb hands it to its kernel, which moves to the run
    directory only at its first stage). A run's kernel lives in a session of its own that a
    killpg of evalnb misses; evalnb itself is dead and reaped by the time this is asked."""
    try:
        token = json.loads((directory / ".evalnb.lock").read_text()).get("token")
    except (OSError, ValueError):
        token = None
    marker = f"EVALNB_RUN_LOCK_TOKEN={token}\0".encode() if token else None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ours = os.readlink(entry / "cwd") == str(directory) or (
                marker is not None and marker in (entry / "environ").read_bytes())
            if not ours:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:   # gone, or not ours to look at
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def orphans(run_dir: Path) -> list[int]:
    """Kernels of a killed run still alive after a grace period; killed here (by pid: they
    are ours) so that they cannot disturb what follows, and reported as failures."""
    deadline = time.monotonic() + ORPHAN_GRACE
    alive = processes_in(run_dir)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = processes_in(run_dir)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return alive


# --- reading a run directory -------------------------------------------------------------------

@dataclass
class StoreCheck:
    lost: list[str] = field(default_factory=list)          # calls with no final record
    duplicated: list[str] = field(default_factory=list)    # keys with more than one final record
    corrupt_lines: int = 0
    statuses: Counter[str] = field(default_factory=Counter)


def read_store(path: Path, check: StoreCheck) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text("utf-8").splitlines() if path.exists() else []:
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            check.corrupt_lines += 1
    return records


def check_stores(run_dir: Path, task_ids: list[str]) -> StoreCheck:
    """Lost: a task without a final generation record, or an ok answer without an ok verdict
    from every judge. Duplicated: more than one final record for one key (the stores are
    append-only: failed records before a final one are legitimate)."""
    check = StoreCheck()
    generated = read_store(run_dir / "generate.jsonl", check)
    judged = read_store(run_dir / "judge.jsonl", check)
    finals: Counter[str] = Counter(r["key"] for r in generated if r.get("status") in FINAL_GENERATION)
    finals.update(r["key"] for r in judged if r.get("status") == "ok")
    check.duplicated = sorted(key for key, n in finals.items() if n > 1)
    latest = {r["key"]: r for r in generated}
    check.statuses = Counter(latest[t]["status"] if t in latest else "missing" for t in task_ids)
    ok_judged = {r["key"] for r in judged if r.get("status") == "ok"}
    for task in task_ids:
        status = latest[task]["status"] if task in latest else None
        if status not in FINAL_GENERATION:
            check.lost.append(task)
        elif status == "ok":
            check.lost += [k for i in range(1, len(JUDGES) + 1)
                           if (k := f"{task}::judge{i}") not in ok_judged]
    return check


def numbers(run_dir: Path) -> tuple[Any, ...] | None:
    path = run_dir / "scores.json"
    if not path.exists():
        return None
    scores = json.loads(path.read_text("utf-8"))
    return tuple(scores.get(name) for name in SCORE_FIELDS)


def paid_twice(stats: dict[str, Any]) -> int:
    """Successful replies beyond the first for one call identity."""
    return sum(n - 1 for n in stats["successes"].values() if n > 1)


# --- phases ------------------------------------------------------------------------------------

@dataclass
class Report:
    lines: list[tuple[str, str, bool]] = field(default_factory=list)   # (what, figure, as required)

    def add(self, what: str, figure: object, good: bool) -> None:
        self.lines.append((what, str(figure), good))

    def print(self) -> bool:
        width = max(len(w) for w, _, _ in self.lines)
        print("\n=== soak results ===")
        for what, figure, good in self.lines:
            print(f"{'  ' if good else '!!'} {what.ljust(width)}  {figure}")
        return all(good for _, _, good in self.lines)


@dataclass
class Workspace:
    root: Path
    data: Path
    corpus: Path
    task_ids: list[str]
    seed: int

    def params(self, name: str, url: str) -> tuple[Path, Path]:
        out = self.root / name
        return write_params(self.root / f"{name}.json", url, out, self.data, self.corpus), out

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"


def report_store(report: Report, label: str, check: StoreCheck) -> None:
    report.add(f"{label}: records lost", len(check.lost), not check.lost)
    report.add(f"{label}: records duplicated", len(check.duplicated), not check.duplicated)
    if check.corrupt_lines:
        report.add(f"{label}: corrupt store lines", check.corrupt_lines, False)


def fault_phase(ws: Workspace, report: Report) -> tuple[Any, ...] | None:
    print(f"[2/4] faults: {len(ws.task_ids)} tasks, fault rate {FAULT_RATE}, every kind", flush=True)
    with fake_server(ws.log("server-faults"), FAULT_RATE, ws.seed) as server:
        params, out = ws.params("faults", server.url)
        codes = run_until_complete(params, ws.log("faults"), "faults")
        stats = server.stats()
    faults = stats["faults"]
    report.add("faults injected (fault phase)", f"{sum(faults.values())} " + json.dumps(dict(sorted(faults.items()))),
               set(faults) == set(stats["fault_kinds"]))
    report.add("reruns needed", f"{len(codes) - 1} (exit codes {codes})", codes[-1] == 0)
    check = check_stores(out, ws.task_ids)
    report_store(report, "faults", check)
    report.add("faults: final statuses", json.dumps(dict(check.statuses)), "empty" not in check.statuses)
    twice = paid_twice(stats)
    report.add("faults: successful calls made twice", twice, twice == 0)
    return numbers(out)


def reference_phase(ws: Workspace, report: Report) -> tuple[tuple[Any, ...] | None, float]:
    print(f"[1/4] reference: {len(ws.task_ids)} tasks, no fault", flush=True)
    with fake_server(ws.log("server-reference"), 0.0, ws.seed) as server:
        params, out = ws.params("reference", server.url)
        code, seconds = run_to_end(params, ws.log("reference"))
        stats = server.stats()
    print(f"  reference: exit {code} in {seconds:.0f} s  [{last_line(ws.log('reference'))}]", flush=True)
    check = check_stores(out, ws.task_ids)
    ok = code == 0 and not check.lost and not check.duplicated and paid_twice(stats) == 0
    report.add("reference run", f"exit {code}, {seconds:.0f} s, statuses {json.dumps(dict(check.statuses))}", ok)
    return (numbers(out) if ok else None), seconds


@dataclass
class KillAttempt:
    killed: bool
    exit_code: int | None = None   # when the run ended by itself first
    seconds: float = 0.0           # how long it ran, to its kill or its own end
    orphans: int = 0               # stage kernels alive after the grace period
    mid_calls: bool = False        # records were being appended: calls were in flight


def kill_once(params: Path, out: Path, log: Path, rng: random.Random, run_seconds: float,
              work_left: bool) -> KillAttempt:
    """Start a run (a resume after the first) and SIGKILL its process group at a random moment:
    while calls remain to be made, three times in four as soon as the stores have grown by a
    random number of records (so that calls are in flight); otherwise at a random time within
    ``run_seconds``, the length of such a run (kernel start, any stage, aggregation, the report)."""
    stores = [out / "generate.jsonl", out / "judge.jsonl"]

    def records() -> int:
        return sum(p.read_bytes().count(b"\n") for p in stores if p.exists())

    before = records()
    grow_to = before + rng.randint(1, 20) if work_left and rng.random() < 0.75 else None
    process = start_run(params, log)
    started = time.monotonic()
    deadline = started + (RUN_TIMEOUT if grow_to else rng.uniform(0.05, 0.95) * run_seconds)
    while process.poll() is None and time.monotonic() < deadline:
        if grow_to is not None and records() >= grow_to:
            break
        time.sleep(0.02)
    if process.poll() is not None:
        return KillAttempt(False, exit_code=process.returncode, seconds=time.monotonic() - started)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return KillAttempt(True, orphans=len(orphans(out)), mid_calls=records() > before,
                       seconds=time.monotonic() - started)


def kill_phase(ws: Workspace, report: Report, kills: int, run_seconds: float) -> tuple[Any, ...] | None:
    print(f"[3/4] kills: {kills} SIGKILLs at random moments, fault rate {KILL_FAULT_RATE}", flush=True)
    rng = random.Random(ws.seed + 1)
    log = ws.log("kills")
    attempts: list[KillAttempt] = []
    with fake_server(ws.log("server-kills"), KILL_FAULT_RATE, ws.seed + 1) as server:
        params, out = ws.params("kills", server.url)
        span = run_seconds   # a whole run's length, until a run ends by itself sooner
        while sum(a.killed for a in attempts) < kills and len(attempts) < 3 * kills:
            work_left = bool(check_stores(out, ws.task_ids).lost)
            attempts.append(kill_once(params, out, log, rng, span, work_left))
            if not attempts[-1].killed and attempts[-1].exit_code == 0:
                # A finished run's rerun does no work and exits in a second or two:
                # later kills are drawn within that, so they land instead of missing.
                span = min(span, attempts[-1].seconds)
        codes = run_until_complete(params, log, "after kills")
        stats = server.stats()
    killed = sum(a.killed for a in attempts)
    orphaned = sum(a.orphans for a in attempts)
    # A kill is survived when it left no kernel behind and the resume after it did not end by
    # itself in an error (exit 1); the last kill's resume is the run to completion.
    resumes = [a.exit_code for a in attempts[1:]] + [codes[0]]
    failed_resumes = sum(1 for a, after in zip(attempts, resumes) if a.killed and after == 1)
    mid_calls = sum(a.mid_calls for a in attempts)
    print(f"  {killed} kills in {len(attempts)} runs ({mid_calls} while records were being written); "
          f"{orphaned} orphan kernels; {failed_resumes} resumes failed", flush=True)
    check = check_stores(out, ws.task_ids)
    complete = codes[-1] == 0 and not check.lost
    survived = sum(1 for a, after in zip(attempts, resumes) if a.killed and after != 1 and not a.orphans)
    report.add("kills survived", f"{survived}/{killed} ({mid_calls} mid-calls; orphan kernels left: {orphaned}, "
               f"failed resumes: {failed_resumes}, completed afterwards: {complete}, exit codes {codes})",
               survived == killed == kills and complete)
    report_store(report, "kills", check)
    twice = paid_twice(stats)
    report.add("kills: successful calls made twice", f"{twice} (calls in flight at {killed} kills: "
               f"at most {CONCURRENCY * killed})", twice <= CONCURRENCY * killed)
    return numbers(out)


def concurrent_phase(ws: Workspace, report: Report) -> None:
    print("[4/4] concurrent: two runs started at once on one directory", flush=True)
    with fake_server(ws.log("server-concurrent"), 0.0, ws.seed) as server:
        params, out = ws.params("concurrent", server.url)
        logs = [ws.log("concurrent-a"), ws.log("concurrent-b")]
        processes = [start_run(params, log) for log in logs]
        codes = [p.wait(timeout=RUN_TIMEOUT) for p in processes]
        stats = server.stats()
    refused = sorted(codes) == [0, 1]
    why = last_line(logs[codes.index(1)]) if refused else f"exit codes {codes}"
    report.add("second concurrent run refused", f"{refused} ({why})", refused)
    twice = paid_twice(stats)
    report.add("concurrent: successful calls made twice", twice, twice == 0)
    report_store(report, "concurrent", check_stores(out, ws.task_ids))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (kept anyway on failure)")
    args = parser.parse_args(argv)
    if not EVALNB.exists():
        parser.error(f"{EVALNB} not found: run with the project environment's python (make soak)")

    root = Path(tempfile.mkdtemp(prefix="evalnb-soak-")).resolve()
    data, corpus = make_workload(root, args.tasks, args.seed)
    ws = Workspace(root, data, corpus, [f"soak-{i:04d}" for i in range(args.tasks)], args.seed)
    print(f"soak: work directory {root}", flush=True)
    started = time.monotonic()
    report = Report()
    reference, run_seconds = reference_phase(ws, report)
    if reference is None:   # nothing to compare with: the setup or evalnb itself is broken
        report.print()
        print(f"soak: the fault-free run failed; see {ws.log('reference')}")
        return 1
    faulty = fault_phase(ws, report)
    killed = kill_phase(ws, report, args.kills, run_seconds)
    concurrent_phase(ws, report)
    for label, got in (("faults", faulty), ("kills", killed)):
        report.add(f"{label}: final numbers equal the fault-free run's",
                   f"{got == reference} ({dict(zip(SCORE_FIELDS, got or ()))})",
                   got == reference and reference is not None and None not in reference)
    report.add("soak duration", f"{time.monotonic() - started:.0f} s", True)
    ok = report.print()
    if ok and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"soak: records and logs kept in {root}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
