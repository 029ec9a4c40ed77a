"""The response cache through the official SDK against the local counting server: a second
run of the same request makes no call; any change of the request makes every call again;
repeats stay independent; the retest study always calls; entries are whole, damaged ones
skipped; reused answers are declared, free under the ceiling, and verify as any other."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.execution.cache.store import CacheStore, Damaged
from evalnb.execution.spend import run_spend
from evalnb.records.stores import JsonlStore
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import FakeLLMServer

CALLS = 44   # the WildTrace sample: 11 answers sent (one task is out of context), 3 judges each
ANSWERS = 11


def full_run(params: dict[str, Any]) -> Path:
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.judge_retest(run)
    evalnb.aggregate(run)
    run.close()
    return Path(params["output_dir"])


def scores(run_dir: Path) -> Any:
    return json.loads((run_dir / "scores.json").read_text("utf-8"))["metrics"]


def records(run_dir: Path, stage: str) -> dict[str, Any]:
    return JsonlStore(run_dir / f"{stage}.jsonl").load()


@pytest.fixture
def counting(server: FakeLLMServer) -> FakeLLMServer:
    server.responder = deterministic_responder
    return server


def test_a_second_run_into_a_fresh_folder_makes_no_call_and_the_same_numbers(counting: FakeLLMServer,
                                                                              tmp_path: Path) -> None:
    first = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    assert counting.count() == CALLS
    counting.reset()
    second = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b")))
    assert counting.count() == 0
    assert scores(second) == scores(first)
    for stage in ("generate", "judge"):
        reused = records(second, stage)
        sent = {k: r for k, r in reused.items() if r["status"] != "out_of_context"}
        assert sent and all(r["cache"]["hit"] and r["attempts"] == 0 for r in sent.values())
        original = records(first, stage)
        for key, record in sent.items():   # the original call's time and route, its usage apart
            assert record["text"] == original[key]["text"]
            assert record["cache"]["route"] == original[key]["model_route"]
            assert record["cache"]["usage"] == original[key]["usage"]
            assert record.get("usage") is None
            assert record["cache"]["run"] == "t"
            assert abs(time.mktime(time.strptime(record["cache"]["called_at"][:19], "%Y-%m-%dT%H:%M:%S"))
                       - time.mktime(time.gmtime(original[key]["started_at"]))) < 2
    assert run_spend(second, {"model": {"name": "contestant-x"}, "judges": [{"name": f"judge-{i}"} for i in (1, 2, 3)],
                              "prices": {"contestant-x": {"input": 1.0, "output": 1.0}}}) == 0.0


@pytest.mark.parametrize("change", ["temperature", "budget", "prompt", "model", "base_url"])
def test_any_change_of_the_request_makes_every_call_again(counting: FakeLLMServer, tmp_path: Path,
                                                          change: str) -> None:
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    counting.reset()
    params = openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b"))
    if change == "temperature":   # the field no longer sent
        params["model"]["send_temperature"] = False
    elif change == "budget":   # a reasoning model's larger output budget
        params["model"]["reasoning"] = True
    elif change == "prompt":
        data = json.loads(Path(params["data"]).read_text("utf-8"))
        for task in data["tasks"]:
            task["question_text"] += " "
        copy = tmp_path / "tasks.json"
        copy.write_text(json.dumps(data), "utf-8")
        params["data"] = str(copy)
    elif change == "model":
        params["model"]["name"] = "contestant-y"
    else:
        params["model"]["base_url"] = params["model"]["base_url"].replace("127.0.0.1", "localhost")
    run = evalnb.open_run(params)
    evalnb.generate(run)
    run.close()
    assert counting.count() == ANSWERS   # every contestant call made again



def test_k_repeats_make_k_calls_the_first_time_and_none_the_second(counting: FakeLLMServer, tmp_path: Path) -> None:
    first = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a"), repeats=3))
    assert counting.count(model="contestant-x") == 3 * ANSWERS   # one request, three samples: three calls
    counting.reset()
    second = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b"), repeats=3))
    assert counting.count() == 0
    assert scores(second) == scores(first)


def test_the_retest_study_makes_its_calls_every_time(counting: FakeLLMServer, tmp_path: Path) -> None:
    retest = {"sample": 2, "repeats": 2}
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a"), judge_retest=retest))
    counting.reset()
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b"), judge_retest=retest))
    assert counting.count() == 2 * 2 * 3   # protocol calls reused; every retest call made (2 items, K=2, 3 judges)


def test_cache_false_and_fresh_roles_call_again(counting: FakeLLMServer, tmp_path: Path) -> None:
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    counting.reset()
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b"), cache=False))
    assert counting.count() == CALLS
    counting.reset()
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "c"), cache={"fresh": ["model"]}))
    assert counting.count() == ANSWERS   # the contestant fresh, the judges' verdicts reused


def test_a_damaged_entry_is_reported_and_fetched_again(counting: FakeLLMServer, tmp_path: Path,
                                                        own_response_cache: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    params = openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a"))
    run = evalnb.open_run(params)
    evalnb.generate(run)
    run.close()
    store = CacheStore(own_response_cache)
    paths = [path for path, _ in store.entries()]
    assert len(paths) == ANSWERS
    paths[0].write_text(paths[0].read_text("utf-8").replace("Answer to", "Answer tx", 1), "utf-8")   # edited
    paths[1].write_text(paths[1].read_text("utf-8")[:40], "utf-8")                                    # cut short
    counting.reset()
    capsys.readouterr()
    params["output_dir"] = str(tmp_path / "b")
    run = evalnb.open_run(params)
    evalnb.generate(run)
    run.close()
    assert counting.count() == 2
    printed = capsys.readouterr()
    said = printed.err + printed.out
    assert "does not match its digest" in said and "not a whole JSON entry" in said
    assert all(not isinstance(entry, Damaged) for _, entry in store.entries())   # replaced by the new answers


def fill(root: str, keys: list[str]) -> None:
    """A child process: write an entry for each key (the same keys as its sibling)."""
    os.environ["EVALNB_CACHE"] = root
    store = CacheStore(Path(root))
    for key in keys:
        store.put(key, {"called_at": time.time(), "completion": {"text": key * 100, "status": "ok"}})


def test_two_processes_filling_one_cache_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    keys = [f"{i:064x}" for i in range(300)]
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=fill, args=(str(tmp_path / "c"), keys[::step])) for step in (1, -1)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    entries = list(CacheStore(tmp_path / "c").entries())
    assert sorted(path.stem for path, _ in entries) == sorted(keys)   # each key once, none lost
    assert all(isinstance(e, dict) and e["completion"]["text"] == p.stem * 100 for p, e in entries)


WRITER = """
import sys, time
from pathlib import Path
from evalnb.execution.cache.store import CacheStore
store = CacheStore(Path(sys.argv[1]))
i = 0
while True:
    store.put(f"{i % 50:064x}", {"called_at": time.time(), "completion": {"text": "x" * 2_000_000, "status": "ok"}})
    i += 1
    if i == 3:
        print("writing", flush=True)
