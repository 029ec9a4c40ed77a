"""The judges' retest study end to end, through the official OpenAI SDK against the fake
server: judges whose verdicts carry seeded noise of a known standard deviation, the study
recovering it; the protocol's numbers identical with and without the study; resumed where
it stopped; estimated and priced before the run; refused when misconfigured."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

import evalnb
from evalnb.core.errors import ConfigError
from evalnb.pipeline.accounting import estimate
from evalnb.pipeline.retest_study import judge_retest, judge_retest_table
from tests.test_statistics_tables import check_estimates
from evalnb.pipeline.run import load_config, make_benchmark
from tests.conftest import openai_params
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

NOISE_SD = 0.05   # of the normalised score (total / rubric points)


class NoisyJudges:
    """Each judge's verdict: a quality fixed by the prompt, plus N(0, NOISE_SD) noise. The k-th
    request of one (model, prompt) draws from a generator seeded by (model, prompt, k), so the
    verdicts are the same whatever order concurrent calls arrive in."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()

    def __call__(self, request: RecordedRequest) -> Text:
        if not request.prompt.startswith("STRICT grader."):
            return Text("Answer: " + request.prompt.split("Question: ", 1)[1].split("\n", 1)[0])
        self.seen[(request.model, request.prompt)] += 1
        k = self.seen[(request.model, request.prompt)]
        points = sum(float(p) for p in re.findall(r"^P\d+ \(([\d.]+)pts\)", request.prompt, re.M))
        digest = hashlib.sha256(request.prompt.encode()).digest()
        quality = 0.25 + 0.5 * digest[0] / 255
        noise = random.Random(f"{request.model}\0{request.prompt}\0{k}").gauss(0, NOISE_SD)
        total = round((quality + noise) * points, 6)
        return Text(json.dumps({"points_awarded": [total], "total": total}))


def protocol_numbers(scores: dict) -> dict:
    return {k: scores[k] for k in ("metrics", "tasks", "overall", "scored_overall", "status_counts")}


def run_all(params: dict) -> evalnb.Run:
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    judge_retest(run)
    evalnb.aggregate(run)
    return run


def test_retest_recovers_the_judges_noise_and_leaves_the_protocol_alone(server: FakeLLMServer,
                                                                         tmp_path: Path) -> None:
    server.responder = NoisyJudges()
    plain = run_all(openai_params(tmp_path / "plain", server.url))
    assert not plain.path("judge_retest.jsonl").exists()
    protocol_requests = server.count()

    server.responder = NoisyJudges()
    server.reset()
    # cache: false: the study's run draws its protocol verdicts afresh from the noisy judges, as
    # the plain run did (tests/test_cache.py: the study's calls are made even when the rest is reused).
    params = openai_params(tmp_path / "study", server.url, judge_retest={"sample": 10, "repeats": 6, "seed": 1},
                           cache=False)
    run = run_all(params)
    scores = json.loads(run.path("scores.json").read_text())
    assert protocol_numbers(scores) == protocol_numbers(json.loads(plain.path("scores.json").read_text()))
    answered = 10   # the sample, of the 11 answers ok (one document is over the cap)
    assert scores["status_counts"]["ok"] == 11
    assert server.count() == protocol_requests + answered * 3 * 6   # 10 answers, 3 judges, 6 more each
    section = scores["judge_retest"]
    assert set(section["judges"]) == {"judge1 judge-1", "judge2 judge-2", "judge3 judge-3"}
    for judge in section["judges"].values():
        sd = judge["retest_sd"]
        assert judge["answers"] == answered and judge["verdicts"] == answered * 7
        assert sd["low"] < NOISE_SD < sd["high"] and abs(sd["value"] - NOISE_SD) < 0.012
        assert 0 < judge["noise_share"]["value"] < 0.2   # qualities spread over [0.25, 0.75]: noise is small
    table = judge_retest_table(run)
    assert table is not None and "panel (item score)" in table.index
    check_estimates(table, ["retest_sd", "noise_share"])   # as the report shows it: one cell per estimate
    # few answers: the interval is labelled approximate, in scores.json and the table
    assert all(j["note"] == f"approximate interval: {answered} answers (under 200)" for j in section["judges"].values())
    assert table.loc["judge1 judge-1", "note"] == f"approximate interval: {answered} answers (under 200)"
    # the study's spend is the run's: its own row in the usage
    assert scores["usage"]["judge_retest"]["judge-1"]["calls"] == answered * 6


