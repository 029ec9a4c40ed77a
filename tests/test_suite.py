"""`evalnb suite`, through the real SDKs against the local server.

The reference for every suite run is the same contestant run on its own (the pipeline's stage
functions, as the stage notebooks call them) against the same deterministic server: a suite
must end with the numbers of separate runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.app.main import main
from evalnb.views.estimates import estimate_text
from tests.conftest import SAMPLE, FAST_RETRY
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Reply, Text
from tests.test_reliability import alive, wait_for
from tests.test_resume_kill import numbers

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_response_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """These suites run one contestant's requests under several names and count each run's
    calls: the response cache, which would answer one run from another, stays out."""
    monkeypatch.setenv("EVALNB_CACHE", "off")


def responder(request: RecordedRequest) -> Reply:
    """Each contestant answers in its own words, so its verdicts (and numbers) are its own."""
    if request.prompt.startswith("STRICT grader."):
        total = int(hashlib.sha256(request.prompt.encode()).hexdigest(), 16) % 101
        return Text(f'```json\n{{"points_awarded":[{total}],"total":{total}}}\n```')
    question = request.prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    return Text(f"{request.model} says: {question}")


def shared(url: str) -> dict[str, Any]:
    return {"benchmark": "wildtrace", "data": str(SAMPLE / "tasks.json"), "corpus": str(SAMPLE / "corpus"),
            "concurrency": 4, "retry": dict(FAST_RETRY),
            "model": {"provider": "openai", "base_url": f"{url}/v1", "caps": {"en": 50000, "cjk": 20000}},
            "judges": [{"provider": "openai", "name": f"judge-{i}", "base_url": f"{url}/v1"} for i in (1, 2, 3)]}


def contestant(name: str, **model: Any) -> dict[str, Any]:
    return {"run_name": name, "model": {"name": f"model-{name}", **model}}


def write_suite(tmp_path: Path, url: str, contestants: list[dict[str, Any]], **extra: Any) -> Path:
    suite = {"suite_name": "board", "output_dir": str(tmp_path / "suite"), "parallel_runs": 3,
             **shared(url), **extra, "contestants": contestants}
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite), "utf-8")
    return path


def reference(tmp_path: Path, url: str, name: str) -> tuple:
    """The contestant run alone, as separate runs are made."""
    params = shared(url) | {"run_name": name, "output_dir": str(tmp_path / "alone" / name)}
    params["model"] = params["model"] | {"name": f"model-{name}"}
    run = evalnb.open_run(params)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
    run.close()
    return numbers(run.dir)


def suite_json(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "suite" / "suite.json").read_text())


def board(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "suite" / "leaderboard" / "compare.json").read_text())


def run_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "suite" / "runs" / name


def test_a_suite_ends_with_separate_runs_numbers_and_follows_its_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three contestants, one panel: each run as it would be alone, the final leaderboard over
    them; then one contestant removed and one added: only the new one runs, the removed one
    stays on disk but leaves the leaderboard; then a changed contestant is refused."""
    with FakeLLMServer() as server:
        server.responder = responder
        expected = {name: reference(tmp_path, server.url, name) for name in ("a", "b", "c", "d")}
        server.reset()
        server.responder = responder
        path = write_suite(tmp_path, server.url, [contestant("a"), contestant("b"), contestant("c")])
        capsys.readouterr()
        assert main(["suite", str(path)]) == 0
        table = capsys.readouterr().out   # the results: one row per contestant, estimates as scores.json has them
        for name in ("a", "b", "c"):
            metric = json.loads((run_dir(tmp_path, name) / "scores.json").read_text())["metrics"]["all_tasks"]
            row = next(line for line in table.splitlines() if line.split()[:2] == [name, "complete"])
            assert estimate_text(metric["value"], metric["ci"]["low"], metric["ci"]["high"]) in row
        assert "leaderboard: final" in table and f"record: {tmp_path / 'suite'}" in table
        for name in ("a", "b", "c"):
            assert numbers(run_dir(tmp_path, name)) == expected[name]
            assert all((run_dir(tmp_path, name) / f"0{i}_{s}.ipynb").exists()
                       for i, s in enumerate(("generate", "judge", "aggregate", "report"), start=1))
        compared = board(tmp_path)
        assert compared["suite"]["provisional"] is False and len(compared["runs"]) == 3
        assert (tmp_path / "suite" / "leaderboard" / "05_compare.html").exists()
        assert main(["render", str(tmp_path / "suite" / "leaderboard"), "--no-input"]) == 0
        assert (tmp_path / "suite" / "leaderboard" / "paper" / "05_compare.html").exists()
        state = suite_json(tmp_path)
        assert {n: r["state"] for n, r in state["runs"].items()} == {"a": "complete", "b": "complete",
                                                                     "c": "complete"}
        scores = json.loads((run_dir(tmp_path, "a") / "scores.json").read_text())
        assert state["runs"]["a"]["headline"]["all_tasks"] == scores["metrics"]["all_tasks"]["value"]
        assert state["runs"]["a"]["calls"] == 11 + 33
        # A contestant is an ordinary run: its parameters file runs it alone (nothing left to do).
        assert main(["run", str(tmp_path / "suite" / "params" / "a.json")]) == 0

        server.reset()
        server.responder = responder
        untouched = (run_dir(tmp_path, "a") / "generate.jsonl").stat().st_mtime_ns
        path = write_suite(tmp_path, server.url, [contestant("a"), contestant("b"), contestant("d")])
        capsys.readouterr()
        assert main(["suite", str(path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)   # the same results, one JSON document
        assert sorted(doc["runs"]) == ["a", "b", "d"] and doc["leaderboard"]["state"] == "final"
        for name, result in doc["runs"].items():
            scores = json.loads((run_dir(tmp_path, name) / "scores.json").read_text())
            assert {m["metric"]: m["value"] for m in result["metrics"]} == \
                {k: m["value"] for k, m in scores["metrics"].items() if m["headline"]}
        assert [r["run"] for r in doc["leaderboard"]["ranking"]] == \
            [r["run"] for r in board(tmp_path)["tables"]["leaderboard"]]
        assert {r.model for r in server.requests} == {"model-d", "judge-1", "judge-2", "judge-3"}
        assert (run_dir(tmp_path, "a") / "generate.jsonl").stat().st_mtime_ns == untouched
        assert numbers(run_dir(tmp_path, "d")) == expected["d"]
        assert numbers(run_dir(tmp_path, "c")) == expected["c"]   # still on disk ...
        assert [Path(r["dir"]).name for r in board(tmp_path)["runs"]] == ["a", "b", "d"]   # ... off the board
        capsys.readouterr()
        assert main(["status", str(tmp_path / "suite")]) == 0
        out = capsys.readouterr().out
        assert "removed from the suite" in out and " c" in out.split("removed from the suite")[1]

        changed = write_suite(tmp_path, server.url, [contestant("a", reasoning=True), contestant("b"),
                                                     contestant("d")])
        server.reset()
        assert main(["suite", str(changed)]) == 1
        err = capsys.readouterr().err
        assert f"{changed}: contestant a: changed since its run started" in err and "decoding" in err
        assert server.count() == 0


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                kids = [int(c) for c in Path(f"/proc/{parent}/task/{tid}/children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


@pytest.mark.soak   # make soak: its smaller form runs in make test
def test_killing_the_suite_alone_stops_every_run_and_the_suite_resumes(tmp_path: Path) -> None:
    with FakeLLMServer(latency=0.3) as server:
        server.responder = responder
        expected = {name: reference(tmp_path, server.url, name) for name in ("a", "b", "c")}
        server.reset()
        server.responder = responder
        path = write_suite(tmp_path, server.url, [contestant("a"), contestant("b"), contestant("c")])
        suite = subprocess.Popen([sys.executable, "-m", "evalnb.app.main", "suite", str(path)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stores = [run_dir(tmp_path, n) / "generate.jsonl" for n in ("a", "b", "c")]
        wait_for(lambda: all(s.exists() and s.read_text().count("\n") >= 1 for s in stores), 240)
        family = descendants(suite.pid)
        assert len(family) >= 6   # three runs, each with its kernel
        suite.send_signal(signal.SIGKILL)   # the suite alone: no process group
        suite.wait()
        wait_for(lambda: not any(alive(p) for p in family), 10)
        sizes = [s.stat().st_size for s in stores]
        time.sleep(1.0)   # past the calls that were in flight: nothing writes any more
        assert [s.stat().st_size for s in stores] == sizes

        assert main(["suite", str(path)]) == 0
        for name in ("a", "b", "c"):
            assert numbers(run_dir(tmp_path, name)) == expected[name]
            keys = [json.loads(line)["key"] for line in (run_dir(tmp_path, name) / "generate.jsonl").read_text()
                    .splitlines()]
            assert len(keys) == len(set(keys)) == 12   # nothing lost, nothing twice


def failing_b(request: RecordedRequest) -> Reply:
    return Error(503, "overloaded") if request.model == "model-b" else responder(request)


def test_resumable_work_exits_2_with_a_provisional_board_then_0_with_the_final_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeLLMServer() as server:
        server.responder = responder
        expected = {name: reference(tmp_path, server.url, name) for name in ("a", "b", "c")}
        server.responder = failing_b
        path = write_suite(tmp_path, server.url, [contestant("a"), contestant("b"), contestant("c")])
        capsys.readouterr()
        assert main(["suite", str(path)]) == 2
        err = capsys.readouterr().err
        assert "run the same command again" in err
        state = suite_json(tmp_path)
        assert state["runs"]["b"]["state"] == "resumable" and "resumable" in state["runs"]["b"]["cause"]
        assert {state["runs"][n]["state"] for n in ("a", "c")} == {"complete"}
        compared = board(tmp_path)
        assert compared["suite"]["provisional"] is True and compared["suite"]["missing"] == ["b (resumable)"]
        assert [Path(r["dir"]).name for r in compared["runs"]] == ["a", "c"]
        html = (tmp_path / "suite" / "leaderboard" / "05_compare.html").read_text()
        assert "PROVISIONAL leaderboard of suite board: 2 of 3 contestants complete; missing: b (resumable)" in html

        server.reset()
        server.responder = responder
        assert main(["suite", str(path)]) == 0
        assert {r.model for r in server.requests} <= {"model-b", "judge-1", "judge-2", "judge-3"}
        assert board(tmp_path)["suite"]["provisional"] is False and len(board(tmp_path)["runs"]) == 3
        for name in ("a", "b", "c"):
            assert numbers(run_dir(tmp_path, name)) == expected[name]


def test_a_contestant_that_fails_is_reported_while_the_others_finish(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its run's kernel dies mid-stage (its command endpoint kills it): exit 1 and its cause."""
    killer = {"run_name": "broken", "model": {"provider": "command", "name": "killer", "command": [
        "python", "-c", "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"]}}
    with FakeLLMServer() as server:
        server.responder = responder
        path = write_suite(tmp_path, server.url, [contestant("a"), killer, contestant("c")])
        capsys.readouterr()
        assert main(["suite", str(path)]) == 1
        state = suite_json(tmp_path)
        assert state["runs"]["broken"]["state"] == "failed"
        assert "generate stage did not finish: DeadKernelError" in state["runs"]["broken"]["cause"]
        assert {state["runs"][n]["state"] for n in ("a", "c")} == {"complete"}
        assert board(tmp_path)["suite"]["missing"] == ["broken (failed)"]
        assert main(["status", str(tmp_path / "suite")]) == 0
        assert "broken: generate stage did not finish: DeadKernelError" in capsys.readouterr().out


PRICE = 10.0


def test_a_suite_ceiling_covers_all_its_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One call at a time across the whole suite: each sent only when what every run had spent
    plus its upper bound fitted; no contestant started after the ceiling stopped one; raised,
    the suite completes."""
    from tests.test_budget import reported, upper_bound

    ceiling = 0.35   # a run spends about $0.15; a verdict may cost up to $0.17: the ceiling falls in b
    with FakeLLMServer() as server:
        server.responder = responder
        models = ["model-a", "model-b", "model-c", "judge-1", "judge-2", "judge-3"]
        path = write_suite(tmp_path, server.url, [contestant("a"), contestant("b"), contestant("c")],
                           parallel_runs=1, concurrency=1, budget={"max_cost_usd": ceiling},
                           prices={m: {"input": PRICE, "output": PRICE} for m in models})
        capsys.readouterr()
        assert main(["suite", str(path)]) == 2
        err = capsys.readouterr().err
        assert "spending ceiling of suite board reached" in err and "raise budget.max_cost_usd" in err
        spent = 0.0
        for request in server.requests:
            assert spent + upper_bound(request) <= ceiling + 1e-9
            spent += reported(request)
        state = suite_json(tmp_path)
        assert state["budget"]["spent_usd"] == pytest.approx(spent)
        assert state["runs"]["c"]["state"] == "not started"   # the ceiling was reached before its turn
        assert main(["suite", str(path), "--set", "budget.max_cost_usd=100"]) == 0
        assert {r["state"] for r in suite_json(tmp_path)["runs"].values()} == {"complete"}


def test_a_suite_is_checked_whole_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9"
    cases = [
        ([contestant("a"), contestant("a")], "contestant a: run_name: given twice"),
        ([contestant("a"), contestant("b") | {"concurency": 3}], "contestant b: unknown parameter(s) concurency "
                                                                "(did you mean concurrency?)"),
        ([contestant("a"), contestant("b") | {"judges": [{"provider": "openai", "name": "other", "base_url": url}] * 3}],
         "contestant b: judge_panel differ from contestant a's"),   # the shared part's panel, named once
        ([contestant("a"), contestant("b", caps={"en": 0})], "contestant b: model.caps"),
        ([contestant("a"), contestant("b") | {"output_dir": "/tmp/x"}], "contestant b: output_dir"),
        ([contestant("a"), {"model": {"name": "x"}}], "contestants[1]: run_name: required"),
    ]
    for contestants, needle in cases:
        path = write_suite(tmp_path, url, contestants)
        capsys.readouterr()
        assert main(["suite", str(path)]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"{path}: " in err and needle in err, err
        assert not (tmp_path / "suite").exists()


def test_a_typo_in_a_suite_key_is_named_as_the_suite_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`paralel_runs` is the suite file's key misspelt, not every contestant's unknown parameter."""
    path = write_suite(tmp_path, "http://127.0.0.1:9", [contestant("a"), contestant("b")], paralel_runs=2)
    assert main(["suite", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"evalnb: error: {path}: unknown suite key(s) paralel_runs (did you mean parallel_runs?)"), err
    assert "contestant" not in err.split(":", 3)[-1].split("neither")[0] and err.count("\n") == 0
    assert not (tmp_path / "suite").exists()


def test_estimate_sums_the_contestants_and_shares_the_panel(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9"
    params = write_suite(tmp_path, url, [contestant("a"), contestant("b"), contestant("c")])
    suite = json.loads(params.read_text())
    for judge in suite["judges"]:
        judge["rate_limit"] = {"requests_per_minute": 5}
    params.write_text(json.dumps(suite))
    capsys.readouterr()
    assert main(["estimate", str(params)]) == 0
    out = capsys.readouterr().out
    in_scope = 11   # the sample's tasks whose document fits the caps (one is 70,632 characters)
    # Every contestant: 11 answers and 11 verdicts from each judge, each judge paced at 5 a minute:
    # alone 11 calls take ceil(11/5) - 1 = 2 minutes; the suite's 33 to one judge ceil(33/5) - 1 = 6.
    assert f"{3 * 4 * in_scope:,} calls to make" in out
    # the one table style and vocabulary: no pandas index row, no code names
    from evalnb.views.labels import known, snake_case
    heads = [h for h in out.splitlines()[0].split("  ") if h.strip()]
    assert all(known(h.strip()) and not snake_case(h) for h in heads), heads
    assert not any(line.strip() == "contestant" for line in out.splitlines())
    assert "Shortest time under the configured rate limits: 6 minutes for the whole suite" in out
    assert "the longest run alone takes 2" in out
    assert not (tmp_path / "suite").exists()
