"""`evalnb suite` against per-model token windows, beside separate `evalnb run`s.

    python bench/bench_suite.py            # 8 contestants x the 481-task workload, 3 shared judges
    python bench/bench_suite.py --quick    # 8 x 60 tasks of 20k-60k characters, smaller windows

One fake server in its own process enforces, per model, input tokens (as it counts them,
characters / 4) over a sliding window: the contestants' models one budget, the judges another;
a request over it gets 429. Every endpoint's ``rate_limit`` is set to its server window. Side by
side, each with a fresh server and fresh quota ledgers (``EVALNB_QUOTA_DIR``):

* ``suite P=4`` and ``suite P=8``: ``evalnb suite`` with ``parallel_runs`` 4 and 8;
* ``separate``: 8 ``evalnb run`` processes started at once with the same parameters (they share
  the judges' quota ledgers, being processes of one user on one machine).

Figures, from the server's log and the process tree (bench_command's sampler and rusage):
429s; wall time; the span from the first request to the last reply against the quota-bound
minimum (below); CPU per call over every process (runs, kernels, the suite); peak RSS.

Quota-bound minimum, from the tokens the server accepted (evalnb.providers.pacing.minimum_seconds
per model window): a contestant's answers take ``g_i`` (its own model's window), its verdicts
``J_i`` (the slowest judge), and all verdicts of the suite ``J`` (the judges are shared). With
every run at once no schedule beats ``max(max_i(g_i + J_i), min_i g_i + J) + 2 x latency``
(judging starts after answers). With ``P`` runs at a time the contestants go in ``ceil(N/P)``
waves, each ``max g_i + J x P/N``: the minimum for ``P`` is that sum (the runs are alike).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from bench_command import EVALNB, RESULTS, launch, sized_workload  # noqa: E402

CONTESTANTS = 8
JUDGES = ("bench-judge-a", "bench-judge-b", "bench-judge-c")
CAPS = {"en": 2_850_000, "cjk": 850_000}
TARGET_SPAN_OVER_MIN = 1.10


# --- the server (own process) ---------------------------------------------------------------------

def serve(spec: dict[str, Any]) -> None:
    """tests.fakeserver with a log of every arrival (time, model, tokens, status) and a window per
    model: ``judge_budget`` for the judges, ``model_budget`` for every other model."""
    sys.path.append(str(REPO))
    import functools
    from collections import deque

    from tests import fakeserver as fs

    class LoggingServer(fs.FakeLLMServer):
        log: list[list[Any]] = []

        def stats(self) -> dict[str, Any]:
            with self._lock:
                out, self.log = self.log, []
            return {"log": out}

    server = LoggingServer(latency=spec["latency"])
    server.keep_requests = False
    windows: dict[str, deque[tuple[float, int]]] = {}
    reply = functools.partial(fs.default_benchmark_responder, reply_text=fs.DEFAULT_REPLY_TEXT)

    def responder(req: fs.RecordedRequest) -> fs.Reply:
        tokens = fs._estimate_tokens(fs._messages_prompt(req.body)[1])
        budget = spec["judge_budget"] if req.model in JUDGES else spec["model_budget"]
        window = windows.setdefault(req.model, deque())
        while window and window[0][0] <= req.time - spec["window"]:
            window.popleft()
        status = 429 if sum(n for _, n in window) + tokens > budget else 200
        if status == 200:
            window.append((req.time, tokens))
        with server._lock:
            server.log.append([time.time(), req.model, tokens, status])
        return fs.Error(429, "Rate limit reached: input tokens per window", code="rate_limit_exceeded") \
            if status == 429 else reply(req)

    server.responder = responder
    asyncio.run(fs._serve_cli(server))


def start_server(spec: dict[str, Any], log: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, __file__, "--serve", json.dumps(spec)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = server.stdout.readline().strip()   # type: ignore[union-attr]
    if not line.startswith("READY "):
        server.terminate()
        raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
    return server, line.split(" ", 1)[1]


def separate(exits_file: str, params: list[str]) -> None:
    """The `separate` configuration: every `evalnb run` at once, waited for here."""
    procs = [subprocess.Popen([str(EVALNB), "run", p], cwd=REPO) for p in params]
    Path(exits_file).write_text(json.dumps([p.wait() for p in procs]))


# --- parameters ----------------------------------------------------------------------------------

def shared_params(work: dict[str, Any], url: str, args: Any) -> dict[str, Any]:
    judge_limit = {"input_tokens_per_minute": args.judge_budget, "window_seconds": args.window}
    return {"benchmark": "wildtrace", "data": work["data"], "corpus": work["corpus"],
            "concurrency": args.concurrency,
            "model": {"provider": "openai", "base_url": url + "/v1", "caps": CAPS,
                      "rate_limit": {"input_tokens_per_minute": args.model_budget, "window_seconds": args.window}},
            "judges": [{"provider": "openai", "name": j, "base_url": url + "/v1", "rate_limit": judge_limit}
                       for j in JUDGES]}


def contestants() -> list[dict[str, Any]]:
    return [{"run_name": f"c{i}", "model": {"name": f"bench-model-{i}"}} for i in range(1, CONTESTANTS + 1)]


def argv_for(config: str, work: dict[str, Any], url: str, args: Any, tmp: Path) -> list[str]:
    shared = shared_params(work, url, args)
    if config.startswith("suite"):
        parallel = int(config.split(":")[1])
        suite = {"suite_name": f"bench-p{parallel}", "output_dir": str(tmp / f"out-suite-p{parallel}"),
                 "parallel_runs": parallel, **shared, "contestants": contestants()}
        path = tmp / f"suite-p{parallel}.json"
        path.write_text(json.dumps(suite), "utf-8")
        return [str(EVALNB), "suite", str(path)]
    paths = []
    for c in contestants():
        params = shared | {"run_name": c["run_name"], "output_dir": str(tmp / "out-separate" / c["run_name"]),
                           "model": shared["model"] | c["model"]}
        path = tmp / f"run-{c['run_name']}.json"
        path.write_text(json.dumps(params), "utf-8")
        paths.append(str(path))
    return [sys.executable, __file__, "--separate", str(tmp / "separate-exits.json"), *paths]


# --- figures -------------------------------------------------------------------------------------

def minimum(arrivals: list[list[Any]], args: Any, parallel: int) -> dict[str, float]:
    """The quota-bound minimum of the module docstring, from the tokens the server accepted."""
    sys.path.append(str(REPO))
    from evalnb.providers.pacing import RateLimit, minimum_seconds

    def seconds(tokens: float, budget: float) -> float:
        return minimum_seconds(RateLimit(input_tokens_per_minute=budget, window_seconds=args.window),
                               {"input_tokens": tokens})

    ok = [a for a in arrivals if a[3] == 200]
    models = sorted({a[1] for a in ok if a[1] not in JUDGES})
    g = {m: seconds(sum(a[2] for a in ok if a[1] == m), args.model_budget) for m in models}
    judged = {j: sum(a[2] for a in ok if a[1] == j) for j in JUDGES}
    J = max(seconds(t, args.judge_budget) for t in judged.values())
    # Every contestant's verdicts are alike in size: one contestant's share of the slowest judge.
    J_one = max(seconds(t / max(len(models), 1), args.judge_budget) for t in judged.values())
    all_at_once = max(max(g.values()) + J_one, min(g.values()) + J) + 2 * args.latency
    waves = math.ceil(len(models) / parallel)
    with_parallel = waves * (max(g.values()) + seconds(max(judged.values()) * parallel / len(models),
                                                       args.judge_budget)) + 2 * args.latency * waves
    return {"all_at_once_s": round(all_at_once, 2), "with_parallel_runs_s": round(max(with_parallel, all_at_once), 2),
            "answers_s": round(max(g.values()), 2), "verdicts_all_s": round(J, 2)}


def endpoint_figures(arrivals: list[list[Any]], args: Any, models: Any) -> dict[str, dict[str, float]]:
    """Each endpoint alone: first to last reply against its own quota-bound minimum (tokens it
    accepted, its window): how tightly every process paced it."""
    sys.path.append(str(REPO))
    from evalnb.providers.pacing import RateLimit, minimum_seconds

    out = {}
    for judge in models:
        ok = [a for a in arrivals if a[1] == judge and a[3] == 200]
        if not ok:
            continue
        tokens = sum(a[2] for a in ok)
        budget = args.judge_budget if judge in JUDGES else args.model_budget
        least = minimum_seconds(RateLimit(input_tokens_per_minute=budget, window_seconds=args.window),
                                {"input_tokens": tokens}) + args.latency
        span = max(a[0] for a in ok) + args.latency - min(a[0] for a in ok)
        out[judge] = {"tokens": tokens, "span_s": round(span, 2), "minimum_s": round(least, 2),
                      "span_over_minimum": round(span / least, 3)}
    return out


def first_requests(arrivals: list[list[Any]], launched: float) -> list[float]:
    """Seconds after launch at which each contestant's first request arrived, earliest first."""
    firsts: dict[str, float] = {}
    for t, model, *_ in arrivals:
        if model not in JUDGES:
            firsts[model] = min(firsts.get(model, t), t)
    return sorted(round(t - launched, 1) for t in firsts.values())


