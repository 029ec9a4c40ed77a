"""Benchmark the response cache: the lookup's cost per call, and a fully cached rerun.

    python bench/bench_cache.py                  # 100,000 entries, 2.85M-character prompts, 481 tasks
    python bench/bench_cache.py --entries 10000  # a smaller cache

1. Lookup: a cache folder filled with ``--entries`` entries, then, for prompts of 2,850,000
   characters, the time to build the key (the request body as the SDK sends it, hashed: the
   prompt is never stored) and to look it up, both for a miss and for a hit.
2. Rerun: the 481-task WildTrace workload of bench/bench_runner.py (one answer and three
   judges per task, against ``python -m tests.fakeserver``) run into a fresh directory with an
   empty cache, then the same parameters into another fresh directory: every answer reused.
   Side by side: wall time, CPU time and requests the server received.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_runner import CAPS, make_workload, records, start_server  # noqa: E402

PROMPT_CHARS = 2_850_000


def lookup_figures(root: Path, entries: int, probes: int) -> dict[str, Any]:
    from evalnb.core.run_config import EndpointConfig
    from evalnb.core.types import Call, ChatRequest, Prepared
    from evalnb.execution.cache.reuse import CallCache
    from evalnb.execution.cache.settings import CacheSettings
    from evalnb.execution.cache.store import CacheStore
    from evalnb.providers.openai_compat import OpenAIProvider

    store = CacheStore(root)
    t0 = time.perf_counter()
    content = {"called_at": time.time(), "run": "bench", "endpoint": {"provider": "openai", "base_url": None,
                                                                      "model": "m"},
               "completion": {"text": "An answer of a few hundred characters. " * 8, "status": "ok"}}
    for i in range(entries):
        store.put(f"{i:064x}", content)
    fill_s = time.perf_counter() - t0
    endpoint = EndpointConfig(provider="openai", name="bench-model", base_url="http://127.0.0.1:9/v1")
    provider = OpenAIProvider("bench-model", base_url=endpoint.base_url, api_key_env=None, concurrency=1, timeout=60)
    cache = CallCache(CacheSettings(root), {"model": endpoint}, run="bench")
    prompt = ("Lorem ipsum dolor sit amet. " * (PROMPT_CHARS // 28 + 1))[:PROMPT_CHARS]
    miss, key_ms, hit = [], [], []
    for n in range(probes):
        request = ChatRequest(f"{n:06d}" + prompt[6:], max_tokens=8192, temperature=0.0)
        call = Call(f"k{n}", "model", lambda: Prepared(None))
        t = time.perf_counter()
        lookup = cache.lookup(call, provider, request)
        key_ms.append((time.perf_counter() - t) * 1000)
        assert lookup is not None
        t = time.perf_counter()
        assert cache.reuse(lookup) is None
        miss.append((time.perf_counter() - t) * 1000 + key_ms[-1])
        cache.store.put(lookup.key, content)
        t = time.perf_counter()
        assert cache.lookup(call, provider, request) == lookup and cache.reuse(lookup) is not None
        hit.append((time.perf_counter() - t) * 1000)
    size = sum(p.stat().st_size for p in (root / "responses").glob("*/*/*.json"))
    return {"entries": entries, "fill_s": round(fill_s, 1), "bytes_per_entry": round(size / (entries + probes)),
            "prompt_chars": PROMPT_CHARS, "key_ms": round(statistics.median(key_ms), 2),
            "miss_ms": round(statistics.median(miss), 2), "hit_ms": round(statistics.median(hit), 2)}


def timed_run(params: dict[str, Any]) -> dict[str, Any]:
    import evalnb

    t0, cpu0 = time.perf_counter(), time.process_time()
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    run.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    done = records(Path(params["output_dir"]))
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "records": len(done),
            "requests": sum(r["attempts"] for r in done),
            "reused": sum(1 for r in done if (r.get("cache") or {}).get("hit"))}


def rerun_figures(tmp: Path, tasks: int, latency: float) -> dict[str, Any]:
    work = make_workload(tmp / "workload", tasks=tasks, seed=0, big=False)
    server, url = start_server(latency, tmp / "server.log")
    try:
        def params(name: str) -> dict[str, Any]:
            return {"benchmark": "wildtrace", "run_name": "bench", "output_dir": str(tmp / name),
                    "data": work["data"], "corpus": work["corpus"], "concurrency": 16,
                    "model": {"provider": "openai", "name": "bench-model", "base_url": url, "caps": CAPS},
                    "judges": [{"provider": "openai", "name": f"bench-judge-{k}", "base_url": url} for k in "abc"],
                    "cache": {"path": str(tmp / "cache")}}
        return {"tasks": tasks, "latency_s": latency, "uncached": timed_run(params("first")),
                "cached": timed_run(params("second"))}
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--probes", type=int, default=20)
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--latency", type=float, default=0.2, help="the fake server's seconds per reply")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalnb-bench-cache-") as folder:
        tmp = Path(folder)
        os.environ["EVALNB_CACHE"] = str(tmp / "cache")   # never the user's cache
        lookup = lookup_figures(tmp / "lookup-cache", args.entries, args.probes)
        print(json.dumps({"lookup": lookup}), flush=True)
        rerun = rerun_figures(tmp, args.tasks, args.latency)
        print(json.dumps({"rerun": rerun}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
