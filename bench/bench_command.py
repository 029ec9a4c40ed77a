"""The whole `evalnb run` command against a bare SDK loop and evalnb in-process.

    python bench/bench_command.py                  # everything, 3 repeats (make bench runs it)
    python bench/bench_command.py --quick          # everything, 1 repeat
    python bench/bench_command.py --only command startup --repeat 1

Same seeded WildTrace workload (481 tasks x (1 answer + 3 judges) = 1,924 calls) against the
fake server in its own process (``--serve``: tests.fakeserver with an arrival log, and
optionally a tokens-per-window quota). Each client is a fresh subprocess, timed from launch to
exit by this parent:

* bare     a bare ``AsyncOpenAI`` + semaphore loop making the same calls;
* inproc   ``import evalnb``; open_run, generate, judge, aggregate (one process);
* command  ``.venv/bin/evalnb run params.json`` (one kernel running the four stage notebooks, HTML, manifest).

CPU = ``RUSAGE_CHILDREN`` delta around each waited subprocess: the client and every
descendant it reaped (the run's kernel). To check that evalnb does reap them, the process
tree is also sampled every 50 ms from /proc (summed VmRSS: the peak RSS; utime+stime per
process: a lower bound the rusage delta must exceed; any process still alive after the client
exited is reported). First request = the server's earliest arrival minus the launch time; tail
= exit minus the last reply. Nothing in evalnb is patched.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "last_results.json"
EVALNB = REPO / ".venv" / "bin" / "evalnb"
JUDGES = 3
BIG_DOC_CHARS = 2_850_000
CAPS = {"en": BIG_DOC_CHARS, "cjk": 850_000}   # len == cap is in scope: every document is sent
CLIENTS = ("bare", "inproc", "command")
LABELS = {"bare": "bare AsyncOpenAI + semaphore", "inproc": "evalnb in-process",
          "command": "`evalnb run`"}
TARGET_RATIO = {("command", 16): 0.80, ("command", 64): 0.55, ("inproc", 16): 0.90, ("inproc", 64): 0.75}
TARGET_FIRST_REQUEST_S = 2.0     # after launching `evalnb run`
TARGET_IMPORT_S = 0.3
TARGET_PACED_OVER_MIN = 1.10     # paced wall within 10 % of the quota-bound minimum
SECTIONS = ("bare", "inproc", "command", "big", "pacing", "startup")


# --- the server (own process) -------------------------------------------------------------------

def serve(spec: dict[str, Any]) -> None:
    """tests.fakeserver with its CLI's responder, logging every request's arrival (wall clock),
    model, tokens (as the server counts them, = the usage it reports) and status; ``GET /_stats``
    returns the log and empties it. With ``quota``: input tokens per model over a sliding window,
    429 (no Retry-After) when a request would exceed it."""
    sys.path.append(str(REPO))   # after PYTHONPATH: a snapshot of evalnb may be measured
    import functools
    from collections import deque

    from tests import fakeserver as fs

    quota = spec.get("quota")

    class LoggingServer(fs.FakeLLMServer):
        log: list[list[Any]] = []
        windows: dict[str, deque[tuple[float, int]]] = {}

        def stats(self) -> dict[str, Any]:
            with self._lock:
                out, self.log = self.log, []
            return {"log": out}

    server = LoggingServer(latency=spec["latency"])
    server.keep_requests = False
    reply = functools.partial(fs.default_benchmark_responder, reply_text=fs.DEFAULT_REPLY_TEXT)

    def responder(req: fs.RecordedRequest) -> fs.Reply:   # on arrival, before the latency
        tokens = fs._estimate_tokens(fs._messages_prompt(req.body)[1])
        status = 200
        if quota:
            window = server.windows.setdefault(req.model, deque())
            while window and window[0][0] <= req.time - quota["window"]:
                window.popleft()
            if sum(n for _, n in window) + tokens > quota["budget"]:
                status = 429
            else:
                window.append((req.time, tokens))
        with server._lock:
            server.log.append([time.time(), req.model, tokens, status])
        return fs.Error(429, "Rate limit reached: input tokens per window", code="rate_limit_exceeded") \
            if status == 429 else reply(req)

    server.responder = responder
    asyncio.run(fs._serve_cli(server))


def start_server(latency: float, log: Path, quota: dict[str, Any] | None = None
                 ) -> tuple[subprocess.Popen[str], str]:
    spec = json.dumps({"latency": latency, "quota": quota})
    server = subprocess.Popen([sys.executable, __file__, "--serve", spec], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = server.stdout.readline().strip()   # type: ignore[union-attr]
    if not line.startswith("READY "):
        server.terminate()
        raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
    return server, line.split(" ", 1)[1]


def drain(url: str) -> list[list[Any]]:
    with urllib.request.urlopen(url + "/_stats", timeout=30) as reply:
        log: list[list[Any]] = json.load(reply)["log"]
    return log


# --- workers (own process) ------------------------------------------------------------------------

def bare_worker(spec: dict[str, Any]) -> None:
    """Each document + question, then three short judge prompts per task, at most C in flight."""
    import openai

    C, docs = spec["concurrency"], sorted(Path(spec["corpus"]).iterdir())

    async def main() -> None:
        http = openai.DefaultAioHttpClient() if spec["transport"] == "aiohttp" else None
        client = openai.AsyncOpenAI(base_url=spec["url"] + "/v1", api_key="no-key", max_retries=0,
                                    http_client=http)
        gate = asyncio.Semaphore(C)

        async def call(prompt: str | Path) -> None:
            async with gate:
                text = prompt.read_text("utf-8") + "\n\nQuestion?" if isinstance(prompt, Path) else prompt
                await client.chat.completions.create(
                    model="bare-model" if isinstance(prompt, Path) else "bare-judge",
                    messages=[{"role": "user", "content": text}],
                    max_tokens=8192, temperature=0.1)

        await asyncio.gather(*(call(d) for d in docs))
        await asyncio.gather(*(call(f'Grade answer {i}. Reply JSON: {{"points_awarded"')
                               for i in range(JUDGES * len(docs))))
        await client.close()

    asyncio.run(main())


def inproc_worker(spec: dict[str, Any]) -> None:
    """The stages as the notebooks call them; the wall clock after each, written at the end."""
    marks = [("worker started", time.time())]
    import evalnb

    open_run = evalnb.open_run   # imports evalnb.pipeline.stages
    marks.append(("import evalnb.pipeline.stages", time.time()))
    run = open_run(spec["params"])
    marks.append(("open_run", time.time()))
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
        marks.append((stage.__name__, time.time()))
    run.close()
    Path(spec["marks"]).write_text(json.dumps(marks), "utf-8")


# --- measuring one launch -------------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def _stat(pid: int) -> tuple[int, float, str] | None:
    """(start time in ticks, CPU seconds, command name) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / CLK_TCK, comm


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """Every ``interval``: the client's process tree, its summed VmRSS, each process's CPU."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.stop = threading.Event()
        self.peak_kb = 0
        self.peak_procs = 0
        self.seen: dict[tuple[int, int], tuple[float, str]] = {}   # (pid, start) -> (cpu s, comm)

    def sample(self) -> None:
        pids, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            cmdline = _cmdline(pid)
            # A child forked but not yet exec'd (subprocess starting `git`) shares its parent's
            # memory and reports the parent's VmRSS: not counted twice.
            todo += [c for c in _children(pid) if _cmdline(c) != cmdline]
        total = 0
        for pid in pids:
            total += _rss_kb(pid)
            st = _stat(pid)
            if st is not None:
                self.seen[(pid, st[0])] = (st[1], st[2])
        if total > self.peak_kb:
            self.peak_kb, self.peak_procs = total, len(pids)

    def run(self) -> None:
        while True:
            self.sample()
            if self.stop.wait(self.interval):
                return

    def survivors(self) -> list[str]:
        """Descendants seen during the run that are still alive (not reaped by the client)."""
        alive = []
        for (pid, start), (_, comm) in self.seen.items():
            st = _stat(pid)
            if pid != self.root and st is not None and st[0] == start:
                alive.append(f"{pid} {comm}")
        return alive


def launch(argv: list[str], log: Path, url: str, save: Path | None = None) -> dict[str, Any]:
    """Run ``argv`` to its exit; the figures of that launch (see the module docstring)."""
    drain(url)   # forget the arrivals of anything before
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        launched, t0 = time.time(), time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
        exited = time.time()
    sampler.stop.set()
    sampler.join()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    arrivals = drain(url)
    if save is not None:   # [arrival time, model, tokens, status] per request, for a closer look
        save.write_text(json.dumps({"launched": launched, "exited": exited, "arrivals": arrivals}), "utf-8")
    sampled_cpu = sum(c for c, _ in sampler.seen.values())
    survivors = sampler.survivors()
    return {"exit": rc, "wall_s": wall, "launched": launched, "exited": exited, "cpu_s": cpu,
            "sampled_cpu_s": sampled_cpu, "peak_rss_mb": sampler.peak_kb / 1024,
            "procs_at_peak": sampler.peak_procs, "procs_seen": len(sampler.seen),
            "survivors": survivors, "arrivals": arrivals}


def summarise(m: dict[str, Any], *, calls: int, latency: float, concurrency: int) -> dict[str, Any]:
    """Per-launch figures from :func:`launch`'s raw measurement."""
    arrivals = m.pop("arrivals")
    times = [a[0] for a in arrivals]
    sent = len(arrivals)
    ideal = calls * latency / concurrency
    out = dict(m, calls_expected=calls, requests=sent, http_429=sum(a[3] == 429 for a in arrivals),
               ideal_s=ideal, ratio=ideal / m["wall_s"],
               cpu_ms_per_call=m["cpu_s"] / max(sent, 1) * 1000,
               first_request_s=(min(times) - m["launched"]) if times else None,
               tail_s=(m["exited"] - max(times) - latency) if times else None)
    # Where the wall time went, from the server's log: the answers (model "*-model"), then the judges.
    for phase, rows in (("generate", [a for a in arrivals if a[1].endswith("-model")]),
                        ("judge", [a for a in arrivals if not a[1].endswith("-model")])):
        if rows:
            out[f"{phase}_first_s"] = min(a[0] for a in rows) - m["launched"]
            out[f"{phase}_last_reply_s"] = max(a[0] for a in rows) + latency - m["launched"]
    if m["cpu_s"] < 0.95 * m["sampled_cpu_s"]:
        out["warning"] = (f"rusage CPU {m['cpu_s']:.2f}s < sampled {m['sampled_cpu_s']:.2f}s: "
                          "a descendant was not reaped by the client")
    if m["survivors"]:
        out["warning"] = f"still alive after the client exited: {m['survivors']}"
    return out


