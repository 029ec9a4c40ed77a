"""Benchmark evalnb's runner against the local fake server on a WildTrace-shaped workload.

    python bench/bench_runner.py                      # C=16, C=64, big docs at C=64; 3 repeats
    python bench/bench_runner.py --big-docs           # only the big-document configuration
    python bench/bench_runner.py --compare-transport  # also a bare AsyncOpenAI loop, httpx2 vs aiohttp

`make bench` then runs bench/bench_command.py: the whole `evalnb run` command beside a bare SDK
loop and evalnb in-process, the big-document configuration, pacing and start-up times.

The parent generates the workload, starts ``python -m tests.fakeserver --latency L`` in its
own process, and runs every configuration (and every repeat) in a fresh subprocess of this
script (``--worker``), so peak RSS and CPU time are never mixed. A worker runs the stages as
the notebooks do (open_run, generate, judge, aggregate), then all of them again on the same
run directory (the rerun, which must make no call). Per-call figures come from evalnb's own
records (``started_at``, ``attempts`` in generate.jsonl / judge.jsonl): nothing is patched.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "last_results.json"
JUDGES = 3
BIG_DOC_CHARS = 2_850_000
CAPS = {"en": BIG_DOC_CHARS, "cjk": 850_000}   # len == cap is in scope: every document is sent
TARGET_RATIO = {16: 0.90, 64: 0.85}
TARGET_CPU_MS = 2.0
TARGET_BIG_RSS_MB = 1024


def ideal_seconds(tasks: int, concurrency: int, latency: float) -> float:
    """Generation first, then the judges, never more than C calls in flight (run-wide cap)."""
    return (tasks / concurrency + JUDGES * tasks / concurrency) * latency


# --- workload --------------------------------------------------------------------------------

def english(rng: random.Random, vocab: list[str], chars: int) -> str:
    """Exactly ``chars`` characters of English-looking ASCII text."""
    words = rng.choices(vocab, k=chars // 5 + 16)
    sentences = (" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, len(words), 12))
    return " ".join(sentences)[:chars]


def make_workload(root: Path, *, tasks: int, seed: int, big: bool) -> dict[str, Any]:
    """Seeded: ``tasks`` documents of 20k-60k characters plus five of 500k, or (``big``) every
    document exactly 2,850,000 characters, the cap: the largest document still sent."""
    rng = random.Random(seed)
    syllables = "ta ri mon el ka vor sen di lu pra ne tho gar is ben qua lo fe dra min os tel".split()
    vocab = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(4000)})
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    if big:   # distinct documents: windows of one long text (quicker than 128 x 2.85M words)
        base = english(rng, vocab, BIG_DOC_CHARS + 4096 * tasks)
        docs = ((f"Document {i:04d}. " + base[4096 * i:])[:BIG_DOC_CHARS] for i in range(tasks))
    else:
        five = set(rng.sample(range(tasks), min(5, tasks)))
        docs = (english(rng, vocab, 500_000 if i in five else rng.randint(20_000, 60_000))
                for i in range(tasks))
    items, sizes = [], []
    for i, doc in enumerate(docs):
        (corpus / f"doc_{i:04d}.txt").write_text(doc, "utf-8")
        sizes.append(len(doc))
        points = rng.choice(([50], [30, 20], [20, 20, 10]))
        items.append({"task_id": f"wt-{i:04d}", "corpus_file": f"doc_{i:04d}.txt",
                      "question_text": f"What does the document say about {rng.choice(vocab)}?",
                      "ground_truth": {"scoring_rubric": [
                          {"points": p, "correct_criterion": f"States fact {j + 1}."}
                          for j, p in enumerate(points)]}})
    assert not big or set(sizes) == {BIG_DOC_CHARS}
    data = root / "wildtrace.json"
    data.write_text(json.dumps({"tasks": items}), "utf-8")
    return {"data": str(data), "corpus": str(corpus), "tasks": tasks, "big": big,
            "doc_chars": [min(sizes), max(sizes), sum(sizes)]}


# --- worker: one configuration, in its own process ---------------------------------------------

def records(out: Path) -> list[dict[str, Any]]:
    """Every record of the run's generate.jsonl and judge.jsonl, as evalnb appended them."""
    return [json.loads(line) for stage in ("generate", "judge")
            for line in (out / f"{stage}.jsonl").read_text("utf-8").splitlines() if line.strip()]