"""


def test_sigkill_during_writes_never_leaves_an_entry_served_half(tmp_path: Path) -> None:
    root = tmp_path / "c"
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    store = CacheStore(root)
    entries = list(store.entries())
    assert entries
    for path, entry in entries:   # every file under an entry's name is whole
        assert isinstance(entry, dict) and len(entry["completion"]["text"]) == 2_000_000, path
        assert isinstance(store.get(path.stem), dict)


def test_verify_passes_on_reused_answers_and_fails_when_one_is_edited(counting: FakeLLMServer, tmp_path: Path) -> None:
    from evalnb.app.main import main

    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    second = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b")))
    assert main(["verify", str(second)]) == 0
    store = second / "judge.jsonl"
    lines = store.read_text("utf-8").splitlines()
    record = json.loads(lines[0])
    assert record["cache"]["hit"]
    record["text"] = record["text"].replace('"total":', '"total": 1', 1)
    lines[0] = json.dumps(record)
    store.write_text("\n".join(lines) + "\n", "utf-8")
    assert main(["verify", str(second)]) == 1


def test_the_cache_command_shows_prunes_and_clears(counting: FakeLLMServer, tmp_path: Path, own_response_cache: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.main import main

    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b")))
    capsys.readouterr()
    assert main(["cache"]) == 0
    shown = capsys.readouterr().out
    assert f"{CALLS} entries" in shown and f"{CALLS} answers reused in all" in shown
    assert f"openai:contestant-x @ {counting.url}/v1: {ANSWERS} entries, {ANSWERS} reused" in shown
    assert main(["cache", "--model", "contestant-x"]) == 0
    assert len(list(CacheStore(own_response_cache).entries())) == CALLS - ANSWERS
    assert main(["cache", "--older-than", "1"]) == 0   # nothing is a day old
    assert len(list(CacheStore(own_response_cache).entries())) == CALLS - ANSWERS
    assert main(["cache", "--clear"]) == 0
    assert list(CacheStore(own_response_cache).entries()) == []


def test_no_cache_and_the_cache_parameter_are_checked() -> None:
    from evalnb.app.parser import build_parser, no_cache_sets
    from evalnb.core.cache_options import check_cache
    from evalnb.core.errors import ConfigError

    assert no_cache_sets(build_parser().parse_args(["run", "p.yaml", "--no-cache"]).no_cache) == ["cache=false"]
    assert no_cache_sets(build_parser().parse_args(["run", "p.yaml", "--no-cache", "model"]).no_cache) \
        == ["cache.fresh=[model]"]
    assert no_cache_sets(build_parser().parse_args(["run", "p.yaml"]).no_cache) == []
    assert check_cache({"max_age_days": 30, "fresh": ["model"]}, "p.yaml", ["model", "judge1"]) \
        == {"max_age_days": 30.0, "fresh": ["model"]}
    with pytest.raises(ConfigError, match=r"p.yaml: cache.fresh: no endpoint 'judge9'"):
        check_cache({"fresh": ["judge9"]}, "p.yaml", ["model", "judge1"])
    with pytest.raises(ConfigError, match=r"p.yaml: cache.max_age_days: expected a positive number"):
        check_cache({"max_age_days": 0}, "p.yaml", ["model"])


def test_max_age_days_calls_again_for_older_answers(counting: FakeLLMServer, tmp_path: Path,
                                                     own_response_cache: Path) -> None:
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    store = CacheStore(own_response_cache)
    for path, entry in list(store.entries()):   # every original call made 10 days ago
        assert isinstance(entry, dict)
        store.put(path.stem, {**entry, "called_at": float(entry["called_at"]) - 10 * 86400})
    counting.reset()
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b"), cache={"max_age_days": 30}))
    assert counting.count() == 0
    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "c"), cache={"max_age_days": 5}))
    assert counting.count() == CALLS


def test_status_says_how_many_answers_per_stage_came_from_the_cache(counting: FakeLLMServer, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.main import main

    full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "a")))
    second = full_run(openai_params(tmp_path, counting.url, output_dir=str(tmp_path / "b")))
    capsys.readouterr()
    assert main(["status", str(second)]) == 0
    shown = capsys.readouterr().out
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert f"generate: {ANSWERS} answers reused from the response cache (original calls {today})" in shown
    assert f"judge: {CALLS - ANSWERS} answers reused from the response cache (original calls {today})" in shown
