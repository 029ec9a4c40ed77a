"""Throughput / CPU / memory benchmark of evalnb's runner against the local fake server.

Usage (``make bench`` runs the first line):

    python bench/bench_runner.py                       # C=16, C=64, big docs, rerun check
    python bench/bench_runner.py --concurrency 16 64 --latency 0.2 --tasks 481
    python bench/bench_runner.py --big-docs            # only the 2.85M-character configuration
    python bench/bench_runner.py --no-big-docs
    python bench/bench_runner.py --compare-transport   # also: bare AsyncOpenAI, httpx2 vs aiohttp
    python bench/bench_runner.py --transport-only      # only that experiment
    python bench/bench_runner.py --profile DIR         # cProfile each runner worker (figures inflated)

Every configuration runs in a fresh subprocess of this script (``--one C`` worker mode, or
``--bare C`` for the transport experiment), so peak RSS (monotonic per process) and CPU
times are never mixed between configurations. The fake server (``python -m
tests.fakeserver``) runs in its own process, started and terminated by the parent.

Nothing here changes evalnb: the worker runs ``open_run / generate / judge / aggregate``
exactly as the stage notebooks do, and only *wraps* objects at run time to count and time
calls (``pipeline.make_provider`` is wrapped so that each provider it makes gets a counting
``complete`` and a timestamping ``_client._send_request``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
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
N_JUDGES = 3
BIG_DOC_CHARS = 2_850_000

# Targets printed beside the figures (never asserted).
TARGET_RATIO = {16: 0.90, 64: 0.85}
TARGET_CPU_MS = 2.0
TARGET_BIG_RSS_KB = 1024 * 1024  # 1 GB (GiB, as ru_maxrss is KiB)


# ------------------------------------------------------------------------------------------
# Workload
# ------------------------------------------------------------------------------------------

_SYLLABLES = ("ta", "ri", "mon", "el", "ka", "vor", "sen", "di", "lu", "pra", "ne", "tho",
              "gar", "is", "ben", "qua", "lo", "fe", "dra", "min", "os", "tel", "ur", "ca")
_COMMON = ("the of and to in is was for that on with as by at from it an be this which "
           "are or were has had not but have its their report river city council year "
           "water system trace evidence record data table figure section page total "
           "according between during after before under over project level annual").split()


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    words = set(_COMMON)
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _text(rng: random.Random, vocab: list[str], chars: int) -> str:
    """About ``chars`` characters of English-like ASCII text, then cut/padded to exactly it."""
    words = rng.choices(vocab, k=chars // 6 + 64)
    parts, n = [], 0
    for i in range(0, len(words), 12):
        sentence = " ".join(words[i:i + 12])
        sentence = sentence[:1].upper() + sentence[1:] + (".\n\n" if i % 120 == 0 else ". ")
        parts.append(sentence)
        n += len(sentence)
        if n >= chars:
            break
    text = "".join(parts)
    while len(text) < chars:   # (practically never) top up
        text += " " + rng.choice(vocab)
    return text[:chars]


def make_workload(root: Path, *, tasks: int, seed: int, big_docs: bool) -> dict[str, Any]:
    """A WildTrace-shaped data file + corpus directory, deterministic for a given seed."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    sizes: list[int] = []
    if big_docs:
        # One base text, every document a different exactly-2.85M window of it: distinct
        # documents (one per task) without generating 128 x 2.85M random words.
        step = 4096
        base = _text(rng, vocab, BIG_DOC_CHARS + step * tasks)
        for i in range(tasks):
            doc = f"Document {i:04d}. " + base[i * step:]
            doc = doc[:BIG_DOC_CHARS]
            (corpus / f"doc_{i:04d}.txt").write_text(doc, "utf-8")
            sizes.append(len(doc))
    else:
        big = set(rng.sample(range(tasks), min(5, tasks)))
        for i in range(tasks):
            chars = 500_000 if i in big else rng.randint(20_000, 60_000)
            (corpus / f"doc_{i:04d}.txt").write_text(_text(rng, vocab, chars), "utf-8")
            sizes.append(chars)
    items = []
    for i in range(tasks):
        subject = " ".join(rng.choices(vocab, k=3))
        points = rng.choice(([50], [30, 20], [20, 20, 10], [10, 15, 25]))
        items.append({
            "task_id": f"wt-{i:04d}",
            "question_text": f"According to the document, what happened to the {subject}? "
                             f"Give every figure and date the document states.",
            "corpus_file": f"doc_{i:04d}.txt",
            "ground_truth": {"scoring_rubric": [
                {"points": p, "correct_criterion": f"States the {' '.join(rng.choices(vocab, k=4))}"
                                                   f" ({j + 1})."} for j, p in enumerate(points)]},
        })
    data = root / "wildtrace.json"
    data.write_text(json.dumps({"tasks": items}), "utf-8")
    return {"data": str(data), "corpus": str(corpus), "tasks": tasks,
            "doc_chars_total": sum(sizes), "doc_chars_min": min(sizes),
            "doc_chars_max": max(sizes), "big_docs": big_docs}


