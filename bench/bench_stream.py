"""Streaming's cost: the 481-task workload with every call streamed beside the same workload
not streamed, against a fake server that generates at a fixed token rate.

    python bench/bench_stream.py                     # C=16, 400 tokens/s, one repeat
    python bench/bench_stream.py --repeat 3 --token-rate 200

The server (``python -m tests.fakeserver --latency L --token-rate R``, its own process) takes
``L`` seconds to a first token and then generates at ``R`` tokens per second (about four
characters a token): a streamed reply sends an event of 16 characters every 4/R seconds, a
non-streamed one waits for the whole generation and then answers at once. The contestant's
reply is ``--reply-chars`` characters; the judges' replies are the fake server's short verdict.
Each configuration runs open_run, generate, judge and aggregate in a fresh subprocess (as
bench_runner.py does), with ``stream: true`` or ``stream: false`` on every endpoint.

Figures: wall time of generate + judge; the ideal the token rate implies, ``(T/C) * (L + g_model)
+ (3T/C) * (L + g_judge)`` with ``g`` a reply's characters / 4 / R; client CPU per call (process
CPU over generate + judge / calls); peak RSS. Targets: streamed CPU per call at most 1.5 times
the non-streamed, and no more wall time than the token rate implies (ratio ideal / wall as the
non-streamed run's, within 10%). Figures go to bench/last_stream_results.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from bench_runner import JUDGES, make_workload, records  # noqa: E402

RESULTS = HERE / "last_stream_results.json"
JUDGE_REPLY_CHARS = len('{"points_awarded":[50],"total":50}')   # the fake server's verdict
TARGET_CPU_RATIO = 1.5
TARGET_WALL_SLACK = 0.10


def ideal_seconds(tasks: int, concurrency: int, latency: float, rate: float, reply_chars: int) -> float:
    model, judge = latency + reply_chars / 4 / rate, latency + JUDGE_REPLY_CHARS / 4 / rate
    return tasks / concurrency * model + JUDGES * tasks / concurrency * judge


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import openai  # noqa: F401  (one-time SDK import: off the clock)

    import evalnb
    from bench_runner import CAPS

    out, work, stream = Path(spec["out"]), spec["workload"], spec["stream"]
    endpoint = {"provider": "openai", "base_url": spec["url"], "stream": stream}
    params = {"benchmark": "wildtrace", "run_name": "bench-stream", "output_dir": str(out),
              "data": work["data"], "corpus": work["corpus"], "concurrency": spec["concurrency"],
              "model": {**endpoint, "name": "bench-model", "caps": CAPS},
              "judges": [{**endpoint, "name": f"bench-judge-{k}"} for k in "abc"]}
    run = evalnb.open_run(params)
    cpu0, t0 = time.process_time(), time.perf_counter()
    evalnb.generate(run)
    evalnb.judge(run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    evalnb.aggregate(run)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    done = records(out)
    calls = sum(r["attempts"] for r in done)
    streamed = sum(1 for r in done if r.get("streamed"))
    model = [r["latency"] for r in done if r["endpoint"] == "model" and r.get("latency")]
    return {"stream": stream, "calls": calls, "streamed_calls": streamed,
            "statuses": sorted({r["status"] for r in done}), "wall_s": wall,
            "cpu_ms_per_call": cpu / calls * 1000, "peak_rss_mb": peak,
            "model_total_s_median": statistics.median(x["total_s"] for x in model),
            "model_first_token_s_median": (statistics.median(x["first_token_s"] for x in model)
                                           if stream else None)}


def start_server(args: Any, log: Path) -> tuple[subprocess.Popen[str], str]:
    reply = ("The document answers the question in its third section. " * 100)[:args.reply_chars]
    server = subprocess.Popen([sys.executable, "-m", "tests.fakeserver", "--latency", str(args.latency),
                               "--token-rate", str(args.token_rate), "--reply-text", reply],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = server.stdout.readline().strip()   # type: ignore[union-attr]
    if not line.startswith("READY "):
        server.terminate()
        raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
    return server, line.split(" ", 1)[1] + "/v1"


def spawn(spec: dict[str, Any], log: Path) -> dict[str, Any]:
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"worker failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency", type=float, default=0.2, help="seconds to the first token")
    p.add_argument("--token-rate", type=float, default=400.0, help="output tokens per second")
    p.add_argument("--reply-chars", type=int, default=1200, help="characters of the contestant's reply")
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    started, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="evalnb-bench-stream-"))
    ideal = ideal_seconds(args.tasks, args.concurrency, args.latency, args.token_rate, args.reply_chars)
    rows: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    server, url = start_server(args, tmp / "fakeserver.log")
    try:
        work = make_workload(tmp / "workload", tasks=args.tasks, seed=args.seed, big=False)
        for i in range(args.repeat):
            for stream in (False, True):
                spec = {"concurrency": args.concurrency, "url": url, "workload": work, "stream": stream,
                        "out": str(tmp / f"run-{stream}-{i}")}
                r = spawn(spec, tmp / "worker.log")
                r["ideal_s"], r["ratio"] = ideal, ideal / r["wall_s"]
                rows[stream].append(r)
                print(f"{'streamed' if stream else 'not streamed'} #{i + 1}: wall {r['wall_s']:.2f}s (ideal {ideal:.2f}) "
                      f"CPU {r['cpu_ms_per_call']:.2f} ms/call RSS {r['peak_rss_mb']:.0f} MB", flush=True)
                shutil.rmtree(spec["out"])
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)

    def med(stream: bool, key: str) -> float:
        return statistics.median(r[key] for r in rows[stream])

    print(f"\nT={args.tasks} C={args.concurrency}, {args.latency} s to the first token, {args.token_rate:g} tokens/s, "
          f"contestant reply {args.reply_chars} characters; ideal {ideal:.2f} s = (T/C)(L + g_model) + (3T/C)(L + g_judge)")
    head = f"{'row':<16}{'calls':>6}{'streamed':>9}{'wall s':>8}{'ideal s':>8}{'ratio':>7}{'CPU ms/call':>12}{'peak RSS MB':>12}"
    print(head + "\n" + "-" * len(head))
    for stream in (False, True):
        r = rows[stream][0]
        print(f"{'streamed' if stream else 'not streamed':<16}{r['calls']:>6}{r['streamed_calls']:>9}"
              f"{med(stream, 'wall_s'):>8.2f}{ideal:>8.2f}{med(stream, 'ratio'):>7.2f}"
              f"{med(stream, 'cpu_ms_per_call'):>12.2f}{med(stream, 'peak_rss_mb'):>12.0f}")
        if r["statuses"] != ["ok"] and set(r["statuses"]) - {"ok", "out_of_context"}:
            print(f"   WARNING: statuses {r['statuses']}")
    cpu_ratio = med(True, "cpu_ms_per_call") / med(False, "cpu_ms_per_call")
    wall_ok = med(True, "ratio") >= med(False, "ratio") * (1 - TARGET_WALL_SLACK)
    targets = [f"streamed CPU per call {cpu_ratio:.2f}x the non-streamed <= {TARGET_CPU_RATIO}  "
               f"{'PASS' if cpu_ratio <= TARGET_CPU_RATIO else 'MISS'}",
               f"streamed wall {med(True, 'wall_s'):.2f}s vs {med(False, 'wall_s'):.2f}s not streamed, "
               f"ideal {ideal:.2f}s (ratio {med(True, 'ratio'):.2f} vs {med(False, 'ratio'):.2f})  "
               f"{'PASS' if wall_ok else 'MISS'}"]
    print("\ntargets:\n  " + "\n  ".join(targets))
    RESULTS.write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "bench_seconds": round(time.perf_counter() - started),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "args": {k: v for k, v in vars(args).items() if k != "worker"}, "ideal_s": ideal,
        "not_streamed": rows[False], "streamed": rows[True], "cpu_ratio": cpu_ratio, "targets": targets,
    }, indent=2) + "\n")
    print(f"\n{time.perf_counter() - started:.0f}s; figures in {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
