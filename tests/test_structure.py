"""The structure: shared layers that never name a benchmark, benchmark
classes that mypy checks against the interface, and inputs read once per stage."""

from __future__ import annotations

import builtins
import json
import pathlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.records import lock
from evalnb.benchmarks import BENCHMARKS, benchmark_for
from tests.conftest import ROOT, SAMPLE, offline_params, sample_tasks

# The shared layers never name a benchmark: everything but the benchmarks' own folders, the
# demo (which lists the shipped samples), the help texts' examples (the same samples) and probe-window (WildTrace's caps are its subject).
OWN_A_BENCHMARK = ("app/demo.py", "pipeline/probe.py", "app/parser.py")   # parser: its help examples use the shipped samples
SHARED_LAYERS = sorted(str(p.relative_to(ROOT / "evalnb")) for p in (ROOT / "evalnb").rglob("*.py")
                       if "benchmarks" not in p.parts[len(ROOT.parts):] and p.name != "__init__.py"
                       and p.parent.name != "examples" and str(p.relative_to(ROOT / "evalnb")) not in OWN_A_BENCHMARK)
NAMES = re.compile("|".join(BENCHMARKS), re.I)


@pytest.mark.parametrize("module", SHARED_LAYERS)
def test_no_benchmark_name_in_a_shared_layer(module: str) -> None:
    text = (ROOT / "evalnb" / module).read_text("utf-8")
    found = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if NAMES.search(line)]
    assert not found, f"evalnb/{module} names a benchmark: {found}"


@pytest.mark.parametrize("notebook", ["04_report.ipynb", "05_compare.ipynb"])
def test_no_benchmark_name_in_the_report_and_compare_notebooks(notebook: str) -> None:
    cells = json.loads((ROOT / "notebooks" / notebook).read_text("utf-8"))["cells"]
    found = [c["source"] for c in cells if NAMES.search("".join(c["source"])) and "parameters" not in
             c["metadata"].get("tags", [])]
    assert not found


def test_every_registered_benchmark_resolves_to_its_class() -> None:
    for name in BENCHMARKS:
        bench = benchmark_for(name)
        assert bench.NAME == name and bench.metrics() and any(m.headline for m in bench.metrics())
        assert bench.STATUSES[0] == "ok" and len(set(bench.STATUSES)) == len(bench.STATUSES)


BROKEN = '''
from collections.abc import Mapping
from typing import Any
from evalnb.benchmarks import Benchmark
from evalnb.benchmarks.wildtrace import WildTrace


class NoEvidence(WildTrace):
    evidence = None   # type: ignore[assignment]  # the item evidence is missing


class WrongScore(WildTrace):
    def score(self, responses: Mapping[str, Any]) -> dict[str, Any]:   # type: ignore[override]
        return {}   # the judgements forgotten


A: type[Benchmark] = NoEvidence
B: type[Benchmark] = WrongScore
'''


def test_mypy_refuses_a_class_that_does_not_conform(tmp_path: Path) -> None:
    """The registry's conformance block is checked by mypy (test_static runs it over evalnb):
    here, that the same check does catch a benchmark that lacks or mistypes a member."""
    (tmp_path / "broken.py").write_text(BROKEN)
    done = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
                           "--follow-imports=silent", str(tmp_path / "broken.py")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if "broken.py" in line and "error" in line]
    assert len(errors) == 2, done.stdout
    for cls in ("NoEvidence", "WrongScore"):
        assert any(f'expression has type "type[{cls}]", variable has type "type[Benchmark]"' in e
                   for e in errors), done.stdout


# --- each input read once per stage ------------------------------------------------------------------

class OpenCounter:
    """Counts every opening of a file under the watched folders (Path.open and open())."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, watched: list[Path]) -> None:
        self.counts: Counter[str] = Counter()
        self.watched = [w.resolve() for w in watched]
        original_path_open, original_open = pathlib.Path.open, builtins.open

        def path_open(path: Path, *args: Any, **kwargs: Any) -> Any:
            self._count(path)
            return original_path_open(path, *args, **kwargs)

        def plain_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, (str, Path)):
                self._count(Path(file))
            return original_open(file, *args, **kwargs)
        monkeypatch.setattr(pathlib.Path, "open", path_open)
        monkeypatch.setattr(builtins, "open", plain_open)

    def _count(self, path: Path) -> None:
        resolved = path.resolve()
        if any(resolved == w or w in resolved.parents for w in self.watched):
            self.counts[str(resolved)] += 1

    def take(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts


GK = ROOT / "evalnb" / "data" / "geoktools"
GEQ = ROOT / "evalnb" / "data" / "geoexpertqueries"


def _inputs(tmp_path: Path) -> dict[str, tuple[dict[str, Any], list[Path]]]:
    wildtrace = offline_params(tmp_path / "wt")
    predictions = [tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"]
    for path in predictions:
        path.write_bytes((GK / "predictions.jsonl").read_bytes())
    geoktools = {"benchmark": "geoktools", "run_name": "gk", "output_dir": str(tmp_path / "gk"),
                 "data": str(GK / "cases.json"), "predictions": [str(p) for p in predictions]}
    geq = {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp_path / "geq"),
           "data": str(GEQ / "queries.json"), "traces": str(GEQ / "traces.jsonl"), "rating_date": "2026-11-30",
           "judges": [{"provider": "offline", "name": "rubric-overlap"}]}
    return {"wildtrace": (wildtrace, [SAMPLE, ROOT / "evalnb" / "benchmarks"]),
            "geoktools": (geoktools, [GK, *predictions, ROOT / "evalnb" / "benchmarks"]),
            "geoexpertqueries": (geq, [GEQ, ROOT / "evalnb" / "benchmarks"])}


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_each_input_file_is_read_once_per_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Data, predictions, traces, prompt and scale files: once per stage. A corpus document is
    read when a call needs it (never all held at once): once per task that uses it."""
    params, watched = _inputs(tmp_path)[name]
    uses: Counter[str] = Counter()
    if name == "wildtrace":
        uses.update(str((SAMPLE / "corpus" / t["corpus_file"]).resolve()) for t in sample_tasks())
    if name == "geoexpertqueries":
        # The offline judge cannot rate trajectories; the example rater stands in (a command).
        params["judges"] = [{"provider": "command", "name": "example-keyword-rater",
                             "command": [sys.executable, str(ROOT / "evalnb" / "examples" / "keyword_rater.py")],
                             "timeout": 30, "approximation": True}]
    # As in a stage kernel of `evalnb run`: the command's own process checked the documents.
    monkeypatch.setattr(lock, "is_stage_kernel", lambda run_dir: True)
    counter = OpenCounter(monkeypatch, watched)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        run = evalnb.open_run(params)
        stage(run)
        run.close()
        counts = counter.take()
        assert counts, "nothing counted: the counter watches the wrong folders"
        assert {k: v for k, v in counts.items() if v > max(1, uses[k])} == {}, stage.__name__
    assert json.loads((Path(params["output_dir"]) / "scores.json").read_text())["complete"]
