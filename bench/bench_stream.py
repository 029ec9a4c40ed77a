"""Streaming's cost: the 481-task workload with every call streamed beside the same workload
not streamed, against a fake server that generates at a fixed token rate.

    python bench/bench_stream.py                     # C=16, 400 tokens/s, one repeat, two reply lengths
    python bench/bench_stream.py --repeat 3 --token-rate 200 --reply-chars 30 4000

The server (``python -m tests.fakeserver --latency L --token-rate R``, its own process) takes
``L`` seconds to a first token and then generates at ``R`` tokens per second (about four
characters a token): a streamed reply sends an event of 16 characters every 4/R seconds, a
non-streamed one waits for the whole generation and then answers at once. The contestant's
reply is each of ``--reply-chars`` in turn: by default the workload's own (bench_runner.py's
30-character answer, two events) and a 1,200-character answer (75 events); the judges' replies
are the fake server's short verdict (three events). Streaming's CPU grows with the events a call
receives (each is a wakeup of the event loop, a read and a JSON decode), so the figures are
given per event too: ``(streamed - not streamed CPU per call) / events per call``; and a last
measurement puts evalnb's cost per event beside a bare aiohttp client's (the event loop's
floor) and the openai SDK's own typed-chunk iterator, on the same paced streams.
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
    cpu_generate = time.process_time() - cpu0
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
            "generate_cpu_ms_per_call": cpu_generate / len(model) * 1000,
            "judge_cpu_ms_per_call": (cpu - cpu_generate) / (calls - len(model)) * 1000,
            "model_total_s_median": statistics.median(x["total_s"] for x in model),
            "model_first_token_s_median": (statistics.median(x["first_token_s"] for x in model)
                                           if stream else None)}


PER_EVENT_CALLS = 400


def per_event_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """CPU per streamed event over the same paced 1,200-character streams (16 in flight): a bare
    aiohttp client that only reads the bytes, streamed and not (the event loop's floor), the
    openai SDK's own typed-chunk iterator, and evalnb's OpenAI provider streamed and not."""
    import asyncio

    import aiohttp
    import openai
    import uvloop

    from evalnb.config import EndpointConfig
    from evalnb.providers import make_provider
    from evalnb.providers.base import ChatRequest

    url, n = spec["url"], PER_EVENT_CALLS
    body = {"model": "m", "messages": [{"role": "user", "content": "q" * 1000}], "max_tokens": 64}

    async def measure(one: Any) -> float:
        await one()   # warm: imports, first connection
        gate = asyncio.Semaphore(16)

        async def gated() -> None:
            async with gate:
                await one()
        cpu = time.process_time()
        await asyncio.gather(*(gated() for _ in range(n)))
        return (time.process_time() - cpu) / n * 1000

    async def main() -> dict[str, float]:
        out: dict[str, float] = {}
        async with aiohttp.ClientSession() as session:
            for stream in (True, False):
                async def bare(stream: bool = stream) -> None:
                    async with session.post(url + "/chat/completions", json=body | {"stream": stream}) as response:
                        async for _ in response.content.iter_any():
                            pass
                out[f"bare aiohttp {'streamed' if stream else 'not streamed'}"] = await measure(bare)
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, http_client=openai.DefaultAioHttpClient())

        async def sdk() -> None:
            async for _ in await client.chat.completions.create(**body, stream=True):
                pass
        out["openai SDK typed chunks"] = await measure(sdk)
        await client.close()
        for stream in (True, False):
            provider = make_provider(EndpointConfig(provider="openai", name="m", base_url=url, concurrency=16,
                                                    stream=stream))
            assert provider is not None

            async def call(provider: Any = provider) -> None:
                await provider.complete(ChatRequest("q" * 1000, 64))
            out[f"evalnb {'streamed' if stream else 'not streamed'}"] = await measure(call)
            await provider.aclose()
        return out

    return uvloop.run(main())


def start_server(args: Any, reply_chars: int, log: Path) -> tuple[subprocess.Popen[str], str]:
    reply = ("The answer is in the document. " * (reply_chars // 31 + 1))[:reply_chars]
    server = subprocess.Popen([sys.executable, "-m", "tests.fakeserver", "--latency", str(args.latency),
                               "--token-rate", str(args.token_rate), "--reply-text", reply],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    line = server.stdout.readline().strip()   # type: ignore[union-attr]
    if not line.startswith("READY "):
        server.terminate()
        raise RuntimeError(f"fake server did not start ({line!r}); see {log}")
    return server, line.split(" ", 1)[1] + "/v1"


def events_per_call(reply_chars: int) -> float:
    """Events a streamed call of this workload receives: its text in 16-character events,
    plus the role, finish, usage and [DONE] events; the judges' verdict likewise."""
    model, judge = -(-reply_chars // 16) + 4, -(-JUDGE_REPLY_CHARS // 16) + 4
    return (model + JUDGES * judge) / (1 + JUDGES)


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
    p.add_argument("--reply-chars", type=int, nargs="+", default=[30, 1200],
                   help="characters of the contestant's reply, one configuration each")
    p.add_argument("--tasks", type=int, default=481)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=20260)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(per_event_worker(spec) if spec.get("per_event") else worker(spec)))
        return 0

    started, tmp = time.perf_counter(), Path(tempfile.mkdtemp(prefix="evalnb-bench-stream-"))
    configs: list[dict[str, Any]] = []
    try:
        work = make_workload(tmp / "workload", tasks=args.tasks, seed=args.seed, big=False)
        for chars in args.reply_chars:
            ideal = ideal_seconds(args.tasks, args.concurrency, args.latency, args.token_rate, chars)
            rows: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
            server, url = start_server(args, chars, tmp / "fakeserver.log")
            try:
                for i in range(args.repeat):
                    for stream in (False, True):
                        spec = {"concurrency": args.concurrency, "url": url, "workload": work, "stream": stream,
                                "out": str(tmp / f"run-{chars}-{stream}-{i}")}
                        r = spawn(spec, tmp / "worker.log")
                        r["ideal_s"], r["ratio"] = ideal, ideal / r["wall_s"]
                        rows[stream].append(r)
                        print(f"reply {chars} chars, {'streamed' if stream else 'not streamed'} #{i + 1}: "
                              f"wall {r['wall_s']:.2f}s (ideal {ideal:.2f}) CPU {r['cpu_ms_per_call']:.2f} ms/call "
                              f"RSS {r['peak_rss_mb']:.0f} MB", flush=True)
                        shutil.rmtree(spec["out"])
            finally:
                server.terminate()
                server.wait(10)
            configs.append(summary(chars, ideal, rows))
        server, url = start_server(args, 1200, tmp / "fakeserver.log")
        try:
            per_event = spawn({"per_event": True, "url": url}, tmp / "worker.log")
        finally:
            server.terminate()
            server.wait(10)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    targets = report(configs, args)
    events = -(-1200 // 16) + 4
    print(f"\nCPU per call and per event, {PER_EVENT_CALLS} calls of 1,200 characters ({events} events) at "
          f"{args.token_rate:g} tokens/s, 16 in flight (per event: beyond the same client not streamed):")
    for name, ms in per_event.items():
        base = per_event["bare aiohttp not streamed" if name.startswith("bare") else "evalnb not streamed"]
        extra = f"{(ms - base) * 1000 / events:>8.0f} us/event" if "not streamed" not in name else ""
        print(f"  {name:<28}{ms:>7.2f} ms/call{extra}")
    RESULTS.write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "bench_seconds": round(time.perf_counter() - started),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "args": {k: v for k, v in vars(args).items() if k != "worker"}, "configs": configs, "targets": targets,
        "per_event_ms_per_call": per_event,
    }, indent=2) + "\n")
    print(f"\n{time.perf_counter() - started:.0f}s; figures in {RESULTS.relative_to(REPO)}")
    return 0


