"""GeoKTools through the pipeline: the shipped sample, aggregation by K, the LLM judge
path against the local server (no call for exact matches), failures and repeats."""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

import pytest

import evalnb
from evalnb.app.main import main
from evalnb.core.errors import DataError
from tests.conftest import ROOT
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

DATA = ROOT / "evalnb" / "data" / "geoktools"
# Computed by hand in evalnb/data/geoktools/README.md (and re-checked with an independent scorer).
EXPECTED = {"gk-01": 1.0, "gk-02": 1.0, "gk-03": 1.0, "gk-04": 0.0, "gk-05": (2 / 3 + 1) / 2,
            "gk-06": 1.0, "gk-07": (1 + (1 - 57960 / 227960)) / 2, "gk-08": 0.5, "gk-09": 0.5,
            "gk-10": 0.0, "gk-11": 2 / 3, "gk-12": 1.0, "gk-13": 1.0, "gk-14": 2 / 3, "gk-15": 0.0,
            "gk-16": (3 + 2 / 3) / 4, "gk-17": (3 + (1 - 119 / 481)) / 4, "gk-18": (1 + 0 + 2 / 3 + 1) / 4, "gk-19": 1.0,
            "gk-20": (3 + 0.8) / 4}


def params(tmp_path: Path, **extra) -> dict:
    return {"benchmark": "geoktools", "run_name": "gk", "output_dir": str(tmp_path / "run"),
            "data": str(DATA / "cases.json"), "predictions": str(DATA / "predictions.jsonl"),
            "retry": {"base_delay": 0.01, "max_delay": 0.02}, **extra}


def run_all(p: dict) -> dict:
    run = evalnb.open_run(p)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    return json.loads(run.path("scores.json").read_text())


def test_sample_scores_match_the_hand_computation(tmp_path: Path) -> None:
    scores = run_all(params(tmp_path))
    got = {t["case_id"]: t["score"] for t in scores["tasks"]}
    for case_id, value in EXPECTED.items():
        assert got[case_id] == pytest.approx(value, abs=1e-4), case_id
    assert scores["overall"] == pytest.approx(0.725551, abs=1e-6)
    by_k = {k: v["mean"] for k, v in scores["by_k"].items()}
    assert by_k == pytest.approx({"1": 23 / 30, "2": 0.574574, "3": 2 / 3, "4": 0.894297}, abs=1e-6)
    assert scores["methods"] == {"exact": 2, "deterministic": 16, "empty": 1, "missing": 1}
    report = scores["predictions_report"]
    assert (report["unknown_ids"], report["missing_ids"], report["duplicate_ids"]) == (["gk-99"], ["gk-15"], [])
    assert scores["offline"] and "deterministic offline scorer" in scores["label"]
    assert scores["ci"]["overall"]["n_boot"] == 10_000 and scores["ci"]["overall"]["seed"] == 0
    assert scores["ci"]["overall"]["low"] < scores["overall"] < scores["ci"]["overall"]["high"]


def write_cases(tmp_path: Path, cases: list[tuple[str, int, str, str]]) -> dict:
    (tmp_path / "cases.json").write_text(json.dumps(
        [{"id": i, "query": f"q {i}", "golden_answer_raw": g, "K": k, "snapshot_date": "2026-01-01"}
         for i, k, g, _ in cases]))
    (tmp_path / "pred.jsonl").write_text("".join(json.dumps({"id": i, "response": r}) + "\n"
                                                 for i, _, _, r in cases))
    return params(tmp_path, data=str(tmp_path / "cases.json"), predictions=str(tmp_path / "pred.jsonl"))


def test_macro_over_k_differs_from_overall_and_resamples_within_k(tmp_path: Path) -> None:
    # K=1: three right answers; K=2: one wrong answer. Overall 3/4, macro (1 + 0) / 2.
    p = write_cases(tmp_path, [("a", 1, "[1]", "[1]"), ("b", 1, "[2]", "[2]"), ("c", 1, "[3]", "[3]"),
                               ("d", 2, "[4]", "[40]")])
    scores = run_all(p)
    assert scores["overall"] == 0.75 and scores["macro_over_k"] == 0.5
    assert scores["by_k"]["1"] == {"mean": 1.0, "n": 3} and scores["by_k"]["3"] == {"mean": None, "n": 0}
    # Resampling within K: K=1 only ever sees ones, K=2 only zeros.
    assert (scores["ci"]["by_k"]["1"]["low"], scores["ci"]["by_k"]["1"]["high"]) == (1.0, 1.0)
    assert (scores["ci"]["by_k"]["2"]["low"], scores["ci"]["by_k"]["2"]["high"]) == (0.0, 0.0)