def fullest(arrivals: list[list[Any]], window: float) -> dict[str, int]:
    """Most tokens each model accepted in any window (the server's own log)."""
    out: dict[str, int] = {}
    for model in sorted({a[1] for a in arrivals}):
        ok = [(a[0], a[2]) for a in arrivals if a[1] == model and a[3] == 200]
        out[model] = max((sum(n for t2, n in ok if t - window < t2 <= t) for t, _ in ok), default=0)
    return out


def one(config: str, work: dict[str, Any], args: Any, tmp: Path, log: Path) -> dict[str, Any]:
    spec = {"latency": args.latency, "window": args.window, "model_budget": args.model_budget,
            "judge_budget": args.judge_budget}
    server, url = start_server(spec, tmp / f"server-{config}.log")
    os.environ["EVALNB_QUOTA_DIR"] = str(tmp / f"quota-{config}")   # fresh ledgers for each configuration
    try:
        m = launch(argv_for(config, work, url, args, tmp), log, url)
    finally:
        server.terminate()
        server.wait(10)
    arrivals = m.pop("arrivals")
    times = [a[0] for a in arrivals]
    parallel = int(config.split(":")[1]) if config.startswith("suite") else CONTESTANTS
    bound = minimum(arrivals, args, parallel) if arrivals else {}
    span = (max(times) + args.latency - min(times)) if times else 0.0
    exits = json.loads((tmp / "separate-exits.json").read_text()) if config == "separate" else [m["exit"]]
    expected = CONTESTANTS * 4 * work["tasks"]
    r = {"config": config, "exits": exits, "wall_s": round(m["wall_s"], 2), "requests": len(arrivals),
         "calls_expected": expected, "http_429": sum(a[3] == 429 for a in arrivals),
         "first_request_s": round(min(times) - m["launched"], 2) if times else None,
         "span_s": round(span, 2), "tail_s": round(m["exited"] - max(times) - args.latency, 2) if times else None,
         **bound, "span_over_minimum": round(span / bound["with_parallel_runs_s"], 3) if bound else None,
         "cpu_s": round(m["cpu_s"], 1), "cpu_ms_per_call": round(m["cpu_s"] / max(len(arrivals), 1) * 1000, 2),
         "peak_rss_mb": round(m["peak_rss_mb"]), "procs_at_peak": m["procs_at_peak"],
         "survivors": m["survivors"], "fullest_window_tokens": fullest(arrivals, args.window),
         "judges": endpoint_figures(arrivals, args, JUDGES),
         "contestants": endpoint_figures(arrivals, args, sorted({a[1] for a in arrivals} - set(JUDGES))),
         "loadavg": Path("/proc/loadavg").read_text().split()[:3],
         # when each contestant's first answer request arrived, after launch: how staggered the runs start
         "contestant_first_request_s": first_requests(arrivals, m["launched"])}
    over = {k: v for k, v in r["fullest_window_tokens"].items()
            if v > (args.judge_budget if k in JUDGES else args.model_budget)}
    print(f"  {config:<10} exits {exits}  wall {r['wall_s']:.1f}s  429s {r['http_429']}  requests {r['requests']}/"
          f"{expected}  span {r['span_s']:.1f}s vs minimum {bound.get('with_parallel_runs_s')}s "
          f"(all at once {bound.get('all_at_once_s')}s)  first request {r['first_request_s']}s  tail {r['tail_s']}s  "
          f"CPU {r['cpu_ms_per_call']:.2f} ms/call  peak RSS {r['peak_rss_mb']} MB"
          + (f"  OVER WINDOW {over}" if over else ""), flush=True)
    print(f"    contestants' first requests {r['contestant_first_request_s']} s after launch", flush=True)
    spans = [f["span_over_minimum"] for f in r["contestants"].values()]
    if spans:
        print(f"    contestants' answers: first to last reply {min(spans)}-{max(spans)} of their own quota minimum "
              f"({next(iter(r['contestants'].values()))['minimum_s']}s)", flush=True)
    for judge, f in r["judges"].items():
        print(f"    {judge}: {f['tokens']:,} tokens, first to last reply {f['span_s']}s vs its own quota minimum "
              f"{f['minimum_s']}s ({f['span_over_minimum']})", flush=True)
    for out in tmp.glob("out-*"):
        shutil.rmtree(out, ignore_errors=True)
    return r


