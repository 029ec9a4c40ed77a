"""The command line over real runs (each through the stage kernel, so shared where they can be):
progress from the kernel reaching the command's stderr, the results table and ``--json`` against
``scores.json`` and ``compare.json``, ``--limit`` runs of their own refused by compare, ``status``
on complete, half-done, failed, suite and compare directories, and Ctrl-C during a stage."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.app.results import run_results, run_text
from evalnb.core.estimates import estimate_text
from tests.conftest import ROOT, deterministic_responder
from tests.fakeserver import FakeLLMServer
from tests.test_reliability import alive, run_cli, run_with_calls_in_flight, wait_for

DEMO = ROOT / "params" / "demo_wildtrace.yaml"
LOCKS = (".evalnb.lock", ".evalnb.kernel.lock")


def evalnb(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two offline WildTrace runs, their comparison, and a --limit 2 run of the first; the last
    two runs without their report stage, which nothing here reads (about 50 s)."""
    root = tmp_path_factory.mktemp("cli-runs")
    a, b = root / "a", root / "b"
    no_report = [arg for stage in ("generate", "judge", "aggregate") for arg in ("--stage", stage)]
    first = evalnb("run", str(DEMO), "--set", f"output_dir={a}", "--json")
    second = evalnb("run", str(DEMO), "--set", f"output_dir={b}", "--set", "model.name=lead-3", *no_report)
    compared = evalnb("compare", str(a), str(b), "--out", str(root / "cmp"), "--json")
    limited = evalnb("run", str(DEMO), "--set", f"output_dir={a}", "--limit", "2", "-q", *no_report)
    yield {"root": root, "a": a, "b": b, "first": first, "second": second, "compared": compared,
           "limited": limited}


def scores(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scores.json").read_text())


def test_run_shows_the_kernels_progress_and_ends_with_its_results_as_json(runs: dict[str, Any]) -> None:
    first = runs["first"]
    assert first.returncode == 0, first.stderr
    err = first.stderr
    # The calls are made in the stage kernel; their progress reaches the command's stderr.
    assert re.search(r"^\S+ evalnb: generate: done: 12/12 calls \(100%\), ok 10, failed 0", err, re.M), err
    assert re.search(r"^\S+ evalnb: judge: done: 30/30 calls \(100%\), ok 30, failed 0", err, re.M), err
    doc = json.loads(first.stdout)   # stdout holds the one JSON document, nothing else
    expected = scores(runs["a"])
    assert doc["state"] == "complete" and doc["run_dir"] == str(runs["a"])
    assert [(m["metric"], m["value"], m["ci_low"], m["ci_high"], m["n"]) for m in doc["metrics"]] == \
        [(k, m["value"], m["ci"]["low"], m["ci"]["high"], m["ci"]["n"]) for k, m in expected["metrics"].items()
         if m["headline"]]
    assert not [name for name in LOCKS if (runs["a"] / name).exists()]   # released, and gone


def test_the_results_table_prints_each_headline_estimate_as_scores_json_has_it(runs: dict[str, Any]) -> None:
    second = runs["second"]
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("demo-wildtrace (wildtrace; offline:lead-3): complete [offline approximation]")
    for name, m in scores(runs["b"])["metrics"].items():
        if m["headline"]:
            row = next(line for line in second.stdout.splitlines() if line.split()[:1] == [name])
            assert estimate_text(m["value"], m["ci"]["low"], m["ci"]["high"]) in row and f" {m['ci']['n']} " in row
    assert second.stdout.rstrip().endswith(f"record: {runs['b']}")


def test_compare_ends_with_the_ranking_and_refuses_a_limit_run(runs: dict[str, Any]) -> None:
    compared = runs["compared"]
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    board = json.loads((runs["root"] / "cmp" / "compare.json").read_text())["tables"]["leaderboard"]
    assert [r["run"] for r in doc["ranking"]] == [r["run"] for r in board] and doc["ranking"][0]["rank"] == 1
    for shown, row in zip(doc["ranking"], board):
        for metric in doc["headline"]:
            assert shown["metrics"][metric] == {"value": row[metric], "ci_low": row[f"{metric}_ci_low"],
                                                "ci_high": row[f"{metric}_ci_high"]}
    # A run of the first two items only: its own directory, its own fingerprint, never compared.
    limited = runs["limited"]
    assert limited.returncode == 0, limited.stderr
    trial = runs["root"] / "a-limit2"
    assert scores(trial)["n_tasks"] == 2 and scores(trial)["run_name"] == "demo-wildtrace-limit2"
    assert json.loads((trial / "fingerprint.json").read_text())["parts"]["subset"]["value"] == {"limit": 2}
    assert limited.stdout == ""   # -q: no table
    assert "[subset first 2 items: not comparable with the full run]" in run_text(run_results(trial))
    refused = evalnb("compare", str(runs["a"]), str(trial), "--out", str(runs["root"] / "cmp2"))
    assert refused.returncode == 1 and "subset" in refused.stderr and "refusing to compare" in refused.stderr
    assert not (runs["root"] / "cmp2").exists()


def test_status_of_complete_half_done_failed_suite_and_compare_directories(
        runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def status(path: Path) -> str:
        capsys.readouterr()
        assert main(["status", str(path)]) == 0
        out = capsys.readouterr().out
        assert "{'" not in out and "': " not in out   # readable, no dicts
        return out

    done = status(runs["a"])
    assert "generate     12/12  ok 10" in done and "judge        30/30  ok 30" in done
    assert "state: complete" in done and "next: nothing remains" in done
    metric = scores(runs["a"])["metrics"]["all_tasks"]
    assert estimate_text(metric["value"], metric["ci"]["low"], metric["ci"]["high"]) in done

    half = tmp_path / "half"
    shutil.copytree(runs["a"], half)
    lines = (half / "judge.jsonl").read_text().splitlines(keepends=True)
    (half / "judge.jsonl").write_text("".join(lines[:8]))
    for name in ("scores.json", "status.json", "03_aggregate.ipynb", "04_report.ipynb"):
        (half / name).unlink()
    config = json.loads((half / "config.json").read_text())
    (half / "config.json").write_text(json.dumps(config | {"output_dir": str(half)}))
    text = status(half)
    assert "judge         8/30  ok 8" in text and "not aggregated yet" in text
    assert "resumes and makes what remains (22 verdicts, at most)" in text

    failed = tmp_path / "failed"
    shutil.copytree(half, failed)
    notebook = json.loads((failed / "02_judge.ipynb").read_text())
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "error", "ename": "ValueError", "evalue": "judge2: a bad reply", "traceback": []}]
    (failed / "02_judge.ipynb").write_text(json.dumps(notebook))
    text = status(failed)
    assert "state: the judge stage failed: ValueError: judge2: a bad reply" in text
    assert "resumes from the judge stage" in text

    cmp = status(runs["root"] / "cmp")
    assert cmp.startswith(f"compare: {runs['root'] / 'cmp'}") and "rank" in cmp and "extractive-bm25" in cmp

    suite = tmp_path / "suite"
    shutil.copytree(runs["a"], suite / "runs" / "x")
    (suite / "suite.json").write_text(json.dumps({"suite_name": "s", "suite_file": "s.yaml", "contestants": ["x"],
                                                  "runs": {"x": {"outcome": {}}}}))
    text = status(suite)
    assert text.startswith("suite: s") and re.search(r"^x\s+complete", text, re.M) and "next: " in text


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
        resumed = run_cli("run", str(path))
        assert resumed.returncode == 0, resumed.stderr
        assert not [name for name in LOCKS if (run_dir / name).exists()]
