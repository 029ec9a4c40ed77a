"""The judge-graded example ``examples/judge_qa`` against the fake server, and what
the shared layer does for any plug-in: a record a benchmark returns that
breaks the record rule fails its own call and is never stored; a store's unreadable lines
are reported, not crashed on; the fingerprint holds the panel whatever the plug-in returns.

Expected numbers come from this file's own tables (what each toy contestant says, what a
grade is) and its own bootstrap (stats' documented procedure), not from the example's code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalnb.core.errors import FingerprintMismatch
from evalnb.pipeline import run as opening, stages as pipeline
from tests.conftest import FAST_RETRY, ROOT
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text
from tests.test_example_benchmark import dist_info

SOURCE = ROOT / "examples" / "judge_qa"
IMPORT_PATH = "judge_qa_bench:JudgeQA"
EVALNB = Path(sys.executable).parent / "evalnb"
N_BOOT, SEED = 2000, 0

# What each contestant answers, by question id, and the grade that answer deserves.
ANSWERS = {
    "sure": {"q1": ("Paris", "CORRECT"), "q2": ("8", "CORRECT"), "q3": ("Venus", "INCORRECT"),
             "q4": ("I don't know", "NOT_ATTEMPTED"), "q5": ("Au", "CORRECT"), "q6": ("1989", "CORRECT"),
             "q7": ("I don't know", "NOT_ATTEMPTED"), "q8": ("7", "INCORRECT")},
    "shy": {"q1": ("Paris", "CORRECT"), "q2": ("I don't know", "NOT_ATTEMPTED"), "q3": ("Mercury", "CORRECT"),
            "q4": ("I don't know", "NOT_ATTEMPTED"), "q5": ("I don't know", "NOT_ATTEMPTED"),
            "q6": ("1991", "INCORRECT"), "q7": ("I don't know", "NOT_ATTEMPTED"), "q8": ("6", "CORRECT")},
}
# The grader's first reply about these holds no grade. They are the first two judged (in task
# order, two at a time), so a run killed after three judge records has met both.
UNPARSABLE_FIRST = {"q1", "q2"}


def questions() -> list[dict[str, str]]:
    return [json.loads(line) for line in (SOURCE / "questions.jsonl").read_text().splitlines() if line.strip()]


class Responder:
    """Contestants answer from ANSWERS; the grader grades from ANSWERS, but its first reply
    about a question of UNPARSABLE_FIRST (``unparsable``) is prose without a grade."""

    def __init__(self, unparsable: bool = True) -> None:
        self.ids = {q["question"]: q["id"] for q in questions()}
        self.unparsable_sent: set[str] = set() if unparsable else set(UNPARSABLE_FIRST)

    def __call__(self, request: RecordedRequest) -> Text:
        question = re.search(r"^Question: (.*)$", request.prompt, re.M)
        assert question, request.prompt
        item = self.ids[question[1].strip()]
        if request.model in ANSWERS:
            return Text(ANSWERS[request.model][item][0])
        predicted = re.search(r"^Predicted answer: (.*)$", request.prompt, re.M)
        assert predicted, request.prompt
        grade = next(g for model in ANSWERS.values() for a, g in [model[item]] if a == predicted[1].strip())
        if item in UNPARSABLE_FIRST and item not in self.unparsable_sent:
            self.unparsable_sent.add(item)
            return Text("The prediction looks reasonable to me, all things considered.")
        return Text(f"{grade}.")


def params(out: Path, url: str, model: str, benchmark: str = IMPORT_PATH, **extra: Any) -> dict[str, Any]:
    return {"benchmark": benchmark, "run_name": f"qa-{model}", "output_dir": str(out / f"qa-{model}"),
            "data": str(SOURCE / "questions.jsonl"), "concurrency": 2,
            "model": {"provider": "openai", "name": model, "base_url": f"{url}/v1"},
            "judges": [{"provider": "openai", "name": "grader-1", "base_url": f"{url}/v1"}],
            "retry": dict(FAST_RETRY), "n_boot": N_BOOT, "seed": SEED, **extra}


def expected(model: str) -> dict[str, tuple[float, float, float]]:
    """Each metric's value and percentile interval, from ANSWERS and numpy's PCG64 bootstrap."""
    grades = [ANSWERS[model][q["id"]][1] for q in questions()]
    correct = np.array([g == "CORRECT" for g in grades], dtype=float)
    attempted = np.array([g != "NOT_ATTEMPTED" for g in grades], dtype=float)
    draws = np.random.default_rng(SEED).integers(0, len(grades), size=(N_BOOT, len(grades)))
    c, a = correct[draws].mean(axis=1), attempted[draws].sum(axis=1)
    given = np.where(a > 0, correct[draws].sum(axis=1) / np.maximum(a, 1), np.nan)
    g = np.nan_to_num(given)   # nothing attempted: an F-score of 0
    f = np.where(c + g > 0, 2 * c * g / np.where(c + g > 0, c + g, 1), 0.0)
    out = {}
    for name, point, reps in (("correct", correct.mean(), c), ("attempted", attempted.mean(), attempted[draws].mean(1)),
                              ("correct_given_attempted", correct.sum() / attempted.sum(), given),
                              ("f_score", None, f)):
        if point is None:
            share, ratio = correct.mean(), correct.sum() / attempted.sum()
            point = 2 * share * ratio / (share + ratio)
        low, high = np.quantile(reps[np.isfinite(reps)], [0.025, 0.975])
        out[name] = (float(point), float(low), float(high))
    return out


def check_scores(run: Path, model: str) -> None:
    scores = json.loads((run / "scores.json").read_text())
    assert scores["complete"] is True
    for name, (value, low, high) in expected(model).items():
        metric = scores["metrics"][name]
        assert (metric["value"], metric["ci"]["low"], metric["ci"]["high"]) == pytest.approx((value, low, high)), name


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example importable (copied, so no egg-info of an editable install registers it)."""
    example = Path(shutil.copytree(SOURCE, tmp_path / "judge_qa",
                                   ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build")))
    monkeypatch.syspath_prepend(str(example))
    return example


# --- in process: the record rule, the store's old lines, the fingerprint's shared part ---------------

BAD_PLUGIN = '''
import dataclasses

from judge_qa_bench import JudgeQA


def without_status(completion):
    return {"text": completion.text, "grade": "correct"}


class DropsStatus(JudgeQA):
    """A plug-in whose grader interpreter forgets ``status`` for one question."""

    NAME = "drops_status"

    def judge_calls(self, responses):
        return [dataclasses.replace(c, interpret=without_status) if c.key == "q3::judge1" else c
                for c in super().judge_calls(responses)]


class NoSharedParts(JudgeQA):
    """A plug-in that leaves the panel, retry policy and prompts out of its fingerprint, and
    gives parts named like the shared part and one of its keys."""

    NAME = "no_shared_parts"

    def fingerprint_parts(self):
        return {"grading": "mine", "shared": "whatever it says", "tasks": "its own hash"}
'''


def test_a_record_without_status_fails_its_call_and_is_never_stored(tmp_path: Path, on_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (on_path / "bad_plugin.py").write_text(BAD_PLUGIN)
    with FakeLLMServer() as server:
        server.responder = Responder(unparsable=False)
        run = opening.open_run(params(tmp_path, server.url, "sure", "bad_plugin:DropsStatus"))
        pipeline.generate(run)
        pipeline.judge(run)   # the stage completes: every other call is graded
    lines = [json.loads(line) for line in (run.dir / "judge.jsonl").read_text().splitlines()]
    assert all(isinstance(r.get("status"), str) for r in lines)   # nothing bad was stored
    by_key = {r["key"]: r for r in lines}
    graded = {k for k, r in by_key.items() if r["status"] == "ok"}
    assert graded == {f"{q}::judge1" for q in ANSWERS["sure"]} - {"q3::judge1"}   # every answer is graded
    failed = by_key["q3::judge1"]
    assert failed["status"] == "failed_transient" and "grade" not in failed
    assert failed["error"]["message"] == (
        "InvalidRecord: benchmark drops_status: judge call 'q3::judge1': the record its interpreter returned has "
        "no 'status' (one of ok, failed_parse, judge_refused, judge_empty, failed_transient, failed_permanent, "
        "pending, empty, refused)")
    pipeline.aggregate(run)   # resumable, never scored
    scores = json.loads((run.dir / "scores.json").read_text())
    assert scores["complete"] is False and scores["resumable"] == {"generation": 0, "judge_calls": 1}
    assert next(r for r in scores["tasks"] if r["task_id"] == "q3")["score"] is None


def test_lines_an_older_version_wrote_are_reported_not_crashed_on(tmp_path: Path, on_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with FakeLLMServer() as server:
        server.responder = Responder()
        run = opening.open_run(params(tmp_path, server.url, "shy"))
        pipeline.generate(run)
        old = {"key": "q1::judge1", "endpoint": "judge1", "text": "CORRECT", "grade": "correct"}   # no status
        (run.dir / "judge.jsonl").write_text(json.dumps(old) + "\n")
        capsys.readouterr()
        pipeline.judge(run)
        said = capsys.readouterr()
        pipeline.judge(run)   # the grader's unparsable first replies: resumable, asked again
        pipeline.aggregate(run)
    assert (f"WARNING: {run.dir / 'judge.jsonl'}: 1 record(s) do not follow the record rule and are left out "
            "(their calls are made again): line 1 (q1::judge1): no 'status'") in said.out + said.err
    assert json.loads((run.dir / "judge.jsonl").read_text().splitlines()[0]) == old   # kept as written
    assert server.count(model="grader-1") == 8 + 2   # every answer (q1 anew), and q1 and q2 once more
    check_scores(run.dir, "shy")


def test_a_plugin_omitting_the_panel_still_refuses_a_resume_with_a_changed_panel(tmp_path: Path,
                                                                                on_path: Path) -> None:
    (on_path / "bad_plugin.py").write_text(BAD_PLUGIN)
    first = params(tmp_path, "http://127.0.0.1:9", "sure", "bad_plugin:NoSharedParts")
    run = opening.open_run(first, prefetch_sdks=False)
    shared = run.fingerprint["parts"]["shared"]["value"]   # the plug-in's own "shared" is replaced
    assert sorted(run.fingerprint["parts"]) == ["grading", "shared"]   # and its "tasks" left out: shared's
    assert shared["judge_panel"] == [{"role": "judge1", "provider": "openai", "name": "grader-1", "settings": {
        "reasoning": False, "send_temperature": True, "token_param": "max_tokens", "strip_think": False,
        "approximation": False}}]
    assert shared["retry"] == FAST_RETRY and set(shared["prompts"]) == {"answer", "grader"}
    changed = json.loads(json.dumps(first))
    changed["judges"][0]["name"] = "grader-2"
    with pytest.raises(FingerprintMismatch, match=r'(?s)refusing to resume.*:\n  judge_panel\[judge1\]\.name: '
                                                  r'"grader-1" -> "grader-2"\nScores'):
        opening.open_run(changed, prefetch_sdks=False)
    with pytest.raises(FingerprintMismatch, match=r"(?s)refusing to resume.*:\n  retry\.max_retries: 5 -> 1\nScores"):
        opening.open_run(first | {"retry": FAST_RETRY | {"max_retries": 1}}, prefetch_sdks=False)
    opening.open_run(first, prefetch_sdks=False)   # unchanged: resumes


# --- end to end: an entry point, a kill and a resume, compare, verify, pack -----------------------------

def evalnb(args: list[str], cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([str(EVALNB), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[bytes], timeout: float = 120) -> int:
    """Wait until ``path`` holds ``count`` lines (or the process ends); say what was seen."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline and process.poll() is None:
        seen = len(path.read_text().splitlines()) if path.exists() else 0
        if seen >= count:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"waited {timeout}s for {count} lines in {path}: saw {seen}, process {process.poll()}")


@pytest.mark.slow
def test_the_example_end_to_end_by_entry_point(tmp_path: Path, on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmark: judge_qa``, the name only the entry point gives: one contestant through
    ``evalnb run`` killed in its judge stage and resumed, the other through the stage functions
    (the same entry point, in this process); then compare, and pack and verify the first."""
    registered = dist_info(tmp_path / "site", "judge_qa", {"judge_qa": IMPORT_PATH})
    monkeypatch.syspath_prepend(str(registered))
    path = [registered, on_path]
    runs = {model: tmp_path / "outputs" / f"qa-{model}" for model in ANSWERS}
    with FakeLLMServer(latency=0.2) as server:
        server.responder = Responder()
        (tmp_path / "sure.json").write_text(json.dumps(params(tmp_path / "outputs", server.url, "sure", "judge_qa")))
        # Killed part-way through its judge stage, after the grader's unparsable replies ...
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
        process = subprocess.Popen([str(EVALNB), "run", str(tmp_path / "sure.json")], cwd=tmp_path, env=env,
                                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = runs["sure"] / "judge.jsonl"
        wait_for_lines(store, 3, process)
        os.killpg(process.pid, signal.SIGKILL)   # the CLI, papermill and the kernel at once
        process.wait()
        killed = [json.loads(line) for line in store.read_text().splitlines()]
        assert 3 <= len(killed) < 8, "killed too late to test"
        # ... and resumed: what was unanswered or unparsable is asked again, nothing else.
        done = evalnb(["run", str(tmp_path / "sure.json")], tmp_path, path)
        if done.returncode == 2:   # an unparsable reply arrived after the kill: resumable, run again
            assert "resumable work remains" in done.stderr, done.stderr
            done = evalnb(["run", str(tmp_path / "sure.json")], tmp_path, path)
        assert done.returncode == 0 and "run complete" in done.stderr, done.stderr
        graded_ok = {r["key"] for r in killed if r["status"] == "ok"}
        asked = len(killed) + 8 - len(graded_ok)   # before the kill, then every call not graded ok
        assert asked <= server.count(model="grader-1") <= asked + 2   # + those in flight at the kill (concurrency 2)

        shy = opening.open_run(params(tmp_path / "outputs", server.url, "shy", "judge_qa"))
        for stage in (pipeline.generate, pipeline.judge, pipeline.aggregate):
            stage(shy)
    for model, run in runs.items():
        check_scores(run, model)
        judged = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
        assert all(r["status"] == "ok" for r in {r["key"]: r for r in judged}.values())
        assert {r["key"] for r in judged if r["status"] == "failed_parse"} <= {f"{q}::judge1" for q in UNPARSABLE_FIRST}
    assert (runs["sure"] / "figures" / "grades.png").is_file() and (runs["sure"] / "tasks.html").is_file()

    done = evalnb(["compare", str(runs["sure"]), str(runs["shy"]), "--out", "cmp", "--n-boot", str(N_BOOT)],
                  tmp_path, path)
    assert done.returncode == 0, done.stderr
    board = json.loads((tmp_path / "cmp" / "compare.json").read_text())["tables"]["leaderboard"]
    for row in board:
        for name, (value, low, high) in expected(row["model"]).items():
            assert (row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"]) == pytest.approx((value, low, high))

    # Each headline metric's paired difference (the statistics' pairwise table), the ratio one
    # against this file's own paired bootstrap: the same items drawn for both contestants.
    grades = {m: np.array([ANSWERS[m][q["id"]][1] for q in questions()]) for m in ANSWERS}
    correct = {m: (g == "CORRECT").astype(float) for m, g in grades.items()}
    attempted = {m: (g != "NOT_ATTEMPTED").astype(float) for m, g in grades.items()}

    def given_at(model: str, d: np.ndarray) -> float:
        return correct[model][d].sum() / attempted[model][d].sum() if attempted[model][d].sum() else np.nan

    draws = np.random.default_rng(SEED).integers(0, 8, size=(N_BOOT, 8))
    reps = np.array([given_at("sure", d) - given_at("shy", d) for d in draws])
    pairs = {row["metric"]: row for row in json.loads((tmp_path / "cmp" / "compare.json").read_text())
             ["tables"]["pairwise"]}
    assert set(pairs) == {"correct", "correct_given_attempted"}   # the headline metrics, both over channels
    row = pairs["correct_given_attempted"]
    assert (row["model_a"], row["model_b"]) == ("sure", "shy")
    assert row["delta"] == pytest.approx(expected("sure")["correct_given_attempted"][0]
                                         - expected("shy")["correct_given_attempted"][0])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.quantile(reps[np.isfinite(reps)], [0.025, 0.975])))
    assert pairs["correct"]["delta"] == pytest.approx(expected("sure")["correct"][0] - expected("shy")["correct"][0])

    done = evalnb(["pack", str(runs["sure"]), "-o", str(tmp_path / "sure.tar.gz")], tmp_path, path)
    assert done.returncode == 0 and (tmp_path / "sure.tar.gz").is_file(), done.stderr
    done = evalnb(["verify", str(tmp_path / "sure.tar.gz")], tmp_path, path)   # the archive recomputes
    assert done.returncode == 0 and "everything matches" in done.stdout + done.stderr, done.stdout + done.stderr