# --- what evalnb run spent its time on --------------------------------------------------------

def _iso(value: str) -> float:
    when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def command_timeline(run_dir: Path, launched: float, exited: float) -> dict[str, Any]:
    """From papermill's own timings in the executed notebooks: launch -> first notebook (CLI
    start, validation, first kernel), per stage the set-up cells (parameters, import evalnb,
    open_run) and the work cells, the gaps between stages, last notebook -> exit."""
    out: dict[str, Any] = {}
    previous_end = launched
    for nb_path in sorted(run_dir.glob("0[1-4]_*.ipynb")):
        nb = json.loads(nb_path.read_text("utf-8"))
        meta = nb["metadata"].get("papermill", {})
        if not meta.get("start_time") or not meta.get("end_time"):
            continue
        start, end = _iso(meta["start_time"]), _iso(meta["end_time"])
        stage = nb_path.stem.split("_", 1)[1]
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        durations = [c["metadata"].get("papermill", {}).get("duration") or 0.0 for c in code]
        setup = sum(d for d, c in zip(durations, code)   # parameters, import evalnb + open_run
                    if {"parameters", "injected-parameters"} & set(c["metadata"].get("tags", []))
                    or "open_run" in "".join(c["source"]))
        out[stage] = {"before_s": round(start - previous_end, 2), "notebook_s": round(end - start, 2),
                      "cells_s": round(sum(durations), 2), "setup_cells_s": round(setup, 2),
                      "cells": [[round(d, 2), "".join(c["source"]).strip().splitlines()[-1][:60]]
                                for d, c in zip(durations, code)]}
        previous_end = end
    out["after_last_s"] = round(exited - previous_end, 2)
    return out