def evalnb_worker(spec: dict[str, Any]) -> dict[str, Any]:
    import openai  # noqa: F401  (one-time SDK import, aiohttp with it, ~0.4 s CPU: off the clock)

    import evalnb
    C, L, out, work = spec["concurrency"], spec["latency"], Path(spec["out"]), spec["workload"]
    params = {
        "benchmark": "wildtrace", "run_name": "bench", "output_dir": str(out),
        "data": work["data"], "corpus": work["corpus"], "concurrency": C,
        "model": {"provider": "openai", "name": "bench-model", "base_url": spec["url"], "caps": CAPS},
        "judges": [{"provider": "openai", "name": f"bench-judge-{k}", "base_url": spec["url"]}
                   for k in "abc"],
        "cache": False,   # every repeat measures the calls themselves (bench/bench_cache.py: the cache)
    }
    run = evalnb.open_run(params)
    profiler = cProfile.Profile(time.process_time) if spec.get("profile") else contextlib.nullcontext()
    clock, cpu0, t0 = time.time(), time.process_time(), time.perf_counter()
    with profiler:   # only with --profile: the CPU profile of generate + judge
        evalnb.generate(run)
        evalnb.judge(run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if spec.get("profile"):
        profiler.dump_stats(spec["profile"])
    evalnb.aggregate(run)
    peak_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = records(out)
    calls = sum(r["attempts"] for r in done)   # HTTP requests sent (no retries expected)
    first_request = min(r["started_at"] for r in done if r["endpoint"] == "model" and "started_at" in r)

    t1 = time.perf_counter()   # rerun: everything is done, so nothing may be sent
    rerun = evalnb.open_run(params)
    evalnb.generate(rerun)
    evalnb.judge(rerun)
    evalnb.aggregate(rerun)
    rerun_s = time.perf_counter() - t1
    after = records(out)

    ideal = ideal_seconds(work["tasks"], C, L)
    return {"concurrency": C, "tasks": work["tasks"], "big": work["big"], "calls": calls,
            "statuses": sorted({r["status"] for r in done}), "wall_s": wall, "ideal_s": ideal,
            "ratio": ideal / wall, "cpu_ms_per_call": cpu / calls * 1000,
            "ttfr_s": first_request - clock,
            "peak_rss_mb": peak_rss_kb / 1024, "rerun_s": rerun_s,
            "rerun_new_records": len(after) - len(done),
            "rerun_new_attempts": sum(r["attempts"] for r in after) - calls}


def bare_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The same calls (each document + question, then three short judge prompts per task)
    from a bare AsyncOpenAI client and a semaphore: no evalnb, only the transport differs."""
    import openai
    C, L, work = spec["concurrency"], spec["latency"], spec["workload"]
    docs = sorted(Path(work["corpus"]).iterdir())

    async def main() -> tuple[float, float]:
        http = openai.DefaultAioHttpClient() if spec["transport"] == "aiohttp" else None
        client = openai.AsyncOpenAI(base_url=spec["url"], api_key="no-key", max_retries=0,
                                    http_client=http)
        gate = asyncio.Semaphore(C)

        async def call(prompt: str | Path) -> None:
            async with gate:
                text = prompt.read_text("utf-8") + "\n\nQuestion?" if isinstance(prompt, Path) else prompt
                await client.chat.completions.create(
                    model="bare", messages=[{"role": "user", "content": text}],
                    max_tokens=8192, temperature=0.1)

        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(call(d) for d in docs))
        await asyncio.gather(*(call(f"Grade this answer {i}.") for i in range(JUDGES * len(docs))))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        await client.close()
        return wall, cpu

    wall, cpu = asyncio.run(main())
    ideal = ideal_seconds(len(docs), C, L)
    return {"transport": spec["transport"], "concurrency": C, "wall_s": wall, "ideal_s": ideal,
            "ratio": ideal / wall, "cpu_ms_per_call": cpu / ((1 + JUDGES) * len(docs)) * 1000}


# --- parent ---------------------------------------------------------------------------------

def start_server(latency: float, log: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, "-m", "tests.fakeserver", "--latency", str(latency)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = server.stdout.readline().strip()   # type: ignore[union-attr]
    if not line.startswith("READY "):
        server.terminate()
        raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
    return server, line.split(" ", 1)[1] + "/v1"


def spawn(spec: dict[str, Any], log: Path) -> dict[str, Any]:
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"worker failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the repeats; counts of rerun calls: the worst repeat."""
    out = dict(reps[0])
    for key, value in reps[0].items():
        if key.startswith("rerun_new"):
            out[key] = max(r[key] for r in reps)
        elif isinstance(value, float):
            out[key] = round(statistics.median(r[key] for r in reps), 4)
    out["repeats"] = [{k: round(r[k], 3) for k in ("wall_s", "ratio", "cpu_ms_per_call")} for r in reps]
    return out


def report(runs: list[dict[str, Any]], bare: list[dict[str, Any]], args: Any) -> list[str]:
    """Print the table; return the target verdicts."""
    T = args.tasks
    print(f"\nideal = (T/C + {JUDGES}T/C) * latency (generation first, then {JUDGES} judges, at most C calls "
          f"in flight run-wide); T={T}: ({T}/C + {JUDGES * T}/C) * {args.latency}; big docs: T=128")
    head = (f"{'config':<20}{'calls':>6}{'wall s':>8}{'ideal s':>8}{'ratio':>7}{'CPU ms/call':>12}"
            f"{'TTFR s':>8}{'peak RSS MB':>12}{'rerun s':>8}{'new calls':>10}")
    print(head + "\n" + "-" * len(head))
    targets = []
    for r in runs:
        name = f"{'big docs ' if r['big'] else ''}C={r['concurrency']} T={r['tasks']}"
        print(f"{name:<20}{r['calls']:>6}{r['wall_s']:>8.2f}{r['ideal_s']:>8.2f}{r['ratio']:>7.2f}"
              f"{r['cpu_ms_per_call']:>12.2f}{r['ttfr_s']:>8.2f}{r['peak_rss_mb']:>12.0f}"
              f"{r['rerun_s']:>8.2f}{r['rerun_new_records']:>10}")
        checks = [(f"CPU {r['cpu_ms_per_call']:.2f} ms/call <= {TARGET_CPU_MS}",
                   r["cpu_ms_per_call"] <= TARGET_CPU_MS),
                  (f"rerun made {r['rerun_new_records']} new records, {r['rerun_new_attempts']} new attempts",
                   r["rerun_new_records"] == 0 == r["rerun_new_attempts"])]
        if r["big"]:
            checks.append((f"peak RSS {r['peak_rss_mb']:.0f} MB < {TARGET_BIG_RSS_MB} MB",
                           r["peak_rss_mb"] < TARGET_BIG_RSS_MB))
        elif r["concurrency"] in TARGET_RATIO:
            want = TARGET_RATIO[r["concurrency"]]
            checks.insert(0, (f"ratio {r['ratio']:.2f} >= {want}", r["ratio"] >= want))
        targets += [f"{name}: {text}  {'PASS' if ok else 'MISS'}" for text, ok in checks]
        if r["statuses"] != ["ok"]:
            print(f"   WARNING: statuses {r['statuses']}: not every call succeeded; the ideal assumes so")
    print("wall = generate + judge. CPU = the worker's process CPU time over generate + judge / calls "
          "(includes reading and JSON-encoding the documents, JSONL and manifest writes; `import openai` "
          "is done before the clock). TTFR = first generate record's started_at - time just before "
          "generate(). rerun = open_run + generate + judge + aggregate again on the finished run.")
    for b in bare:
        print(f"bare AsyncOpenAI {b['transport']:<8} C={b['concurrency']:<3} wall {b['wall_s']:.2f}s "
              f"ratio {b['ratio']:.2f} CPU {b['cpu_ms_per_call']:.2f} ms/call")
    print("\ntargets:\n  " + "\n  ".join(targets))
    return targets


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--repeat", type=int, default=3, help="runs per configuration; medians reported")
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--big-docs", action="store_true", help="only 128 tasks of 2,850,000 characters at C=64")
    p.add_argument("--no-big-docs", action="store_true")
    p.add_argument("--compare-transport", action="store_true")
    p.add_argument("--profile", metavar="FILE", help="cProfile generate+judge of the first worker into FILE")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps((bare_worker if "transport" in spec else evalnb_worker)(spec)))
        return 0

    started, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="evalnb-bench-"))
    configs = [] if args.big_docs else [(c, False) for c in args.concurrency]
    configs += [] if args.no_big_docs else [(64, True)]
    runs, bare, workloads = [], [], {}
    server, url = start_server(args.latency, tmp / "fakeserver.log")
    try:
        for C, big in configs:
            if big not in workloads:
                workloads[big] = make_workload(tmp / f"workload-big{big}", seed=args.seed, big=big,
                                               tasks=128 if big else args.tasks)
            reps = []
            for i in range(args.repeat):
                spec = {"concurrency": C, "latency": args.latency, "url": url, "workload": workloads[big],
                        "out": str(tmp / f"run-{C}-{big}-{i}"),
                        "profile": args.profile if args.profile and not runs and not reps else None}
                reps.append(spawn(spec, tmp / "worker.log"))
                r = reps[-1]
                print(f"{'big docs ' if big else ''}C={C} #{i + 1}: wall {r['wall_s']:.2f}s ratio "
                      f"{r['ratio']:.2f} CPU {r['cpu_ms_per_call']:.2f} ms/call RSS {r['peak_rss_mb']:.0f} MB",
                      flush=True)
                shutil.rmtree(spec["out"])
            runs.append(median(reps))
        if args.compare_transport:
            work = workloads.get(False) or make_workload(tmp / "workload", seed=args.seed, big=False,
                                                         tasks=args.tasks)
            for C in args.concurrency:
                for transport in ("httpx2", "aiohttp"):
                    spec = {"concurrency": C, "latency": args.latency, "url": url, "workload": work,
                            "transport": transport}
                    bare.append(median([spawn(spec, tmp / "worker.log") for _ in range(args.repeat)]))
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)

    targets = report(runs, bare, args)
    if args.profile:   # profiled figures are inflated: keep the last real ones
        print(f"\nprofile of the first worker in {args.profile}; {RESULTS.name} not written")
        return 0
    previous = json.loads(RESULTS.read_text("utf-8")) if RESULTS.exists() else {}
    RESULTS.write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "bench_seconds": round(time.perf_counter() - started),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "args": {k: v for k, v in vars(args).items() if k != "worker"},
        "ideal": "(T/C + 3T/C) * latency", "runs": runs, "bare_transport": bare, "targets": targets,
        # bench_command.py's figures (make bench runs it next) are kept until it replaces them
        **{key: previous[key] for key in ("command", "suite") if key in previous},
    }, indent=2) + "\n")
    print(f"\n{time.perf_counter() - started:.0f}s; figures in {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