def report(res: list[dict[str, Any]], args: Any, work: dict[str, Any]) -> list[str]:
    print(f"\nSuite benchmark: {CONTESTANTS} contestants x {work['tasks']} tasks (documents {work['doc_chars'][0]:,}-"
          f"{work['doc_chars'][1]:,} characters) x (1 answer + {len(JUDGES)} shared judges); latency {args.latency} s; "
          f"windows of {args.window:g} s: {args.model_budget:,} input tokens per contestant model, "
          f"{args.judge_budget:,} per judge; concurrency {args.concurrency} per run")
    print("| configuration | exits | 429s | requests | wall s | first request s | span s | minimum s (P) | "
          "span / minimum | tail s | CPU ms/call | CPU s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in res:
        print(f"| {r['config']} | {r['exits']} | {r['http_429']} | {r['requests']}/{r['calls_expected']} | "
              f"{r['wall_s']:.1f} | {r['first_request_s']} | {r['span_s']:.1f} | {r.get('with_parallel_runs_s')} | "
              f"{r['span_over_minimum']} | {r['tail_s']} | {r['cpu_ms_per_call']:.2f} | {r['cpu_s']:.0f} | "
              f"{r['peak_rss_mb']} |")
    print("span = first request to last reply (server log); minimum = quota-bound minimum for that many runs at "
          "once (module docstring); first request = launch to the first arrival (process and kernel start-up); "
          "tail = last reply to exit (report stages, the suite's leaderboard).")
    targets = []
    for r in res:
        ok = r["http_429"] == 0
        targets.append(f"{r['config']}: no 429: {'MET' if ok else 'MISSED'} ({r['http_429']})")
        if r["config"].startswith("suite") and r["span_over_minimum"] is not None:
            met = r["span_over_minimum"] <= TARGET_SPAN_OVER_MIN
            targets.append(f"{r['config']}: span within 10 % of the quota-bound minimum: {'MET' if met else 'MISSED'} "
                           f"({r['span_over_minimum']})")
    print("\ntargets:\n  " + "\n  ".join(targets))
    return targets


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="60 tasks of 20k-60k characters, 4 s windows "
                   "(150,000 tokens per contestant model, 4,000 per judge)")
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--window", type=float, default=10.0, help="seconds")
    p.add_argument("--model-budget", type=int, default=600_000, help="input tokens per window, each contestant model")
    p.add_argument("--judge-budget", type=int, default=20_000, help="input tokens per window, each judge")
    p.add_argument("--configs", nargs="+", default=["suite:4", "suite:8", "separate"],
                   help="suite:P (evalnb suite, parallel_runs P) and/or separate (8 evalnb runs at once)")
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--separate", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(json.loads(args.serve))
        return 0
    if args.separate:
        separate(args.separate[0], args.separate[1:])
        return 0
    if args.quick:
        args.tasks, args.window, args.model_budget, args.judge_budget = 60, 4.0, 150_000, 4_000
    started, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="evalnb-bench-suite-"))
    log = tmp / "clients.log"
    print(f"bench_suite: {args.configs}; logs in {tmp}", flush=True)
    try:
        if args.quick:
            rng = random.Random(args.seed)
            work = sized_workload(tmp / "workload", [rng.randint(20_000, 60_000) for _ in range(args.tasks)], args.seed)
            work["doc_chars"] = [20_000, 60_000]
        else:
            from bench_runner import make_workload
            work = make_workload(tmp / "workload", tasks=args.tasks, seed=args.seed, big=False)
        res = [one(config, work, args, tmp, log) for config in args.configs]
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    targets = report(res, args, work)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    previous = json.loads(RESULTS.read_text("utf-8")) if RESULTS.exists() else {}
    previous["suite"] = {"date": time.strftime("%Y-%m-%d"), "bench_seconds": round(time.perf_counter() - started),
                         "machine": {"cpus": os.cpu_count(), "loadavg_at_end": load},
                         "args": {k: v for k, v in vars(args).items() if k not in ("serve", "separate")},
                         "results": res, "targets": targets}
    RESULTS.write_text(json.dumps(previous, indent=2) + "\n", "utf-8")
    print(f"\n{time.perf_counter() - started:.0f}s (load average at the end {' '.join(load)}); figures in "
          f"{RESULTS.relative_to(REPO)} (key \"suite\")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