# --- workloads and parameters ----------------------------------------------------------------------

def params_for(work: dict[str, Any], url: str, concurrency: int, out: Path,
               rate_limit: dict[str, Any] | None = None) -> dict[str, Any]:
    def endpoint(name: str, **extra: Any) -> dict[str, Any]:
        e = {"provider": "openai", "name": name, "base_url": url + "/v1", **extra}
        return e | ({"rate_limit": rate_limit} if rate_limit else {})
    return {"benchmark": "wildtrace", "run_name": "bench", "output_dir": str(out),
            "data": work["data"], "corpus": work["corpus"], "concurrency": concurrency,
            "model": endpoint("bench-model", caps=CAPS),
            "judges": [endpoint(f"bench-judge-{k}") for k in "abc"]}


def sized_workload(root: Path, sizes: list[int], seed: int) -> dict[str, Any]:
    """WildTrace tasks whose documents have exactly ``sizes`` characters."""
    import random

    from bench_runner import english

    rng = random.Random(seed)
    syllables = "ta ri mon el ka vor sen di lu pra ne tho gar is ben qua lo fe dra min os tel".split()
    vocab = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(4000)})
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    items = []
    for i, size in enumerate(sizes):
        (corpus / f"doc_{i:04d}.txt").write_text(english(rng, vocab, size), "utf-8")
        items.append({"task_id": f"wt-{i:04d}", "corpus_file": f"doc_{i:04d}.txt",
                      "question_text": f"What does the document say about {rng.choice(vocab)}?",
                      "ground_truth": {"scoring_rubric": [{"points": 50, "correct_criterion": "States it."}]}})
    data = root / "wildtrace.json"
    data.write_text(json.dumps({"tasks": items}), "utf-8")
    return {"data": str(data), "corpus": str(corpus), "tasks": len(sizes)}


