"""What a run's fingerprint costs on a large task file.

A WildTrace task file holding the sample's twelve tasks and one task whose question carries a
pasted document of 2.85 million characters (the ``en`` cap), and a second with 20 such tasks
(57 million characters: WildTrace keeps its documents in the corpus, which the task hash never
reads; a benchmark whose items carry their material in the task file meets this). Each
is loaded once; then ``run_fingerprint`` (what ``open_run`` and ``evalnb verify`` compute) is
timed, best of five, beside the benchmark's own parts and the shared part alone. Prints one
line per figure.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalnb.records.fingerprint import run_fingerprint, shared_parts   # noqa: E402
from evalnb.pipeline.run import load_config, make_benchmark   # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "evalnb" / "data" / "wildtrace"
CHARS = 2_850_000


def task_file(root: Path, big: int) -> Path:
    tasks = json.loads((SAMPLE / "tasks.json").read_text("utf-8"))["tasks"]
    document = ("The quarterly report shows revenue grew in every region. " * 60000)[:CHARS]
    template = tasks[0]
    tasks += [template | {"task_id": f"big-{i}", "question_text": f"{i}: {document}"} for i in range(big)]
    path = root / f"tasks-{big}.json"
    path.write_text(json.dumps({"tasks": tasks}), "utf-8")
    return path


def best(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(data: Path, out: Path) -> str:
    config, bench = load_config({
        "benchmark": "wildtrace", "run_name": "fp", "output_dir": str(out), "data": str(data),
        "corpus": str(SAMPLE / "corpus"),
        "model": {"provider": "offline", "name": "extractive-bm25", "caps": {"en": 50000, "cjk": 20000}},
        "judges": [{"provider": "offline", "name": n} for n in ("rubric-overlap", "rubric-overlap-strict")]})
    benchmark = make_benchmark(config, bench)
    chars = sum(len(t.question) for t in benchmark.tasks)
    whole = best(lambda: run_fingerprint(config, benchmark))
    own = best(benchmark.fingerprint_parts)
    shared = best(lambda: shared_parts(config, benchmark))
    return (f"{len(benchmark.tasks)} tasks, {chars / 1e6:.2f}M characters of questions "
            f"({data.stat().st_size / 1e6:.1f} MB file): run_fingerprint {whole * 1000:.0f} ms; benchmark parts "
            f"{own * 1000:.0f} ms; shared part {shared * 1000:.0f} ms; parts "
            f"{', '.join(sorted(run_fingerprint(config, benchmark)['parts']))}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for big in (1, 20):
            print(measure(task_file(Path(tmp), big), Path(tmp) / "run"))


if __name__ == "__main__":
    main()
