"""The two-turn conversation example ``examples/two_turn`` against the fake server: turn 2 is
sent with the model's own turn-1 answer as an assistant turn, within one run at any
concurrency and under ``--limit``; ``estimate`` and ``prompt`` on a fresh run; an item of
several calls in ``responses.json``; a plug-in run from its own folder with ``PYTHONPATH=.``;
``verify`` of a subset run.

Expected numbers come from this file's own tables (the ratings the fake judge gives) and its
own bootstrap, not from the example's code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from evalnb.app.inspection.prompt import PLACEHOLDER, item_requests
from evalnb.pipeline import run as opening, stages as pipeline
from evalnb.pipeline.accounting import estimate
from tests.conftest import FAST_RETRY, ROOT
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

SOURCE = ROOT / "examples" / "two_turn"
IMPORT_PATH = "two_turn_bench:TwoTurn"
EVALNB = Path(sys.executable).parent / "evalnb"
N_BOOT, SEED = 2000, 0
# The rating the fake judge gives each conversation's turn 1 and turn 2.
RATINGS = {"c1": (8, 6), "c2": (10, 9), "c3": (4, 7), "c4": (9, 2)}


def conversations() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SOURCE / "questions.jsonl").read_text().splitlines() if line.strip()]


def answer(item: str, turn: int) -> str:
    return f"answer {turn} to {item}"


class Responder:
    """The contestant answers ``answer(item, turn)``; the judge rates from RATINGS, reading which
    conversation and which turn from the conversation it is shown."""

    def __init__(self) -> None:
        self.items = {c["turns"][i]: (c["id"], i + 1) for c in conversations() for i in range(2)}

    def __call__(self, request: RecordedRequest) -> Text:
        if request.model == "talker":
            last = request.body["messages"][-1]["content"]
            item, turn = self.items[last]
            return Text(answer(item, turn))
        users = re.findall(r"### User:\n(.*)", request.prompt)
        item, turn = self.items[users[-1]]
        return Text(f"Sound and clear enough. Rating: [[{RATINGS[item][turn - 1]}]]")


def params(out: Path, url: str, **extra: Any) -> dict[str, Any]:
    return {"benchmark": IMPORT_PATH, "run_name": "talk", "output_dir": str(out / "talk"),
            "data": str(SOURCE / "questions.jsonl"), "concurrency": 64,
            "model": {"provider": "openai", "name": "talker", "base_url": f"{url}/v1"},
            "judges": [{"provider": "openai", "name": "rater", "base_url": f"{url}/v1"}],
            "retry": dict(FAST_RETRY), "n_boot": N_BOOT, "seed": SEED, **extra}


def bootstrap(scores: list[float]) -> tuple[float, float]:
    """The percentile interval of the mean: n_boot resamples of the items, numpy's PCG64 seeded."""
    draws = np.random.default_rng(SEED).integers(0, len(scores), size=(N_BOOT, len(scores)))
    low, high = np.quantile(np.asarray(scores)[draws].mean(axis=1), [0.025, 0.975])
    return float(low), float(high)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    example = Path(shutil.copytree(SOURCE, tmp_path / "two_turn",
                                   ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build")))
    monkeypatch.syspath_prepend(str(example))
    return example


def turn_two_requests(server: FakeLLMServer) -> dict[str, list[dict[str, Any]]]:
    items = {c["turns"][1]: c["id"] for c in conversations()}
    return {items[r.body["messages"][-1]["content"]]: r.body["messages"] for r in server.requests
            if r.model == "talker" and r.body["messages"][-1]["content"] in items}


def test_a_conversation_runs_in_one_pass_with_its_own_first_answer(tmp_path: Path, on_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = Responder()
        run = opening.open_run(params(tmp_path, server.url))
        pipeline.generate(run)   # concurrency 64: every turn 1 in flight at once, turn 2 after
        pipeline.judge(run)
        pipeline.aggregate(run)
        sent = turn_two_requests(server)
    for c in conversations():
        assert sent[c["id"]] == [{"role": "user", "content": c["turns"][0]},
                                 {"role": "assistant", "content": answer(c["id"], 1)},
                                 {"role": "user", "content": c["turns"][1]}]
    rows = {r["task_id"]: r for r in json.loads((run.dir / "responses.json").read_text())["records"]}
    for c in conversations():
        row = rows[c["id"]]
        assert row["status"] == "ok"
        assert [(k["call"], k["status"], k["response"]) for k in row["calls"]] == [
            ("t1", "ok", answer(c["id"], 1)), ("t2", "ok", answer(c["id"], 2))]
    scores = json.loads((run.dir / "scores.json").read_text())
    assert scores["complete"] is True
    per_item = [sum(RATINGS[c["id"]]) / 2 for c in conversations()]
    for name, values in (("score", per_item), ("turn_1", [RATINGS[c["id"]][0] for c in conversations()]),
                         ("turn_2", [RATINGS[c["id"]][1] for c in conversations()])):
        metric = scores["metrics"][name]
        assert metric["value"] == pytest.approx(np.mean(values)), name
        assert (metric["ci"]["low"], metric["ci"]["high"]) == pytest.approx(bootstrap([float(v) for v in values]))


def test_a_failed_first_turn_leaves_the_second_unsent(tmp_path: Path, on_path: Path) -> None:
    from tests.fakeserver import Error

    with FakeLLMServer() as server:
        responder = Responder()
        first_c2 = conversations()[1]["turns"][0]
        server.responder = lambda r: Error(500) if r.body.get("messages", [{}])[-1].get("content") == first_c2 \
            else responder(r)
        run = opening.open_run(params(tmp_path, server.url))
        pipeline.generate(run)
        sent = turn_two_requests(server)
        assert set(sent) == {"c1", "c3", "c4"}   # c2's turn 2 waits for its turn 1
        rows = {r["task_id"]: r for r in json.loads((run.dir / "responses.json").read_text())["records"]}
        assert [k["status"] for k in rows["c2"]["calls"]] == ["failed_transient", "pending"]
        server.responder = responder   # the endpoint recovers: a rerun finishes the chain
        pipeline.generate(run)
        assert set(turn_two_requests(server)) == {"c1", "c2", "c3", "c4"}


def test_estimate_and_prompt_on_a_fresh_run(tmp_path: Path, on_path: Path) -> None:
    config, bench_class = opening.load_config(params(tmp_path, "http://127.0.0.1:9"))
    bench = opening.make_benchmark(config, bench_class)
    rows = {r["stage"]: r for r in estimate(config, bench, bench.tasks, config.output_dir)}
    assert rows["generate"]["to_make"] == 8 and rows["generate"]["awaiting_answers"] == 4
    assert rows["judge"]["to_make"] == 8
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params(tmp_path, "http://127.0.0.1:9")))
    second = next(r for r in item_requests(path, [], "c1") if r["call"] == "c1::t2")
    assert second["awaits"] == ["c1::t1"]
    assert second["request"]["history"] == [{"role": "user", "content": conversations()[0]["turns"][0]},
                                            {"role": "assistant", "content": PLACEHOLDER}]


def evalnb(args: list[str], cwd: Path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([str(EVALNB), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("pythonpath", [".", "ABSOLUTE"])
def test_a_plugin_runs_from_its_own_folder_under_a_limit_and_verifies(tmp_path: Path, pythonpath: str) -> None:
    """``PYTHONPATH=.`` (relative) and the folder's absolute path alike reach the stage kernels;
    ``--limit 2`` at concurrency 64 completes both conversations in one invocation, and
    ``verify`` rebuilds over those two items."""
    folder = Path(shutil.copytree(SOURCE, tmp_path / "plugin", ignore=shutil.ignore_patterns("__pycache__")))
    with FakeLLMServer() as server:
        server.responder = Responder()
        file = folder / "run.yaml"
        file.write_text(yaml.safe_dump(params(folder / "outputs", server.url) | {"data": "questions.jsonl"}))
        path = str(folder) if pythonpath == "ABSOLUTE" else pythonpath
        done = evalnb(["run", "run.yaml", "--limit", "2"], folder, path)
        assert done.returncode == 0, done.stderr
    run = next((folder / "outputs").glob("talk-limit2*"))
    scores = json.loads((run / "scores.json").read_text())
    assert scores["complete"] is True and [r["task_id"] for r in scores["tasks"]] == ["c1", "c2"]
    assert scores["metrics"]["score"]["value"] == pytest.approx((sum(RATINGS["c1"]) + sum(RATINGS["c2"])) / 4)
    checked = evalnb(["verify", str(run)], folder, path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_kernel_gets_pythonpath_made_absolute_and_no_stray_empty_entry(tmp_path: Path) -> None:
    from evalnb.app.runs.kernels import kernel_environment

    start = tmp_path / "here"
    env = kernel_environment({"PYTHONPATH": os.pathsep.join([".", "", "lib", "/abs/elsewhere"]), "HOME": "/h"}, start)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(start.resolve()), str((start / "lib").resolve()),
                                                   "/abs/elsewhere"]
    assert env["HOME"] == "/h"
    assert "PYTHONPATH" not in kernel_environment({"PYTHONPATH": os.pathsep}, start)


BY_CATEGORY = '''
import dataclasses

from evalnb.api import Metric, stratum_mean
from two_turn_bench import TwoTurn


class ByCategory(TwoTurn):
    """Metrics that follow the data: one score per category found in the items."""

    @classmethod
    def results(cls, scores):
        found = super().results(scores)
        return dataclasses.replace(found, strata={r["task_id"]: r["category"] for r in scores["tasks"]})

    @classmethod
    def metrics_for(cls, results):
        return cls.metrics() + tuple(Metric(f"score_{c}", f"score in {c}", stratum_mean(c))
                                     for c in sorted(set(results.strata.values())))
'''


def test_metrics_can_follow_the_categories_in_the_data(tmp_path: Path, on_path: Path) -> None:
    (on_path / "by_category.py").write_text(BY_CATEGORY)
    with FakeLLMServer() as server:
        server.responder = Responder()
        run = opening.open_run(params(tmp_path, server.url, benchmark="by_category:ByCategory"))
        pipeline.generate(run)
        pipeline.judge(run)
        pipeline.aggregate(run)
    metrics = json.loads((run.dir / "scores.json").read_text())["metrics"]
    by_category: dict[str, list[float]] = {}
    for c in conversations():
        by_category.setdefault(c["category"], []).append(sum(RATINGS[c["id"]]) / 2)
    assert {n for n in metrics if n.startswith("score_")} == {f"score_{c}" for c in by_category}
    for category, values in by_category.items():
        metric = metrics[f"score_{category}"]
        assert metric["value"] == pytest.approx(np.mean(values)) and metric["ci"] is not None, category


def test_estimate_and_prompt_commands_exit_0_on_a_fresh_run(tmp_path: Path, on_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.main import main

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params(tmp_path, "http://127.0.0.1:9")))
    assert main(["estimate", str(path)]) == 0
    said = capsys.readouterr().out
    assert "4 call(s) need other calls' answers first" in said
    assert main(["prompt", str(path), "c2"]) == 0
    shown = capsys.readouterr().out
    assert "=== model: call c2::t2" in shown and "needs the answer(s) of c2::t1" in shown
    assert f"--- turn 2: assistant ({len(PLACEHOLDER)} characters)\n{PLACEHOLDER}" in shown


@pytest.mark.slow
def test_a_run_killed_mid_conversation_resumes_with_every_chain_whole(tmp_path: Path) -> None:
    """SIGKILL while c3's turn 2 hangs (every other turn recorded), then a rerun: only c3's turn 2
    is sent again, with c3's own recorded turn-1 answer, and the run verifies."""
    import signal

    from tests.fakeserver import Hang
    from tests.test_judge_example import wait_for_lines

    folder = Path(shutil.copytree(SOURCE, tmp_path / "plugin", ignore=shutil.ignore_patterns("__pycache__")))
    hanging = conversations()[2]["turns"][1]
    with FakeLLMServer() as server:
        answers = Responder()
        server.responder = lambda r: Hang(60) if r.body.get("messages", [{}])[-1].get("content") == hanging \
            else answers(r)
        (folder / "run.yaml").write_text(yaml.safe_dump(params(folder / "outputs", server.url)))
        env = {**os.environ, "PYTHONPATH": "."}
        process = subprocess.Popen([str(EVALNB), "run", "run.yaml"], cwd=folder, env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = folder / "outputs" / "talk" / "generate.jsonl"
        wait_for_lines(store, 7, process)
        os.killpg(process.pid, signal.SIGKILL)   # the CLI, papermill and the kernel at once
        process.wait()
        assert len(store.read_text().splitlines()) == 7
        before = len(server.requests)
        server.responder = answers
        done = evalnb(["run", "run.yaml"], folder, ".")
        assert done.returncode == 0, done.stderr
        again = [r for r in server.requests[before:] if r.model == "talker"]
        assert [r.body["messages"] for r in again] == [[{"role": "user", "content": conversations()[2]["turns"][0]},
                                                        {"role": "assistant", "content": answer("c3", 1)},
                                                        {"role": "user", "content": hanging}]]
    run = folder / "outputs" / "talk"
    assert json.loads((run / "scores.json").read_text())["complete"] is True
    checked = evalnb(["verify", str(run)], folder, ".")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_compare_of_plugin_runs_from_their_own_folder(tmp_path: Path) -> None:
    """``evalnb compare``'s kernel imports the plug-in through a relative ``PYTHONPATH`` too."""
    folder = Path(shutil.copytree(SOURCE, tmp_path / "plugin", ignore=shutil.ignore_patterns("__pycache__")))
    with FakeLLMServer() as server:
        server.responder = Responder()
        for name in ("one", "two"):
            (folder / f"{name}.yaml").write_text(yaml.safe_dump(params(folder / "outputs", server.url)
                                                                | {"run_name": name,
                                                                   "output_dir": str(folder / "outputs" / name)}))
            done = evalnb(["run", f"{name}.yaml"], folder, ".")
            assert done.returncode == 0, done.stderr
    done = evalnb(["compare", "outputs/one", "outputs/two", "--out", "cmp"], folder, ".")
    assert done.returncode == 0, done.stderr
    assert json.loads((folder / "cmp" / "compare.json").read_text())["benchmark"] == IMPORT_PATH