# --- the runs --------------------------------------------------------------------------------------

def client_argv(client: str, spec: dict[str, Any], tmp: Path) -> list[str]:
    if client == "command":
        params = tmp / f"params-{spec['tag']}.json"
        params.write_text(json.dumps(spec["params"]), "utf-8")
        return [str(EVALNB), "run", str(params)]
    return [sys.executable, __file__, "--worker", client, json.dumps(spec)]


def one(client: str, work: dict[str, Any], C: int, args: Any, url: str, tmp: Path, tag: str,
        log: Path) -> dict[str, Any]:
    out = tmp / f"run-{tag}"
    spec = {"tag": tag, "concurrency": C, "url": url, "corpus": work["corpus"], "marks": str(tmp / "marks.json"),
            "transport": args.bare_transport, "params": params_for(work, url, C, out)}
    m = launch(client_argv(client, spec, tmp), log, url, tmp / f"arrivals-{client}-{tag}.json")
    if client == "inproc" and m["exit"] == 0:   # seconds after launch at the end of each phase
        m["phases"] = {name: round(t - m["launched"], 2)
                       for name, t in json.loads((tmp / "marks.json").read_text("utf-8"))}
    r = summarise(m, calls=(1 + JUDGES) * work["tasks"], latency=args.latency, concurrency=C)
    r.update(client=client, concurrency=C, tasks=work["tasks"], big=tag.startswith("big"))
    if client == "command" and r["exit"] == 0:
        r["timeline"] = command_timeline(out, m["launched"], m["exited"])
    if client != "bare" and out.exists():
        statuses: dict[str, int] = {}
        for stage in ("generate", "judge"):
            for line in (out / f"{stage}.jsonl").read_text("utf-8").splitlines():
                if line.strip():
                    s = json.loads(line)["status"]
                    statuses[s] = statuses.get(s, 0) + 1
        r["statuses"] = statuses
        shutil.rmtree(out)
    print(f"  {LABELS[client]:<30} C={C:<3} {tag:<12} wall {r['wall_s']:6.2f}s  ideal/wall {r['ratio']:.2f}  "
          f"CPU {r['cpu_ms_per_call']:5.2f} ms/call  first request {fmt(r['first_request_s'])} s  "
          f"peak RSS {r['peak_rss_mb']:4.0f} MB  exit {r['exit']}"
          + (f"  WARNING {r['warning']}" if "warning" in r else ""), flush=True)
    if r["exit"] != 0 or r["requests"] != r["calls_expected"]:
        print(f"    WARNING: exit {r['exit']}, {r['requests']} requests for {r['calls_expected']} calls; "
              f"see {log}", flush=True)
    return r


