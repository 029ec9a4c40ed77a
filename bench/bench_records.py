"""What reading a finished run's stores costs: ``evalnb status`` and a stage pass with nothing left to do.

A WildTrace-shaped run directory of 481 tasks, made offline: the tasks and a corpus of
20,000-character documents, run through ``open_run``, ``generate``, ``judge`` (three offline
judges) and ``aggregate``, so every store line is a real record; then every document is
rewritten to 2,850,000 characters (every tenth one Chinese), the size the ``en`` cap keeps, so
what a command reads from the corpus is full size. The fingerprint hashes the task fields, not
the documents, so the run resumes as it was. Then, each the median of ``--repeat`` (3):

* ``evalnb status RUN_DIR`` (its text, printed to nowhere);
* ``generate(run)`` and ``judge(run)``, neither with a call left to make, each on a run opened
  afresh (``open_run``, not timed), as each stage notebook opens its own.

Beside each time: how many times each store file was read whole (``Path.read_bytes`` of a
``.jsonl``, the way every reader of a store reads it), which says where the time goes. Prints
one line per figure and never asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import evalnb   # noqa: E402
from evalnb.app.inspection.status import run_status   # noqa: E402

TASKS, CHARS, SMALL = 481, 2_850_000, 20_000
ENGLISH = "The quarterly report shows revenue grew in every region. "
CHINESE = "季度报告显示各地区收入均有增长。"


def write_corpus(corpus: Path, chars: int) -> None:
    english, chinese = (ENGLISH * (chars // len(ENGLISH) + 1))[:chars], (CHINESE * (chars // len(CHINESE) + 1))[:chars]
    for i in range(TASKS):
        (corpus / f"doc{i}.txt").write_text(chinese if i % 10 == 0 else english, "utf-8")


def make_run(root: Path) -> dict[str, Any]:
    corpus = root / "corpus"
    corpus.mkdir()
    write_corpus(corpus, SMALL)
    tasks = [{"task_id": f"t{i}", "question_text": f"What grew in report {i}?", "corpus_file": f"doc{i}.txt",
              "ground_truth": {"scoring_rubric": [{"points": 60, "correct_criterion": "revenue grew"},
                                                  {"points": 40, "correct_criterion": "every region"}]}}
             for i in range(TASKS)]
    (root / "tasks.json").write_text(json.dumps({"tasks": tasks}), "utf-8")
    params = {"benchmark": "wildtrace", "run_name": "records", "output_dir": str(root / "run"),
              "data": str(root / "tasks.json"), "corpus": str(corpus),
              "model": {"provider": "offline", "name": "extractive-bm25", "caps": {"en": CHARS, "cjk": CHARS}},
              "judges": [{"provider": "offline", "name": n}
                         for n in ("rubric-overlap", "rubric-overlap-strict", "rubric-overlap-lenient")]}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run = evalnb.open_run(params)
        evalnb.generate(run)
        evalnb.judge(run)
        evalnb.aggregate(run)
    write_corpus(corpus, CHARS)
    return params


@contextlib.contextmanager
def store_reads() -> Iterator[Counter[str]]:
    """Whole reads of ``.jsonl`` files, by name, while the block runs."""
    counts: Counter[str] = Counter()
    original = Path.read_bytes

    def counting(self: Path) -> bytes:
        if self.suffix == ".jsonl":
            counts[self.name] += 1
        return original(self)

    Path.read_bytes = counting   # type: ignore[method-assign]
    try:
        yield counts
    finally:
        Path.read_bytes = original   # type: ignore[method-assign]


def timed(fn: Callable[[Any], Any], make: Callable[[], Any], repeat: int) -> tuple[float, Counter[str]]:
    """The median time of ``fn(make())`` (``make`` untimed: a fresh run each time, as each
    stage notebook opens its own) and the store reads of its last repeat."""
    times: list[float] = []
    reads: Counter[str] = Counter()
    for _ in range(repeat):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            made = make()
        with store_reads() as counted, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            start = time.perf_counter()
            fn(made)
            times.append(time.perf_counter() - start)
        reads = counted
    return sorted(times)[len(times) // 2], reads   # the reads of the last repeat (each repeat reads alike)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        params = make_run(root)
        run_dir = Path(params["output_dir"])
        stores = {p.name: p.stat().st_size for p in sorted(run_dir.glob("*.jsonl"))}
        print(f"run directory: {TASKS} tasks, documents of {CHARS:,} characters (every tenth Chinese), made in "
              f"{time.perf_counter() - started:.0f} s; stores: "
              + ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in stores.items()))
        opened = (lambda: evalnb.open_run(params))
        for label, fn, make in (("evalnb status", lambda _: run_status(run_dir), lambda: None),
                                ("generate, nothing left", evalnb.generate, opened),
                                ("judge, nothing left", evalnb.judge, opened)):
            seconds, reads = timed(fn, make, args.repeat)
            print(f"{label}: {seconds:.2f} s (median of {args.repeat}); store reads: "
                  + (", ".join(f"{name} x{n}" for name, n in sorted(reads.items())) or "none"))


if __name__ == "__main__":
    main()