def test_retest_resumes_and_waits_for_the_protocol(server: FakeLLMServer, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    server.responder = NoisyJudges()
    params = openai_params(tmp_path, server.url, judge_retest={"sample": 3, "repeats": 2})
    run = evalnb.open_run(params)
    evalnb.generate(run)
    assert judge_retest(run) is None
    said = capsys.readouterr()
    assert "waits for the protocol" in said.err + said.out
    evalnb.judge(run)
    judge_retest(run)
    made = server.count()
    judge_retest(run)   # nothing left
    assert server.count() == made
    records = [json.loads(line) for line in run.path("judge_retest.jsonl").read_text().splitlines()]
    assert len(records) == 3 * 3 * 2 and {r["repeat"] for r in records} == {1, 2}
    assert len({r["task_id"] for r in records}) == 3
    # more repeats later: only the new calls are made, the sample is the same
    more = evalnb.open_run(openai_params(tmp_path, server.url, judge_retest={"sample": 3, "repeats": 3}))
    judge_retest(more)
    assert server.count() == made + 3 * 3
    again = [json.loads(line) for line in more.path("judge_retest.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in again} == {r["task_id"] for r in records}


def test_retest_is_estimated_and_priced(tmp_path: Path) -> None:
    prices = {f"judge-{i}": {"input": 1.0, "output": 2.0} for i in (1, 2, 3)}
    params = openai_params(tmp_path, "http://127.0.0.1:9", judge_retest={"sample": 4, "repeats": 5}, prices=prices)
    config, bench_class = load_config(params)
    bench = make_benchmark(config, bench_class)
    rows = [r for r in estimate(config, bench, bench.tasks, config.output_dir) if r["stage"] == "judge_retest"]
    assert sorted(r["model"] for r in rows) == ["judge-1", "judge-2", "judge-3"]
    judge_rows = {r["model"]: r for r in estimate(config, bench, bench.tasks, config.output_dir)
                  if r["stage"] == "judge"}
    for row in rows:
        assert row["to_make"] == 4 * 5
        per_call = judge_rows[row["model"]]["est_input_tokens"] / judge_rows[row["model"]]["to_make"]
        assert row["est_input_tokens"] == pytest.approx(per_call * 20, rel=0.25)
        assert row["max_total_cost_usd"] == pytest.approx(
            (row["est_input_tokens"] * 1.0 + row["max_output_tokens"] * 2.0) / 1e6)


@pytest.mark.parametrize("value, message", [
    ({"sample": 0, "repeats": 2}, "judge_retest.sample"), ({"sample": 2}, "judge_retest: expected"),
    ({"sample": 2, "repeats": True}, "judge_retest.repeats"), ("yes", "judge_retest: expected"),
])
def test_retest_parameters_are_checked(tmp_path: Path, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(openai_params(tmp_path, "http://127.0.0.1:9", judge_retest=value))


def test_retest_is_no_part_of_the_fingerprint_and_family_is_metadata(tmp_path: Path) -> None:
    base = openai_params(tmp_path, "http://127.0.0.1:9")
    study = openai_params(tmp_path, "http://127.0.0.1:9", judge_retest={"sample": 2, "repeats": 2})
    study["model"]["family"] = "qwen"
    study["judges"][0]["family"] = "anthropic"
    first = evalnb.open_run(base).fingerprint
    second = evalnb.open_run(study)   # resumes the same directory: not refused
    assert second.fingerprint == first
    assert second.config.to_dict()["model"]["family"] == "qwen"
    assert "family" not in evalnb.open_run(base).config.to_dict()["model"]
    with pytest.raises(ConfigError, match="family"):
        load_config(openai_params(tmp_path, "http://127.0.0.1:9", model={**base["model"], "family": 3}))


def test_the_resolved_parameters_keep_the_study_and_the_families(tmp_path: Path) -> None:
    """What papermill injects (config.to_dict()) resolves to the same configuration."""
    params = openai_params(tmp_path, "http://127.0.0.1:9", judge_retest={"sample": 2, "repeats": 3})
    params["judges"][1]["family"] = "qwen"
    config, _ = load_config(params)
    again, _ = load_config(config.to_dict())
    assert again == config and again.judges[1].family == "qwen" and again.judge_retest == {
        "sample": 2, "repeats": 3, "seed": 0}


def test_a_rerun_resumes_a_retest_call_that_failed(server: FakeLLMServer, tmp_path: Path) -> None:
    """A retest call left failed (transient) is work for the judge stage, and the aggregate's
    record of the stores covers the study's: a rerun with the same settings is not skipped."""
    from evalnb.pipeline.stages import stage_records
    from evalnb.pipeline.rerun import has_work
    server.responder = NoisyJudges()
    run = evalnb.open_run(openai_params(tmp_path, server.url, judge_retest={"sample": 2, "repeats": 1}))
    evalnb.generate(run)
    evalnb.judge(run)
    judge_retest(run)
    evalnb.aggregate(run)
    assert not has_work(run, "judge", stage_records(run)) and not has_work(run, "aggregate", stage_records(run))
    store = run.path("judge_retest.jsonl")
    lines = store.read_text().splitlines()
    failed = json.loads(lines[0]) | {"status": "failed_transient", "text": None,
                                     "error": {"kind": "transient", "message": "HTTP 503: busy"}}
    store.write_text("\n".join([*lines, json.dumps(failed)]) + "\n")   # its latest line: failed
    assert has_work(run, "judge", stage_records(run))       # the study's call is resumed
    assert has_work(run, "aggregate", stage_records(run))   # its store changed since the aggregate