def median(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the repeats; the timeline and warnings of the median-wall repeat."""
    by_wall = sorted(reps, key=lambda r: r["wall_s"])
    out = dict(by_wall[len(by_wall) // 2])
    for key in ("wall_s", "ratio", "cpu_ms_per_call", "first_request_s", "tail_s", "peak_rss_mb", "cpu_s",
                "sampled_cpu_s", "generate_first_s", "generate_last_reply_s", "judge_first_s", "judge_last_reply_s"):
        values = [r[key] for r in reps if r.get(key) is not None]
        out[key] = round(statistics.median(values), 4) if values else None
    out["exits"] = [r["exit"] for r in reps]
    out["survivors"] = [s for r in reps for s in r["survivors"]]
    if any("warning" in r for r in reps):
        out["warning"] = "; ".join(r["warning"] for r in reps if "warning" in r)
    out["http_429"] = max(r["http_429"] for r in reps)
    out["repeats"] = [{k: round(r[k], 3) for k in ("wall_s", "ratio", "cpu_ms_per_call")} for r in reps]
    for k in ("launched", "exited"):
        out.pop(k, None)
    return out


def pacing(args: Any, tmp: Path, log: Path) -> dict[str, Any]:
    """`evalnb run` against a server enforcing input tokens per window, with the matching
    rate_limit and without one."""
    from evalnb.providers.pacing import RateLimit, minimum_seconds

    budget, window, C = args.pacing_budget, args.pacing_window, 16
    work = sized_workload(tmp / "workload-pacing", [args.pacing_doc_chars] * args.pacing_tasks, args.seed)
    quota = {"budget": budget, "window": window}
    limit = {"input_tokens_per_minute": budget, "window_seconds": window}
    results = {}
    for name, rate_limit in (("paced", limit), ("unpaced", None)):
        server, url = start_server(args.latency, tmp / f"fakeserver-{name}.log", quota)
        try:
            out = tmp / f"run-pacing-{name}"
            params = params_for(work, url, C, out, rate_limit)
            m = launch(client_argv("command", {"tag": f"pacing-{name}", "params": params}, tmp), log, url,
                       tmp / f"arrivals-pacing-{name}.json")
        finally:
            server.terminate()
            server.wait(10)
        arrivals = m["arrivals"]
        model = [a for a in arrivals if a[1] == "bench-model"]
        ok = [a for a in model if a[3] == 200]
        tokens = sum(a[2] for a in ok)
        minimum = minimum_seconds(RateLimit(**limit), {"input_tokens": tokens}) + args.latency
        # A sliding window admits at most a budget per window, so the last tokens leave a whole
        # number of windows after the first: (ceil(tokens / budget) - 1) windows.
        exact = (math.ceil(tokens / budget) - 1) * window + args.latency
        span = (max(a[0] for a in model) + args.latency - min(a[0] for a in model)) if model else 0.0
        statuses: dict[str, int] = {}
        for line in (out / "generate.jsonl").read_text("utf-8").splitlines() if out.exists() else []:
            if line.strip():
                s = json.loads(line)["status"]
                statuses[s] = statuses.get(s, 0) + 1
        # Most input tokens the server saw in any window (its own log, arrivals that it accepted).
        fullest = max((sum(n for t2, _, n, _ in ok if t - window < t2 <= t) for t, *_ in ok), default=0)
        results[name] = {
            "exit": m["exit"], "wall_s": round(m["wall_s"], 2), "http_429": sum(a[3] == 429 for a in arrivals),
            "requests": len(arrivals), "generate_statuses": statuses,
            "generate_tokens_server": tokens, "generate_span_s": round(span, 2),
            "quota_minimum_s": round(minimum, 2), "span_over_minimum": round(span / minimum, 3) if minimum else None,
            "window_minimum_s": round(exact, 2),
            "fullest_window_tokens": fullest, "budget": budget, "window_s": window}
        shutil.rmtree(out, ignore_errors=True)
        r = results[name]
        print(f"  pacing {name:<8} exit {r['exit']}  wall {r['wall_s']:.1f}s  429s {r['http_429']}  generate "
              f"{r['generate_span_s']:.1f}s vs quota minimum {r['quota_minimum_s']:.1f}s  statuses {statuses}",
              flush=True)
    return results


def startup(args: Any) -> dict[str, Any]:
    """``import evalnb`` (-X importtime, cumulative), the same for evalnb.pipeline.stages (what open_run
    imports) and openai (what generate imports), and the wall time of ``evalnb --help`` and of a bare ``python -c pass``."""
    py = str(REPO / ".venv" / "bin" / "python")

    def importtime(module: str) -> tuple[float, list[tuple[float, str]]]:
        """Cumulative seconds of ``import module``, and its direct imports, largest first."""
        err = subprocess.run([py, "-X", "importtime", "-c", f"import {module}"], cwd=REPO,
                             capture_output=True, text=True, check=True).stderr
        rows = []   # post-order: a module's own imports are the rows just before it, one level deeper
        for line in err.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
            if m:
                rows.append((int(m.group(2)) / 1e6, len(m.group(3)), m.group(4)))
        k = max(i for i, r in enumerate(rows) if r[2] == module)
        children = []
        for cumulative, depth, name in reversed(rows[:k]):
            if depth <= rows[k][1]:
                break
            if depth == rows[k][1] + 2:
                children.append((cumulative, name))
        return rows[k][0], sorted(children, reverse=True)[:6]

    def wall(argv: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=REPO, capture_output=True, check=True)
        return time.perf_counter() - t0

    n = max(3, args.repeat)
    out: dict[str, Any] = {}
    for module in ("evalnb", "evalnb.pipeline.stages", "openai"):
        runs = [importtime(module) for _ in range(n)]
        out[f"import {module} s"] = round(statistics.median(r[0] for r in runs), 3)
        out[f"import {module} largest"] = [f"{name} {s:.3f}" for s, name in runs[-1][1]]
    wall([py, "-c", "pass"])
    out["python -c pass s"] = round(statistics.median(wall([py, "-c", "pass"]) for _ in range(n)), 3)
    wall([str(EVALNB), "--help"])
    out["evalnb --help s"] = round(statistics.median(wall([str(EVALNB), "--help"]) for _ in range(n)), 3)
    for k, v in out.items():
        print(f"  {k}: {v}", flush=True)
    return out


# --- report ----------------------------------------------------------------------------------------

def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def split_of(r: dict[str, Any], res: dict[str, Any]) -> str:
    """Why a ratio target was missed, from the measurements: the calls' own share and the rest."""
    if r.get("judge_last_reply_s") is None or r.get("generate_first_s") is None:
        return ""
    calls = (r["generate_last_reply_s"] - r["generate_first_s"]) + (r["judge_last_reply_s"] - r["judge_first_s"])
    bare = next((b for b in res.get("main", []) if b["client"] == "bare" and b["concurrency"] == r["concurrency"]
                 and b.get("judge_last_reply_s") is not None), None)
    bare_calls = (f"; the bare SDK's calls {bare['judge_last_reply_s'] - bare['generate_first_s']:.1f} s"
                  if bare else "")
    return (f"the calls alone {calls:.1f} s = {r['ideal_s'] / calls:.2f} of ideal{bare_calls}; the rest "
            f"{r['wall_s'] - calls:.1f} s: {r['generate_first_s']:.1f} to the first request, "
            f"{r['judge_first_s'] - r['generate_last_reply_s']:.1f} between the stages, "
            f"{r['wall_s'] - r['judge_last_reply_s']:.1f} after the last reply")


def report(res: dict[str, Any], args: Any) -> list[str]:
    targets: list[str] = []

    def target(text: str, ok: bool, why: str = "") -> None:
        targets.append(f"{text}: {'met' if ok else 'MISSED'}{'' if ok or not why else ' (' + why + ')'}")

    rows = res.get("main", []) + res.get("big", [])
    if rows:
        print(f"\nideal = calls x latency / C; latency {args.latency} s; median of {args.repeat}; wall from launch "
              "to exit; CPU = client + every process it reaped; peak RSS summed over the process tree")
        print("| client | C | calls | wall s | ideal/wall | CPU ms per call | first request after launch s | "
              "tail after last reply s | peak RSS MB |")
        print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        big = f" ({r['tasks']} docs of 2.85M chars)" if r["big"] else ""
        label = LABELS[r["client"]] + (f" ({args.bare_transport})" if r["client"] == "bare" else "") + big
        print(f"| {label} | {r['concurrency']} | {r['requests']} | {r['wall_s']:.1f} | {r['ratio']:.2f} | "
              f"{r['cpu_ms_per_call']:.1f} | {fmt(r['first_request_s'])} | {fmt(r['tail_s'])} | "
              f"{r['peak_rss_mb']:.0f} ({r['procs_at_peak']} proc) |")
    if rows:
        print("\nwhere the wall time goes (s; server's arrival log, medians): launch -> first request | generation "
              "(first answer request -> last answer reply) | gap before the first judge request | judging | last "
              "reply -> exit")
        print("| client | C | to first request | generation | gap | judging | to exit | wall |")
        print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("judge_last_reply_s") is None or r.get("generate_first_s") is None:
            continue
        label = LABELS[r["client"]] + (" (big docs)" if r["big"] else "")
        print(f"| {label} | {r['concurrency']} | {r['generate_first_s']:.2f} | "
              f"{r['generate_last_reply_s'] - r['generate_first_s']:.2f} | "
              f"{r['judge_first_s'] - r['generate_last_reply_s']:.2f} | "
              f"{r['judge_last_reply_s'] - r['judge_first_s']:.2f} | {r['wall_s'] - r['judge_last_reply_s']:.2f} | "
              f"{r['wall_s']:.2f} |")
    for r in res.get("main", []):
        key = (r["client"], r["concurrency"])
        if key in TARGET_RATIO:
            target(f"{LABELS[r['client']]} C={r['concurrency']} ideal/wall {r['ratio']:.2f} >= {TARGET_RATIO[key]}",
                   r["ratio"] >= TARGET_RATIO[key], split_of(r, res))
        if r["client"] == "command":
            openai_s = res.get("startup", {}).get("import openai s")
            target(f"`evalnb run` C={r['concurrency']} first request {fmt(r['first_request_s'])} s "
                   f"<= {TARGET_FIRST_REQUEST_S}",
                   r["first_request_s"] is not None and r["first_request_s"] <= TARGET_FIRST_REQUEST_S,
                   "a kernel boots, then imports evalnb, pandas and the SDK, one after another"
                   + (f"; import openai alone takes {openai_s:.2f} s" if openai_s else ""))
        if r["exit"] != 0 or r["requests"] != r["calls_expected"] or r.get("warning"):
            targets.append(f"{LABELS[r['client']]} C={r['concurrency']}: CHECK exit {r['exits']}, "
                           f"{r['requests']}/{r['calls_expected']} requests {r.get('warning', '')}")
    for r in rows:
        if r["client"] == "command":   # CPU of the kernels counted only if evalnb waited for them
            print(f"`evalnb run` C={r['concurrency']}{' big docs' if r['big'] else ''}: {r['procs_seen']} processes "
                  f"in its tree; CPU by rusage {r['cpu_s']:.1f} s, summed from /proc samples {r['sampled_cpu_s']:.1f} s; "
                  f"alive after exit: {r['survivors'] or 'none'}"
                  + ("" if r["cpu_s"] >= 0.95 * r["sampled_cpu_s"] else "  NOT ALL REAPED"))
        if r["client"] == "command" and "timeline" in r:
            t = r["timeline"]
            parts = [f"{s}: {t[s]['before_s']:.1f} before, {t[s]['notebook_s']:.1f} notebook "
                     f"({t[s]['setup_cells_s']:.1f} set-up cells)" for s in ("generate", "judge", "aggregate", "report")
                     if s in t]
            print(f"`evalnb run` C={r['concurrency']}{' big docs' if r['big'] else ''} (papermill "
                  f"timings): " + "; ".join(parts) + f"; {t['after_last_s']:.1f} after the last notebook")
    for r in rows:
        if r["client"] == "inproc" and "phases" in r:
            ph = r["phases"]
            after_open = (r["first_request_s"] - ph["import evalnb.pipeline.stages"]) if r["first_request_s"] else None
            print(f"evalnb in-process C={r['concurrency']}{' big docs' if r['big'] else ''} (s after launch): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ph.items())
                  + f"; first request {fmt(after_open)} s after open_run() was called")
    if "pacing" in res:
        p, u = res["pacing"]["paced"], res["pacing"]["unpaced"]
        print(f"\npacing (`evalnb run`, C=16, {args.pacing_tasks} docs of {args.pacing_doc_chars:,} chars; server "
              f"quota {p['budget']:,} input tokens per {p['window_s']:g} s window, 429 over it; rate_limit "
              f"input_tokens_per_minute={p['budget']}, window_seconds={p['window_s']:g}):")
        print("| run | exit | 429s | generate s (first request to last reply) | quota-bound minimum s | ratio | "
              "whole-window minimum s | whole command s | tokens (server) | fullest window |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, r in (("with rate_limit", p), ("without", u)):
            print(f"| {name} | {r['exit']} | {r['http_429']} | {r['generate_span_s']:.1f} | {r['quota_minimum_s']:.1f}"
                  f" | {fmt(r['span_over_minimum'])} | {r['window_minimum_s']:.1f} | {r['wall_s']:.1f} | "
                  f"{r['generate_tokens_server']:,} | {r['fullest_window_tokens']:,} |")
        print("quota-bound minimum = evalnb.providers.pacing.minimum_seconds(server-counted tokens) + latency; whole-window "
              "minimum = (ceil(tokens / budget) - 1) x window + latency, what a sliding window allows at best; "
              "generate statuses: " + f"paced {p['generate_statuses']}, unpaced {u['generate_statuses']}")
        target("paced run: no 429", p["http_429"] == 0)
        target(f"paced generate {p['generate_span_s']:.1f} s within 10% of the quota minimum "
               f"{p['quota_minimum_s']:.1f} s (ratio {fmt(p['span_over_minimum'])})",
               p["span_over_minimum"] is not None and p["span_over_minimum"] <= TARGET_PACED_OVER_MIN)
    if "startup" in res:
        s = res["startup"]
        print(f"\nimport evalnb {s['import evalnb s']:.3f} s (-X importtime, cumulative); import evalnb.pipeline.stages "
              f"{s['import evalnb.pipeline.stages s']:.3f} s (largest: {', '.join(s['import evalnb.pipeline.stages largest'][:4])}); import "
              f"openai {s['import openai s']:.3f} s (the SDK, imported by the first call's client); "
              f"evalnb --help {s['evalnb --help s']:.2f} s wall; python -c pass {s['python -c pass s']:.2f} s")
        target(f"import evalnb {s['import evalnb s']:.3f} s <= {TARGET_IMPORT_S}", s["import evalnb s"] <= TARGET_IMPORT_S)
    print("\ntargets:\n  " + ("\n  ".join(targets) or "(none in this subset)"))
    return targets


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--repeat", type=int, default=3, help="launches per client and C; medians reported")
    p.add_argument("--quick", action="store_true", help="--repeat 1")
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                   help="bare/inproc/command: the 481-task runs of that client; big: all three clients on "
                        "128 docs of 2,850,000 chars; pacing; startup (import, --help)")
    p.add_argument("--big-tasks", type=int, default=128)
    p.add_argument("--big-concurrency", type=int, default=64)
    p.add_argument("--bare-transport", choices=("httpx", "aiohttp"), default="httpx",
                   help="the bare loop's transport (evalnb uses aiohttp)")
    p.add_argument("--pacing-budget", type=int, default=105_000, help="input tokens per window")
    p.add_argument("--pacing-window", type=float, default=8.0, help="seconds")
    p.add_argument("--pacing-tasks", type=int, default=80)
    p.add_argument("--pacing-doc-chars", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, workloads)")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return 0
    if args.worker:
        spec = json.loads(args.worker[1])
        (bare_worker if args.worker[0] == "bare" else inproc_worker)(spec)
        return 0
    if args.quick:
        args.repeat = 1
    sys.path.insert(0, str(HERE))
    sys.path.append(str(REPO))
    from bench_runner import make_workload

    started, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="evalnb-bench-command-"))
    log = tmp / "clients.log"
    print(f"bench_command: {', '.join(args.only)}; {args.repeat} repeat(s); logs in {tmp}", flush=True)
    res: dict[str, Any] = {}
    try:
        if "startup" in args.only:
            res["startup"] = startup(args)
        main_clients = [c for c in CLIENTS if c in args.only]
        if main_clients or "big" in args.only:
            server, url = start_server(args.latency, tmp / "fakeserver.log")
            try:
                if main_clients:
                    work = make_workload(tmp / "workload", tasks=args.tasks, seed=args.seed, big=False)
                    reps: dict[tuple[str, int], list[dict[str, Any]]] = {}
                    for C in args.concurrency:
                        for i in range(args.repeat):   # clients interleaved: load drifts hit all alike
                            for client in main_clients:
                                reps.setdefault((client, C), []).append(
                                    one(client, work, C, args, url, tmp, f"{C}-{i}", log))
                    res["main"] = [median(v) for v in reps.values()]
                    shutil.rmtree(tmp / "workload")
                if "big" in args.only:
                    work = make_workload(tmp / "workload-big", tasks=args.big_tasks, seed=args.seed, big=True)
                    C, reps = args.big_concurrency, {}
                    for i in range(args.repeat):
                        for client in CLIENTS:
                            reps.setdefault((client, C), []).append(
                                one(client, work, C, args, url, tmp, f"big-{C}-{i}", log))
                    res["big"] = [median(v) for v in reps.values()]
                    shutil.rmtree(tmp / "workload-big")
            finally:
                server.terminate()
                server.wait(10)
        if "pacing" in args.only:
            res["pacing"] = pacing(args, tmp, log)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    targets = report(res, args)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    section = {"date": datetime.date.today().isoformat(), "bench_seconds": round(time.perf_counter() - started),
               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg_at_end": load},
               "args": {k: v for k, v in vars(args).items() if k not in ("serve", "worker")},
               "ideal": "calls x latency / C", **res, "targets": targets}
    previous = json.loads(RESULTS.read_text("utf-8")) if RESULTS.exists() else {}
    previous["command"] = section
    RESULTS.write_text(json.dumps(previous, indent=2) + "\n", "utf-8")
    print(f"\n{time.perf_counter() - started:.0f}s (load average at the end {' '.join(load)}); "
          f"figures in {RESULTS.relative_to(REPO)} (key \"command\")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
