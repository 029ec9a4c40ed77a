"""The command line over real runs: Ctrl-C during a stage (then ``--json`` of the resumed run);
and, on the runs tests/test_notebooks.py's demo test makes (no kernel of their own), progress
from the kernels reaching the command's stderr, the results tables against ``scores.json`` and
``compare.json``, ``status`` on complete, half-done, failed, suite and compare directories, and
a ``--limit`` run of its own refused by compare."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import signal
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.app.results import compare_results, run_results, run_text
from evalnb.views.estimates import estimate_text
from tests.conftest import ROOT, deterministic_responder
from tests.fakeserver import FakeLLMServer
from tests.test_reliability import alive, run_cli, run_with_calls_in_flight, wait_for

DEMO = ROOT / "params" / "demo_wildtrace.yaml"
LOCKS = (".evalnb.lock", ".evalnb.kernel.lock")


def scores(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scores.json").read_text())


def check_demo_in_the_terminal(outputs: Path, printed: Any, capture: pytest.CaptureFixture[str]) -> None:
    """What `evalnb demo` said (``printed``: its captured stdout and stderr) and what `evalnb
    status` says of its folders: called by tests/test_notebooks.py's demo test, which has made
    every run this needs (no kernel of its own)."""
    a, cmp = outputs / "demo-wildtrace", outputs / "demo-compare-wildtrace"
    # The calls are made in the stage kernels; their progress reached the command's stderr.
    assert re.search(r"^\S+ evalnb: generate: done: 12/12 calls \(100%\), ok 10, failed 0", printed.err, re.M)
    assert re.search(r"^\S+ evalnb: judge: done: 30/30 calls \(100%\), ok 30, failed 0", printed.err, re.M)
    assert not [name for name in LOCKS if (a / name).exists()]   # released, and gone
    # The results: every run's headline estimates as its scores.json has them, then the ranking.
    for name in ("demo-wildtrace", "demo-wildtrace-lead-3", "demo-geoktools", "demo-geoexpertqueries"):
        block = printed.out.split(f"record: {outputs / name}")[0].rsplit("\n\n", 1)[-1]
        for metric, m in scores(outputs / name)["metrics"].items():
            if m["headline"]:
                word = (m.get("label") or metric).split(":")[0]   # the vocabulary's word for the metric
                row = next(line for line in block.splitlines() if line.strip().startswith(f"{word} "))
                ci = m.get("ci") or {}
                shown = estimate_text(m["value"], ci.get("low"), ci.get("high"))
                # then n: the items the estimate reads (Scored: the tasks scored, not every task)
                assert re.search(rf"{re.escape(shown)}\s+{m['n']}\s", row), (name, row, m["n"])
    board = json.loads((cmp / "compare.json").read_text())["tables"]["leaderboard"]
    ranking = compare_results(cmp)
    assert [r["run"] for r in ranking["ranking"]] == [r["run"] for r in board]
    ranked = printed.out.split("ranked as the leaderboard ranks them")[1].splitlines()[2:4]
    for line, row in zip(ranked, board):
        assert line.split()[0] in "12" and row["model"] in line
        assert estimate_text(row["all_tasks"], row["all_tasks_ci_low"], row["all_tasks_ci_high"]) in line

    def status(path: Path) -> str:
        capture.readouterr()
        assert main(["status", str(path)]) == 0
        out = capture.readouterr().out
        assert "{'" not in out and "': " not in out   # readable, no dicts
        return out

    done = status(a)
    assert "generate     12/12  ok 10" in done and "judge        30/30  ok 30" in done
    assert "state: complete" in done and "next: nothing remains" in done
    metric = scores(a)["metrics"]["all_tasks"]
    assert estimate_text(metric["value"], metric["ci"]["low"], metric["ci"]["high"]) in done
    shown = status(cmp)
    assert shown.startswith(f"compare: {cmp}") and "rank" in shown and "extractive-bm25 [offline]" in shown

    # Copies for the half-done, failed and suite folders live beside the demo's outputs, not in
    # them: the demo's folder is shared by other tests, which read every run it holds.
    scratch = Path(tempfile.mkdtemp(prefix="status-", dir=outputs.parent))
    half = scratch / "half"
    shutil.copytree(a, half)
    lines = (half / "judge.jsonl").read_text().splitlines(keepends=True)
    (half / "judge.jsonl").write_text("".join(lines[:8]))
    for name in ("scores.json", "status.json", "03_aggregate.ipynb", "04_report.ipynb"):
        (half / name).unlink()
    config = json.loads((half / "config.json").read_text())
    (half / "config.json").write_text(json.dumps(config | {"output_dir": str(half)}))
    text = status(half)
    assert "judge         8/30  ok 8" in text and "not aggregated yet" in text
    assert "resumes and makes what remains (22 verdicts, at most)" in text

    failed = scratch / "failed"
    shutil.copytree(half, failed)
    notebook = json.loads((failed / "02_judge.ipynb").read_text())
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "error", "ename": "ValueError", "evalue": "judge2: a bad reply", "traceback": []}]
    (failed / "02_judge.ipynb").write_text(json.dumps(notebook))
    text = status(failed)
    assert "state: the judge stage failed: ValueError: judge2: a bad reply" in text
    assert "resumes from the judge stage" in text

    suite = scratch / "suite"
    shutil.copytree(a, suite / "runs" / "x")
    (suite / "suite.json").write_text(json.dumps({"suite_name": "s", "suite_file": "s.yaml", "contestants": ["x"],
                                                  "runs": {"x": {"outcome": {}}}}))
    text = status(suite)
    assert text.startswith("suite: s") and re.search(r"^x\s+complete", text, re.M) and "next: " in text

    # A run of the first two items: its own directory and fingerprint, refused by compare. (The
    # stage functions in this process, as a script runs them: the command's path is tested above.)
    from evalnb.app.runs.subset import subset_sets
    from evalnb.pipeline.run import open_run
    from evalnb.pipeline.stages import aggregate, generate, judge

    # Beside a copy of the full run, in the scratch folder: the shared demo outputs stay as the demo left them.
    full = scratch / "demo-wildtrace"
    shutil.copytree(a, full)
    sets = subset_sets(DEMO, [f"output_dir={full}"], 2, None)
    trial = open_run(DEMO, sets)
    generate(trial)
    judge(trial)
    aggregate(trial)
    assert trial.dir == scratch / "demo-wildtrace-limit2" and scores(trial.dir)["n_tasks"] == 2
    assert json.loads((trial.dir / "fingerprint.json").read_text())["parts"]["subset"]["value"] == {"limit": 2}
    assert "[subset first 2 items: not comparable with the full run]" in run_text(run_results(trial.dir))
    capture.readouterr()
    assert main(["compare", str(full), str(trial.dir), "--out", str(scratch / "cmp2")]) == 1
    refused = capture.readouterr().err
    assert "refusing to compare" in refused and "subset" in refused and not (scratch / "cmp2").exists()


def test_ctrl_c_during_a_stage_stops_the_kernel_says_one_line_exits_130_and_resumes(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        process, path, run_dir, kernel = run_with_calls_in_flight(tmp_path, server)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 130, err
        said = [line for line in err.splitlines() if not re.match(r"^\S+ evalnb: generate: ", line)]
        assert said[-1].startswith("evalnb: interrupted; 0 answers and 0 verdicts recorded in ") and \
            said[-1].endswith("run the same command again to resume"), err
        assert [line for line in said if not line.startswith("evalnb: generate -> ")] == said[-1:], err
        wait_for(lambda: not alive(kernel), 10)
        server.responder = deterministic_responder
        resumed = run_cli("run", str(path), "--json", "--stage", "generate", "--stage", "judge", "--stage", "aggregate")
        assert resumed.returncode == 0, resumed.stderr
        assert not [name for name in LOCKS if (run_dir / name).exists()]
        doc = json.loads(resumed.stdout)   # the results, one JSON document on stdout and nothing else
        assert doc["state"] == "complete" and doc["run_dir"] == str(run_dir)
        assert [(m["metric"], m["value"], m["ci_low"], m["ci_high"], m["n"]) for m in doc["metrics"]] == \
            [(k, m["value"], m["ci"]["low"], m["ci"]["high"], m["n"])   # n: the items the estimate reads
             for k, m in scores(run_dir)["metrics"].items() if m["headline"]]