def summary(chars: int, ideal: float, rows: dict[bool, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over the repeats, and streaming's CPU per call and per event."""
    def med(stream: bool, key: str) -> float:
        return round(statistics.median(r[key] for r in rows[stream]), 4)

    out: dict[str, Any] = {"reply_chars": chars, "ideal_s": round(ideal, 3), "events_per_call": events_per_call(chars)}
    for stream, name in ((False, "not_streamed"), (True, "streamed")):
        out[name] = {k: med(stream, k) for k in ("wall_s", "ratio", "cpu_ms_per_call", "peak_rss_mb",
                                                  "generate_cpu_ms_per_call", "judge_cpu_ms_per_call")} | {
            "calls": rows[stream][0]["calls"], "streamed_calls": rows[stream][0]["streamed_calls"],
            "statuses": rows[stream][0]["statuses"], "repeats": rows[stream]}
    extra = out["streamed"]["cpu_ms_per_call"] - out["not_streamed"]["cpu_ms_per_call"]
    out["cpu_ratio"] = round(out["streamed"]["cpu_ms_per_call"] / out["not_streamed"]["cpu_ms_per_call"], 3)
    out["cpu_us_per_event"] = round(extra * 1000 / out["events_per_call"], 1)
    return out


def report(configs: list[dict[str, Any]], args: Any) -> list[str]:
    print(f"\nT={args.tasks} C={args.concurrency}, {args.latency} s to the first token, {args.token_rate:g} tokens/s; "
          "ideal = (T/C)(L + g_model) + (3T/C)(L + g_judge), g = reply characters / 4 / rate")
    head = (f"{'row':<26}{'calls':>6}{'streamed':>9}{'wall s':>8}{'ideal s':>8}{'ratio':>7}{'CPU ms/call':>12}"
            f"{'peak RSS MB':>12}")
    print(head + "\n" + "-" * len(head))
    targets = []
    for c in configs:
        for name in ("not_streamed", "streamed"):
            r = c[name]
            label = f"reply {c['reply_chars']}: {name.replace('_', ' ')}"
            print(f"{label:<26}{r['calls']:>6}{r['streamed_calls']:>9}{r['wall_s']:>8.2f}{c['ideal_s']:>8.2f}"
                  f"{r['ratio']:>7.2f}{r['cpu_ms_per_call']:>12.2f}{r['peak_rss_mb']:>12.0f}")
            if set(r["statuses"]) - {"ok", "out_of_context"}:
                print(f"   WARNING: statuses {r['statuses']}")
        print(f"{'':<26}streaming: {c['cpu_ratio']:.2f}x CPU per call, {c['events_per_call']:.1f} events per call, "
              f"{c['cpu_us_per_event']:.0f} us CPU per event; CPU ms per generate / judge call: "
              + ", ".join(f"{c[n]['generate_cpu_ms_per_call']:.2f} / {c[n]['judge_cpu_ms_per_call']:.2f} "
                          f"{n.replace('_', ' ')}" for n in ("not_streamed", "streamed")))
        wall_ok = c["streamed"]["ratio"] >= c["not_streamed"]["ratio"] * (1 - TARGET_WALL_SLACK)
        targets += [f"reply {c['reply_chars']}: streamed CPU per call {c['cpu_ratio']:.2f}x the non-streamed "
                    f"<= {TARGET_CPU_RATIO}  {'PASS' if c['cpu_ratio'] <= TARGET_CPU_RATIO else 'MISS'}",
                    f"reply {c['reply_chars']}: streamed wall {c['streamed']['wall_s']:.2f}s vs "
                    f"{c['not_streamed']['wall_s']:.2f}s not streamed, ideal {c['ideal_s']:.2f}s (ratio "
                    f"{c['streamed']['ratio']:.2f} vs {c['not_streamed']['ratio']:.2f})  {'PASS' if wall_ok else 'MISS'}"]
    print("\ntargets:\n  " + "\n  ".join(targets))
    return targets


if __name__ == "__main__":
    sys.exit(main())
