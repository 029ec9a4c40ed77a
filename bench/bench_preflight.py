"""How long the UTF-8 check of a full-size corpus takes before a run writes anything.

481 documents of 2.85 million characters (every tenth one Chinese), written once to a
temporary directory; then the WildTrace task loader, which streams every document through
an incremental UTF-8 decoder (once per `evalnb run`: its stage kernels trust it), timed (wall and peak RSS). Prints one line per figure.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalnb.benchmarks.wildtrace import WildTrace  # noqa: E402
from evalnb.pipeline.run import load_config   # noqa: E402

TASKS, CHARS = 481, 2_850_000


def make_corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    english = ("The quarterly report shows revenue grew in every region. " * 60000)[:CHARS]
    chinese = ("季度报告显示各地区收入均有增长。" * 200000)[:CHARS]
    tasks = []
    for i in range(TASKS):
        (corpus / f"doc{i}.txt").write_text(chinese if i % 10 == 0 else english, "utf-8")
        tasks.append({"task_id": f"t{i}", "question_text": "What grew?", "corpus_file": f"doc{i}.txt",
                      "ground_truth": {"scoring_rubric": [{"points": 100, "correct_criterion": "revenue"}]}})
    (root / "tasks.json").write_text(json.dumps({"tasks": tasks}))
    return corpus


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = make_corpus(root)
        size = sum(p.stat().st_size for p in corpus.iterdir())
        params = {"benchmark": "wildtrace", "run_name": "pre", "output_dir": str(root / "run"),
                  "data": str(root / "tasks.json"), "corpus": str(corpus),
                  "model": {"provider": "offline", "name": "extractive-bm25"},
                  "judges": [{"provider": "offline", "name": "rubric-overlap"}]}
        config, _ = load_config(params)
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            WildTrace(config).check_documents()
            runs.append(time.perf_counter() - started)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"documents: {TASKS} x {CHARS:,} characters ({size / 1e9:.2f} GB on disk, every tenth Chinese)")
        print(f"task load with UTF-8 check (page cache warm), median of 3: {sorted(runs)[1]:.2f} s")
        print(f"peak RSS of the process: {rss:.0f} MB")


if __name__ == "__main__":
    main()
