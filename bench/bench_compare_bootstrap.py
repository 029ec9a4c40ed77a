"""What a compare's bootstraps cost: 10 runs x 5,000 items at 10,000 replicates.

Ten hand-made finished WildTrace runs (seeded task scores, 250 documents of 20 tasks) are
compared; the script times, in one process, the protocol's item bootstrap (every declared metric
of each run) run by run as before (:func:`evalnb.comparison.leaderboard.intervals`), and with
the runs' replicates drawn once (:func:`evalnb.comparison.leaderboard.all_intervals`, checked
equal to the bit), then the joint
cluster bootstrap behind the pairs and ranks (:func:`evalnb.comparison.leaderboard.joint`),
then the whole leaderboard; and prints the peak resident memory. ``--items``, ``--runs`` and
``--n-boot`` change the size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import evalnb   # noqa: E402
from evalnb.comparison import leaderboard   # noqa: E402
from tests.test_compare import constructed_run   # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--n-boot", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        documents = {f"t{i}": f"doc{i // 20}.txt" for i in range(args.items)}
        runs = [constructed_run(root, f"model{k}", {t: float(rng.integers(0, 4)) / 3 for t in documents},
                                documents=documents) for k in range(args.runs)]
        cmp = evalnb.open_compare(runs, root / "cmp", n_boot=args.n_boot, seed=0)
        start = time.perf_counter()
        one_by_one = [leaderboard.intervals(cmp, run) for run in cmp.runs]   # as before: each run drawn alone
        protocol = time.perf_counter() - start
        start = time.perf_counter()
        together = leaderboard.all_intervals(cmp, cmp.runs)   # now: the runs' replicates drawn once
        batched = time.perf_counter() - start
        assert together == one_by_one   # the same intervals, to the bit
        start = time.perf_counter()
        leaderboard.joint(cmp)
        joint = time.perf_counter() - start
        start = time.perf_counter()
        leaderboard.leaderboard(cmp)
        whole = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.runs} runs x {args.items} items, {args.n_boot} replicates: protocol item bootstraps run by run "
          f"(before) {protocol:.1f} s, drawn once for all runs (now) {batched:.1f} s; joint cluster bootstrap "
          f"{joint:.2f} s; whole leaderboard {whole:.1f} s; peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