def judge_reply(score: float, n: int) -> Text:
    return Text(json.dumps({"element_scores": [score] * n, "score": score, "rationale": "r"}))


def llm_params(tmp_path: Path, server: FakeLLMServer, **extra) -> dict:
    return params(tmp_path, scorer="llm", judges=[
        {"provider": "openai", "name": "geo-judge", "base_url": f"{server.url}/v1"}], **extra)


def test_llm_judge_is_called_only_when_needed_with_the_protocol_request(
        server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda r: judge_reply(0.5, 4)
    prompt_file = tmp_path / "official_prompt.txt"
    prompt_file.write_text("You are the official geospatial judge.\n")
    scores = run_all(llm_params(tmp_path, server, judge_prompt_file=str(prompt_file)))
    # 20 cases - 2 exact - 1 empty - 1 missing: 16 judge calls, none for the others.
    assert server.count() == 16
    asked = {r.prompt for r in server.requests}
    cases = {c["id"]: c for c in json.loads((DATA / "cases.json").read_text())}
    for case_id in ("gk-01", "gk-19", "gk-04", "gk-15"):
        assert not any(f"QUESTION:\n{cases[case_id]['query']}\n" in p for p in asked)
    body = server.requests[0].body
    assert "temperature" not in body                       # model default: not sent
    assert body["messages"][0] == {"role": "system", "content": "You are the official geospatial judge.\n"}
    assert body["response_format"]["type"] == "json_schema"
    assert set(body["response_format"]["json_schema"]["schema"]["required"]) == {"element_scores", "score", "rationale"}
    config = scores["judge_config"]
    assert config["system_prompt_file"]["sha256"] == hashlib.sha256(prompt_file.read_bytes()).hexdigest()
    assert config["model"] == "geo-judge" and config["temperature"] == "model default (not sent)"
    assert scores["methods"] == {"exact": 2, "judge": 16, "empty": 1, "missing": 1}
    assert scores["overall"] == pytest.approx((2 * 1.0 + 16 * 0.5) / 20)
    assert not scores["offline"]


@pytest.mark.parametrize("reply", [
    Text("The answer looks mostly right."),
    Text('{"element_scores": [1, 0], "score": 0.9, "rationale": "inconsistent"}'),
    Text('{"element_scores": [1.5], "score": 1.5, "rationale": "out of range"}'),
])
def test_unusable_judge_reply_exits_2_and_rerun_completes(server: FakeLLMServer, tmp_path: Path, reply: Text) -> None:
    cases = {c["id"]: c for c in json.loads((DATA / "cases.json").read_text())}
    target = f"QUESTION:\n{cases['gk-07']['query']}\n"
    state = {"bad": 1}

    def respond(request: RecordedRequest) -> Text:
        if target in request.prompt and state["bad"]:
            state["bad"] -= 1
            return reply
        return judge_reply(1.0, 1)
    server.responder = respond
    (tmp_path / "p.json").write_text(json.dumps(llm_params(tmp_path, server)))
    assert main(["run", str(tmp_path / "p.json"), "--stage", "generate", "--stage", "judge",
                 "--stage", "aggregate"]) == 2
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["overall"] is None and scores["resumable"] == {"judge_calls": 1}
    failed = [t for t in scores["tasks"] if t["judge_status"] != "ok"]
    assert [t["case_id"] for t in failed] == ["gk-07"] and failed[0]["score"] is None
    seen = server.count()
    assert main(["run", str(tmp_path / "p.json"), "--stage", "judge", "--stage", "aggregate"]) == 0
    assert server.count() == seen + 1 and target in server.requests[-1].prompt
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["overall"] is not None


def three_runs(tmp_path: Path) -> list[str]:
    """Three agent runs' predictions files: the sample's answers, told apart by the unknown id's line."""
    files = []
    for n in (1, 2, 3):
        text = (DATA / "predictions.jsonl").read_text().replace('"gk-99"', f'"gk-99-run{n}"')
        (tmp_path / f"run{n}.jsonl").write_text(text)
        files.append(str(tmp_path / f"run{n}.jsonl"))
    return files


def test_repeats_report_mean_and_sd(server: FakeLLMServer, tmp_path: Path) -> None:
    # The judge scores every judged case 0.2, then 0.5, then 0.8 in repeats 1, 2, 3.
    per_repeat = {1: 0.2, 2: 0.5, 3: 0.8}

    def respond(request: RecordedRequest) -> Text:   # the nth time this prompt is seen
        return judge_reply(per_repeat[sum(1 for x in server.requests if x.prompt == request.prompt)], 1)
    server.responder = respond
    p = llm_params(tmp_path, server, predictions=three_runs(tmp_path), concurrency=1)
    scores = run_all(p)
    assert server.count() == 16 * 3
    overall = [(2 * 1.0 + 16 * v) / 20 for v in per_repeat.values()]
    summary = scores["repeat_summary"]
    assert summary["overall"]["mean"] == pytest.approx(statistics.mean(overall))
    assert summary["overall"]["sd"] == pytest.approx(statistics.stdev(overall))
    assert [h["overall"] for h in summary["per_repeat"]] == pytest.approx(overall)
    assert scores["overall"] == pytest.approx(statistics.mean(overall))
    assert len(scores["tasks"]) == 60 and {t["repeat"] for t in scores["tasks"]} == {1, 2, 3}


def test_bad_case_and_prediction_lines_are_named(tmp_path: Path) -> None:
    cases = json.loads((DATA / "cases.json").read_text())
    cases[2]["K"] = 5
    (tmp_path / "c.json").write_text(json.dumps(cases))
    with pytest.raises(DataError, match=r"c\.json, task 'gk-03', field 'K': K must be one of"):
        evalnb.open_run(params(tmp_path, data=str(tmp_path / "c.json")))
    (tmp_path / "p.jsonl").write_text('{"id": "gk-01", "response": "[1]"}\n{"id": "gk-02", "response": [1]}\n')
    with pytest.raises(DataError, match=r"p\.jsonl, line 2, task 'gk-02', field 'response'"):
        evalnb.open_run(params(tmp_path, predictions=str(tmp_path / "p.jsonl")))
    assert not (tmp_path / "run").exists()


def test_duplicate_predictions_are_reported_first_kept(tmp_path: Path) -> None:
    p = write_cases(tmp_path, [("a", 1, "[1]", "[1]"), ("b", 2, "[2]", "[2]")])
    with open(tmp_path / "pred.jsonl", "a") as f:
        f.write(json.dumps({"id": "a", "response": "[99]"}) + "\n")
    scores = run_all(p)
    assert scores["predictions_report"]["duplicate_ids"] == ["a"] and scores["overall"] == 1.0


def test_without_predictions_the_model_answers_each_query(server: FakeLLMServer, tmp_path: Path) -> None:
    cases = {c["id"]: c for c in json.loads((DATA / "cases.json").read_text())}
    server.responder = lambda r: Text(next(c["golden_answer_raw"] for c in cases.values() if c["query"] == r.prompt))
    p = params(tmp_path, predictions=None, model={"provider": "openai", "name": "agent", "base_url": f"{server.url}/v1"})
    scores = run_all(p)
    assert server.count() == 20 and scores["overall"] == 1.0 and scores["methods"] == {"exact": 20}
    for request in server.requests:
        assert request.body["messages"] == [{"role": "user", "content": request.prompt}]
        assert request.prompt in {c["query"] for c in cases.values()}
        assert "temperature" not in request.body and request.body["max_tokens"] == 8192
    assert "predictions_report" not in scores


def test_compare_leaderboard_by_k_with_intervals(tmp_path: Path) -> None:
    from evalnb.comparison.compare import open_compare
    from evalnb.comparison.leaderboard import leaderboard
    first = params(tmp_path / "a")
    run_all(first)
    (tmp_path / "b").mkdir()
    second = write_cases(tmp_path / "b", [(c["id"], c["K"], c["golden_answer_raw"], c["golden_answer_raw"])
                                         for c in json.loads((DATA / "cases.json").read_text())])
    second["data"] = first["data"]
    run_all(second)
    table = leaderboard(open_compare([first["output_dir"], second["output_dir"]], tmp_path / "cmp"))
    # Scored from files: each named by its predictions file, not by a run name they share.
    assert list(table.index) == ["pred.jsonl [offline]", "predictions.jsonl [offline]"]
    assert table["overall"].iloc[0] == 1.0
    worse = table.iloc[1]
    assert worse["K=2"] == pytest.approx(0.574574, abs=1e-6)
    assert worse["K=2_ci_low"] < worse["K=2"] < worse["K=2_ci_high"]