# ------------------------------------------------------------------------------------------
# Fake server
# ------------------------------------------------------------------------------------------

class FakeServer:
    def __init__(self, latency: float, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakeserver", "--latency", str(latency)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"fake server did not start: {line!r} (see {log})")
        self.url = line.split(" ", 1)[1]
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def proc_cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of another process, from /proc (Linux)."""
    if not pid:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def vm_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


# ------------------------------------------------------------------------------------------
# Worker: one runner configuration, in-process, as the stage notebooks run it
# ------------------------------------------------------------------------------------------

class Probe:
    """Counts and timestamps calls of every provider the pipeline makes (no evalnb edit)."""

    def __init__(self, transport: str = "httpx2") -> None:
        self.transport = transport
        self.first_make_provider_cpu_s: float | None = None
        self.complete_calls = 0
        self.sends = 0
        self.first_complete: float | None = None
        self.first_send: float | None = None
        self.first_make_provider_s: float | None = None
        self.providers_made = 0

    def install(self) -> None:
        from evalnb import pipeline
        original = pipeline.make_provider

        def make_provider(endpoint: Any) -> Any:
            t, c = time.perf_counter(), time.process_time()
            if self.first_make_provider_s is None and self.transport == "aiohttp":
                self._use_aiohttp()
            provider = original(endpoint)   # the first call imports the openai SDK
            if provider is None:            # an endpoint that needs no client
                return provider
            if self.first_make_provider_s is None:
                self.first_make_provider_s = time.perf_counter() - t
                self.first_make_provider_cpu_s = time.process_time() - c
            self.providers_made += 1
            self._wrap(provider)
            return provider

        pipeline.make_provider = make_provider

    @staticmethod
    def _use_aiohttp() -> None:
        """Transport experiment only: every AsyncOpenAI that evalnb's provider constructs gets
        openai's aiohttp transport. Done at the first make_provider, where evalnb itself
        first imports openai, so import costs land in the same place as without it."""
        import openai

        class AioAsyncOpenAI(openai.AsyncOpenAI):
            def __init__(self, **kwargs: Any) -> None:
                kwargs.setdefault("http_client", openai.DefaultAioHttpClient())
                super().__init__(**kwargs)

        openai.AsyncOpenAI = AioAsyncOpenAI  # type: ignore[misc]

    def _wrap(self, provider: Any) -> None:
        complete = provider.complete

        async def counted_complete(request: Any) -> Any:
            if self.first_complete is None:
                self.first_complete = time.perf_counter()
            self.complete_calls += 1
            return await complete(request)

        provider.complete = counted_complete
        client = getattr(provider, "_client", None)
        if client is not None and hasattr(client, "_send_request"):
            send = client._send_request   # AsyncAPIClient: the request is built, body encoded

            async def counted_send(request: Any, **kwargs: Any) -> Any:
                if self.first_send is None:
                    self.first_send = time.perf_counter()
                self.sends += 1
                return await send(request, **kwargs)

            client._send_request = counted_send


def _elapsed_stats(path: Path) -> dict[str, float]:
    values = []
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if record.get("elapsed_s") is not None:
                values.append(record["elapsed_s"])
    if not values:
        return {}
    values.sort()
    return {"n": len(values), "mean": round(statistics.fmean(values), 4),
            "p50": values[len(values) // 2], "p95": values[int(len(values) * 0.95) - 1],
            "max": values[-1]}


def _span(path: Path) -> float | None:
    """First request start to last response end, from the stage's own records (time.time())."""
    starts, ends = [], []
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if record.get("started_at") is not None:
                starts.append(record["started_at"])
                ends.append(record["started_at"] + (record.get("elapsed_s") or 0))
    return round(max(ends) - min(starts), 3) if starts else None


def _line_count(path: Path) -> int:
    return sum(1 for line in path.read_text("utf-8").splitlines() if line.strip()) if path.exists() else 0


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    rss_start = vm_rss_kb()
    import evalnb   # noqa: E402  (imported here so the parent never imports it)
    from evalnb.records import read_json_if_exists

    C = args.one
    workload = json.loads(Path(args.workload_info).read_text())
    out = Path(args.output_dir)
    url = args.url
    caps = {"en": BIG_DOC_CHARS, "cjk": 900_000} if workload["big_docs"] else {"en": 3_000_000, "cjk": 900_000}
    params = {
        "benchmark": "wildtrace", "run_name": f"bench-c{C}", "output_dir": str(out),
        "data": workload["data"], "corpus": workload["corpus"], "concurrency": C,
        "model": {"provider": "openai", "name": "bench-model", "base_url": f"{url}/v1", "caps": caps},
        "judges": [{"provider": "openai", "name": f"bench-judge-{k}", "base_url": f"{url}/v1"}
                   for k in ("a", "b", "c")],
    }
    probe = Probe(args.transport)
    probe.install()
    openai_preloaded = "openai" in sys.modules
    profiler = None
    if args.profile:
        import cProfile
        profiler = cProfile.Profile()   # wall clock (cheap timer); print_profile drops idle epoll waits

    t0 = time.perf_counter()
    run = evalnb.open_run(params)
    t_open = time.perf_counter() - t0
    rss_before = vm_rss_kb()
    server_cpu0 = proc_cpu_seconds(args.server_pid)

    if profiler:
        profiler.enable()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, g0 = time.process_time(), time.perf_counter()
    evalnb.generate(run)
    cpu1, g1 = time.process_time(), time.perf_counter()
    evalnb.judge(run)
    cpu2, g2 = time.process_time(), time.perf_counter()
    ru2 = resource.getrusage(resource.RUSAGE_SELF)
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    server_cpu1 = proc_cpu_seconds(args.server_pid)
    evalnb.aggregate(run)
    cpu3, g3 = time.process_time(), time.perf_counter()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    scores = read_json_if_exists(out / "scores.json")
    gen_status = dict(__import__("collections").Counter(
        r["status"] for r in read_json_if_exists(out / "responses.json")["records"]))
    judge_status = dict(__import__("collections").Counter(
        r["status"] for r in evalnb.pipeline.judgements(run).values()))
    calls = probe.complete_calls
    sends = probe.sends

    # --- rerun: same output_dir, everything done: must send nothing -----------------------
    lines_before = {s: _line_count(out / f"{s}.jsonl") for s in ("generate", "judge")}
    r0, rc0 = time.perf_counter(), time.process_time()
    run2 = evalnb.open_run(params)
    r1 = time.perf_counter()
    evalnb.generate(run2)
    r2 = time.perf_counter()
    evalnb.judge(run2)
    r3 = time.perf_counter()
    evalnb.aggregate(run2)
    r4, rc1 = time.perf_counter(), time.process_time()
    scores2 = read_json_if_exists(out / "scores.json")
    lines_after = {s: _line_count(out / f"{s}.jsonl") for s in ("generate", "judge")}

    tasks = workload["tasks"]
    in_scope = gen_status.get("ok", 0) + gen_status.get("empty", 0) + gen_status.get("refused", 0)
    L = args.latency
    ideal_brief = (tasks / C + N_JUDGES * tasks / C) * L
    # What the runner actually allows: each judge endpoint has its own C workers.
    ideal_workers = (tasks / C + N_JUDGES * in_scope / (N_JUDGES * C)) * L
    ideal_rounds = (math.ceil(tasks / C) + math.ceil(in_scope / C)) * L
    wall = g2 - g0
    return {
        "kind": "runner", "transport": args.transport, "concurrency": C, "latency": L, "tasks": tasks,
        "big_docs": workload["big_docs"], "doc_chars_max": workload["doc_chars_max"],
        "doc_chars_total": workload["doc_chars_total"],
        "calls": calls, "http_sends": sends,
        "open_run_s": round(t_open, 3),
        "generate_wall_s": round(g1 - g0, 3), "judge_wall_s": round(g2 - g1, 3),
        "aggregate_s": round(g3 - g2, 3), "wall_s": round(wall, 3),
        "ideal_brief_s": round(ideal_brief, 3), "ratio_brief": round(ideal_brief / wall, 3),
        "ideal_workers_s": round(ideal_workers, 3), "ratio_workers": round(ideal_workers / wall, 3),
        "ideal_rounds_s": round(ideal_rounds, 3), "ratio_rounds": round(ideal_rounds / wall, 3),
        "cpu_generate_s": round(cpu1 - cpu0, 3), "cpu_judge_s": round(cpu2 - cpu1, 3),
        "cpu_aggregate_s": round(cpu3 - cpu2, 3),
        "cpu_per_call_ms": round((cpu2 - cpu0) / max(calls, 1) * 1000, 3),
        "first_make_provider_cpu_s": round(probe.first_make_provider_cpu_s or 0, 3),
        "cpu_per_call_excl_sdk_import_ms": round((cpu2 - cpu0 - (probe.first_make_provider_cpu_s or 0))
                                                 / max(calls, 1) * 1000, 3),
        "cpu_user_s": round(ru2.ru_utime - ru0.ru_utime, 3), "cpu_sys_s": round(ru2.ru_stime - ru0.ru_stime, 3),
        "minor_page_faults": ru2.ru_minflt - ru0.ru_minflt,
        "ratio_workers_excl_ttfr": (round(ideal_workers / (wall - (probe.first_send - g0)), 3)
                                    if probe.first_send else None),
        "cpu_per_call_generate_ms": round((cpu1 - cpu0) / max(tasks, 1) * 1000, 3),
        "cpu_per_call_judge_ms": round((cpu2 - cpu1) / max(calls - tasks, 1) * 1000, 3),
        "server_cpu_s": (round(server_cpu1 - server_cpu0, 2)
                         if server_cpu0 is not None and server_cpu1 is not None else None),
        "ttfr_s": round(probe.first_send - g0, 4) if probe.first_send else None,
        "ttf_complete_s": round(probe.first_complete - g0, 4) if probe.first_complete else None,
        "first_make_provider_s": round(probe.first_make_provider_s or 0, 4),
        "openai_imported_before_generate": openai_preloaded,
        "rss_start_kb": rss_start, "rss_before_generate_kb": rss_before, "peak_rss_kb": peak_rss,
        "generate_calls_span_s": _span(out / "generate.jsonl"),
        "judge_calls_span_s": _span(out / "judge.jsonl"),
        "elapsed_generate": _elapsed_stats(out / "generate.jsonl"),
        "elapsed_judge": _elapsed_stats(out / "judge.jsonl"),
        "generate_status": gen_status, "judge_status": judge_status,
        "complete": scores["complete"], "overall": scores["overall"],
        "rerun": {"wall_s": round(r4 - r0, 3), "open_run_s": round(r1 - r0, 3),
                  "generate_s": round(r2 - r1, 3), "judge_s": round(r3 - r2, 3),
                  "aggregate_s": round(r4 - r3, 3), "cpu_s": round(rc1 - rc0, 3),
                  "new_complete_calls": probe.complete_calls - calls,
                  "new_http_sends": probe.sends - sends,
                  "new_records": {s: lines_after[s] - lines_before[s] for s in lines_after},
                  "overall_unchanged": scores2["overall"] == scores["overall"]},
    }


# ------------------------------------------------------------------------------------------
# Worker: bare AsyncOpenAI + semaphore loop (transport experiment)
# ------------------------------------------------------------------------------------------

def run_bare(args: argparse.Namespace) -> dict[str, Any]:
    import openai

    C, n, L = args.bare, args.calls, args.latency

    async def main() -> dict[str, Any]:
        http_client = openai.DefaultAioHttpClient() if args.transport == "aiohttp" else None
        client = openai.AsyncOpenAI(base_url=f"{args.url}/v1", api_key="no-key", max_retries=0,
                                    timeout=600.0, http_client=http_client)
        sem = asyncio.Semaphore(C)

        async def one(i: int) -> str:
            async with sem:
                r = await client.chat.completions.create(
                    model="bare", messages=[{"role": "user", "content": f"Short question {i}?"}],
                    max_tokens=64, temperature=0.1)
                return r.choices[0].message.content or ""

        # warm-up (client platform probe, first connection) outside the measurement
        await one(-1)
        server0 = proc_cpu_seconds(args.server_pid)
        cpu0, t0 = time.process_time(), time.perf_counter()
        replies = await asyncio.gather(*(one(i) for i in range(n)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        server1 = proc_cpu_seconds(args.server_pid)
        await client.close()
        ideal = n / C * L
        return {"kind": "bare", "transport": args.transport, "concurrency": C, "calls": n,
                "latency": L, "wall_s": round(wall, 3), "ideal_s": round(ideal, 3),
                "ratio": round(ideal / wall, 3), "cpu_per_call_ms": round(cpu / n * 1000, 3),
                "server_cpu_s": round(server1 - server0, 2) if server0 is not None and server1 is not None else None,
                "ok_replies": sum(1 for r in replies if r)}

    result = asyncio.run(main())
    result["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


# ------------------------------------------------------------------------------------------
# Parent: orchestrates workers, prints the table, writes bench/last_results.json
# ------------------------------------------------------------------------------------------

def spawn(argv: list[str], log: Path, timeout: float) -> dict[str, Any]:
    fd, result_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        with log.open("w") as err:
            proc = subprocess.run([sys.executable, __file__, *argv, "--result-file", result_path],
                                  stdout=err, stderr=err, timeout=timeout)
        if proc.returncode != 0:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"worker {argv} failed (exit {proc.returncode}):\n{tail}")
        return json.loads(Path(result_path).read_text())
    finally:
        os.unlink(result_path)


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def aiohttp_available() -> str | None:
    try:
        import aiohttp  # noqa: F401
        import openai
        openai.DefaultAioHttpClient  # noqa: B018
        from openai._base_client import _DefaultAioHttpClient
        if "Missing" in _DefaultAioHttpClient.__name__:
            return "openai's aiohttp transport is not importable"
    except ImportError as e:
        return f"aiohttp not installed ({e}); pip install 'openai[aiohttp]'"
    return None


def print_report(results: dict[str, Any]) -> None:
    runs = results.get("runner", [])
    if runs:
        print("\n== evalnb runner (open_run -> generate -> judge -> aggregate), fake server in its own process")
        print(f"   ideal (brief)   = (T/C + 3T/C) * latency   [judges only after generation; C calls in flight]")
        print(f"   ideal (workers) = (T/C + 3T/(3C)) * latency [what the runner allows: each of the 3 judge")
        print(f"                     endpoints gets its own C workers, so 3C judge calls can be in flight]")
        print(f"   ideal (rounds)  = (ceil(T/C) + ceil(T/C)) * latency  [hard lower bound of 'workers': whole rounds]")
        hdr = (f"{'config':<20}{'calls':>6}{'wall s':>8}{'ideal_b':>8}{'ratio_b':>8}{'ideal_w':>8}"
               f"{'ratio_w':>8}{'target':>13}{'CPU ms/call':>13}{'<=2ms':>6}{'TTFR s':>8}"
               f"{'peak RSS MB':>12}{'srv CPU s':>10}")
        print(hdr)
        print("-" * len(hdr))
        for r in runs:
            C = r["concurrency"]
            name = (f"C={C} T={r['tasks']}" + (" big" if r["big_docs"] else "")
                    + (" aiohttp" if r.get("transport") == "aiohttp" else ""))
            if r["big_docs"]:
                target = f"RSS<1GB {mark(r['peak_rss_kb_max'] < TARGET_BIG_RSS_KB)}"
            else:
                t = TARGET_RATIO.get(C)
                target = f">={t} {mark(r['ratio_workers'] >= t)}" if t else "-"
            print(f"{name:<20}{r['calls']:>6}{r['wall_s']:>8.2f}{r['ideal_brief_s']:>8.2f}"
                  f"{r['ratio_brief']:>8.2f}{r['ideal_workers_s']:>8.2f}{r['ratio_workers']:>8.2f}"
                  f"{target:>13}{r['cpu_per_call_ms']:>13.2f}"
                  f"{mark(r['cpu_per_call_ms'] <= TARGET_CPU_MS):>6}{r['ttfr_s'] or float('nan'):>8.3f}"
                  f"{r['peak_rss_kb_max'] / 1024:>12.0f}{r['server_cpu_s'] if r['server_cpu_s'] is not None else float('nan'):>10.2f}")
        print("\n   per stage / details:")
        for r in runs:
            name = (f"C={r['concurrency']}" + (" big" if r["big_docs"] else "")
                    + (" aio" if r.get("transport") == "aiohttp" else ""))
            eg, ej, rr = r["elapsed_generate"], r["elapsed_judge"], r["rerun"]
            print(f"   {name:<8} generate {r['generate_wall_s']:.2f}s (CPU {r['cpu_per_call_generate_ms']:.2f} ms/call, "
                  f"per-call elapsed p50 {eg.get('p50')} p95 {eg.get('p95')} max {eg.get('max')}) | "
                  f"judge {r['judge_wall_s']:.2f}s (CPU {r['cpu_per_call_judge_ms']:.2f} ms/call, "
                  f"p50 {ej.get('p50')} p95 {ej.get('p95')} max {ej.get('max')}) | aggregate {r['aggregate_s']:.2f}s")
            print(f"            calls span (first call start -> last call end) generate {r['generate_calls_span_s']}s, "
                  f"judge {r['judge_calls_span_s']}s -> fixed stage overhead "
                  f"{r['generate_wall_s'] - (r['generate_calls_span_s'] or 0):.2f}s + "
                  f"{r['judge_wall_s'] - (r['judge_calls_span_s'] or 0):.2f}s")
            print(f"            ratio(rounds bound) {r['ratio_rounds']:.2f}; TTFR {r['ttfr_s']}s (first complete() "
                  f"{r['ttf_complete_s']}s; first make_provider {r['first_make_provider_s']}s incl. SDK import) | "
                  f"RSS before generate {r['rss_before_generate_kb'] / 1024:.0f} MB, peak {r['peak_rss_kb'] / 1024:.0f} MB")
            reps = r.get("repeats", [])
            print(f"            repeats: wall {[x['wall_s'] for x in reps]} ratio_w {[x['ratio_workers'] for x in reps]} "
                  f"CPU ms/call {[x['cpu_per_call_ms'] for x in reps]} | CPU user {r['cpu_user_s']}s sys {r['cpu_sys_s']}s, "
                  f"minor faults {r['minor_page_faults']} | ratio_w excluding TTFR {r['ratio_workers_excl_ttfr']} | "
                  f"CPU ms/call excluding the first make_provider (SDK import, {r['first_make_provider_cpu_s']} CPU-s) "
                  f"{r['cpu_per_call_excl_sdk_import_ms']}")
            print(f"            statuses gen {r['generate_status']} judge {r['judge_status']} "
                  f"complete={r['complete']} overall={r['overall']}")
            print(f"            rerun: {rr['wall_s']:.2f}s (open_run {rr['open_run_s']}, generate {rr['generate_s']}, "
                  f"judge {rr['judge_s']}, aggregate {rr['aggregate_s']}), new HTTP sends {rr['new_http_sends']}, "
                  f"new complete() {rr['new_complete_calls']}, new records {rr['new_records']} -> "
                  f"{mark(rr['new_http_sends'] == 0 and rr['new_complete_calls'] == 0)}")
        print("   TTFR = perf_counter at the first AsyncAPIClient._send_request (request built, body JSON-encoded,"
              " handed to the HTTP client) minus perf_counter just before evalnb.generate(run).")
        print("   CPU = time.process_time() of the worker process over generate+judge / calls (includes reading"
              " and JSON-encoding documents, JSONL appends, manifest writes).")
    bare = results.get("transport", [])
    if bare:
        print("\n== bare AsyncOpenAI + asyncio.Semaphore(C), one client, short prompts, ideal = N/C * latency "
              "(median of repeats by wall)")
        hdr = f"{'transport':<10}{'C':>4}{'calls':>7}{'wall s':>8}{'ideal s':>8}{'ratio':>7}{'CPU ms/call':>13}{'srv CPU s':>10}{'RSS MB':>8}"
        print(hdr)
        print("-" * len(hdr))
        for r in bare:
            print(f"{r['transport']:<10}{r['concurrency']:>4}{r['calls']:>7}{r['wall_s']:>8.2f}{r['ideal_s']:>8.2f}"
                  f"{r['ratio']:>7.2f}{r['cpu_per_call_ms']:>13.2f}{r['server_cpu_s'] or float('nan'):>10.1f}"
                  f"{r['peak_rss_kb'] / 1024:>8.0f}")
    for note in results.get("notes", []):
        print(f"   note: {note}")


def _group(filename: str, func: str) -> str:
    if filename.startswith("<frozen") or (filename == "~" and any(
            k in func for k in ("builtins.exec", "marshal", "builtins.compile", "_imp."))):
        return "imports"
    if filename == "~":   # built-in: name the method's owner where cProfile says it
        if "socket" in func or "select" in func:
            return "socket syscalls"
        if "encode" in func or "decode" in func:
            return "str encode/decode"
        if "read" in func or "write" in func:
            return "file/socket read+write"
        return "other built-ins"
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/work/main/"):
        if marker in path:
            rest = path.split(marker, 1)[1]
            top = rest.split("/", 1)[0]
            return {"bench": "bench instrumentation"}.get(top, top)
    if "/lib/python3" in path:
        mod = path.split("/lib/python3", 1)[1].split("/", 2)[1]
        return f"stdlib:{mod.removesuffix('.py')}"
    return "other"


def print_profile(name: str, path: Path, top: int = 12) -> None:
    """Where the worker's CPU went (cProfile with a CPU-time clock): by package, then functions."""
    import pstats
    stats = pstats.Stats(str(path))
    idle = sum(tt for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
               if filename == "~" and "poll" in func and "epoll" in func)
    total = (stats.total_tt - idle) or 1e-9  # type: ignore[attr-defined]
    groups: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~" and "poll" in func and "epoll" in func:
            continue
        g = _group(filename, func)
        groups[g] = groups.get(g, 0.0) + tt
    print(f"\n== profile {name} (cProfile over generate+judge; busy time = profiled time minus "
          f"{idle:.2f}s idle in epoll; profiler overhead inflates it): {total:.2f}s busy, self time by package")
    for g, tt in sorted(groups.items(), key=lambda kv: -kv[1])[:top]:
        print(f"   {tt:7.2f}s {tt / total:6.1%}  {g}")
    print("   cumulative, selected:")
    wanted = ("_async_transform_recursive", "_build_request", "openapi_dumps", "_assign_requests_to_connections",
              "_process_response", "construct_type", "prepare", "append", "render_answer_prompt",
              "update_manifest", "handle_async_request", "read")
    rows = []
    for (filename, line, func), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if func in wanted and ("openai" in filename or "evalnb" in filename or "httpcore2" in filename):
            rows.append((ct, nc, f"{Path(filename).parent.name}/{Path(filename).name}:{line}({func})"))
    for ct, nc, label in sorted(rows, reverse=True)[:top]:
        print(f"   {ct:7.2f}s {ct / total:6.1%}  n={nc:<6} {label}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--big-docs", action="store_true", help="run only the big-document configuration")
    p.add_argument("--no-big-docs", action="store_true", help="skip the big-document configuration")
    p.add_argument("--big-tasks", type=int, default=128)
    p.add_argument("--big-concurrency", type=int, default=64)
    p.add_argument("--compare-transport", action="store_true",
                   help="also run the bare AsyncOpenAI httpx2-vs-aiohttp experiment")
    p.add_argument("--transport-only", action="store_true", help="only the transport experiment")
    p.add_argument("--calls", type=int, default=1924, help="calls per bare-loop run")
    p.add_argument("--repeat", type=int, default=3, help="runs per configuration (median reported)")
    p.add_argument("--profile", metavar="DIR", help="cProfile each runner worker into DIR")
    p.add_argument("--keep", action="store_true", help="keep the temp directory")
    # worker modes (internal)
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--bare", type=int, help=argparse.SUPPRESS)
    p.add_argument("--transport", default="httpx2", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--workload-info", help=argparse.SUPPRESS)
    p.add_argument("--output-dir", help=argparse.SUPPRESS)
    p.add_argument("--result-file", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.one is not None or args.bare is not None:
        result = run_worker(args) if args.one is not None else run_bare(args)
        Path(args.result_file).write_text(json.dumps(result))
        return 0

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="evalnb-bench-"))
    results: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if v is not None},
                               "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                               "runner": [], "transport": [], "notes": []}
    server = None
    try:
        print(f"workdir {tmp}", flush=True)
        server = FakeServer(args.latency, tmp / "fakeserver.log")
        print(f"fake server {server.url} (pid {server.pid}, latency {args.latency}s)", flush=True)
        common = ["--url", server.url, "--server-pid", str(server.pid), "--latency", str(args.latency)]

        configs: list[tuple[int, bool, str]] = []
        if not args.transport_only:
            if not args.big_docs:
                configs += [(c, False, "httpx2") for c in args.concurrency]
            if args.big_docs or not args.no_big_docs:
                configs.append((args.big_concurrency, True, "httpx2"))
        missing = aiohttp_available()
        if (args.compare_transport or args.transport_only) and not args.big_docs:
            if missing:
                results["notes"].append(f"aiohttp transport skipped: {missing}")
            else:
                configs += [(c, False, "aiohttp") for c in args.concurrency]
        workloads: dict[bool, Path] = {}
        profiles: list[tuple[str, Path]] = []
        for C, big, transport in configs:
            if big not in workloads:
                t = time.perf_counter()
                wdir = tmp / ("workload-big" if big else "workload")
                info = make_workload(wdir, tasks=args.big_tasks if big else args.tasks,
                                     seed=args.seed, big_docs=big)
                (wdir / "info.json").write_text(json.dumps(info))
                workloads[big] = wdir / "info.json"
                print(f"workload {'big' if big else 'standard'}: {info['tasks']} tasks, documents "
                      f"{info['doc_chars_min']:,}-{info['doc_chars_max']:,} chars, "
                      f"{info['doc_chars_total'] / 1e6:.1f}M total ({time.perf_counter() - t:.1f}s)", flush=True)
            name = f"c{C}{'-big' if big else ''}{'-aiohttp' if transport == 'aiohttp' else ''}"
            reps = []
            for rep in range(args.repeat):
                argv = ["--one", str(C), "--transport", transport, *common, "--workload-info", str(workloads[big]),
                        "--output-dir", str(tmp / f"run-{name}-{rep}")]
                if args.profile:
                    Path(args.profile).mkdir(parents=True, exist_ok=True)
                    prof = Path(args.profile).resolve() / f"{name}-{rep}.prof"
                    argv += ["--profile", str(prof)]
                    if rep == 0:
                        profiles.append((name, prof))
                print(f"running {name} #{rep + 1}/{args.repeat} ...", flush=True)
                r = spawn(argv, tmp / f"worker-{name}-{rep}.log", timeout=900)
                reps.append(r)
                print(f"  wall {r['wall_s']:.2f}s ratio(workers) {r['ratio_workers']:.2f} CPU "
                      f"{r['cpu_per_call_ms']:.2f} ms/call peak RSS {r['peak_rss_kb'] / 1024:.0f} MB; rerun "
                      f"{r['rerun']['wall_s']:.2f}s, {r['rerun']['new_http_sends']} new sends", flush=True)
                shutil.rmtree(tmp / f"run-{name}-{rep}", ignore_errors=True)
            # Report the run with the median wall time; keep every repeat's headline figures.
            summary = dict(sorted(reps, key=lambda x: x["wall_s"])[len(reps) // 2])
            summary["repeats"] = [{k: x[k] for k in ("wall_s", "ratio_workers", "cpu_per_call_ms",
                                                     "ttfr_s", "peak_rss_kb")} for x in reps]
            summary["peak_rss_kb_max"] = max(x["peak_rss_kb"] for x in reps)
            results["runner"].append(summary)

        if args.compare_transport or args.transport_only:
            transports = ["httpx2"] + ([] if missing else ["aiohttp"])
            for C in args.concurrency:
                for transport in transports:
                    print(f"bare loop {transport} C={C} ...", flush=True)
                    reps = [spawn(["--bare", str(C), "--transport", transport, "--calls", str(args.calls),
                                   *common], tmp / f"bare-{transport}-{C}-{rep}.log", timeout=600)
                            for rep in range(args.repeat)]
                    r = dict(sorted(reps, key=lambda x: x["wall_s"])[len(reps) // 2])
                    r["repeats"] = [{k: x[k] for k in ("wall_s", "ratio", "cpu_per_call_ms")} for x in reps]
                    results["transport"].append(r)
                    print(f"  ratio {[x['ratio'] for x in reps]} CPU ms/call {[x['cpu_per_call_ms'] for x in reps]}",
                          flush=True)
        if any(r["big_docs"] for r in results["runner"]) or results["runner"]:
            results["notes"].append(
                "targets: ratio_w >= 0.9 at C=16 and >= 0.85 at C=64 (judged on ideal(workers), the "
                "achievable bound; ratio_b uses the brief's formula, which ignores that each judge "
                "endpoint has its own C workers, and so can exceed 1); CPU <= 2 ms/call; big-docs peak RSS < 1 GiB")
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    results["bench_wall_s"] = round(time.perf_counter() - started, 1)
    print_report(results)
    if args.profile:
        for name, prof in profiles:
            if prof.exists():
                print_profile(name, prof)
    print(f"\nbench total {results['bench_wall_s']}s; figures written to {RESULTS.relative_to(REPO)}")
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
