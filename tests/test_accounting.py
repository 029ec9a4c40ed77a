"""Token and cost accounting, the no-call estimate, and the context-window probe."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

import evalnb
from evalnb.app.main import main
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Text

ANSWER_HEAD = "Answer using ONLY the document below. Include every specific detail from the text.\n\nQuestion: "
JUDGE_HEAD = "STRICT grader. Only award points for SPECIFIC details present.\nQUESTION: "
JUDGE_TAIL = '\nReply JSON: {"points_awarded":[<pts>],"total":<sum>}'


def test_usage_and_cost_are_summed_per_stage_and_model(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    params = openai_params(tmp_path, server.url)
    params["prices"] = {"contestant-x": {"input": 2.0, "output": 8.0}}
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    usage = json.loads(run.path("scores.json").read_text())["usage"]
    sent = [r for r in server.requests if r.model == "contestant-x"]
    expected_in = sum(math.ceil(len(r.prompt) / 4) for r in sent)   # the server's own count
    row = usage["generate"]["contestant-x"]
    assert row["calls"] == len(sent) == 11 and row["input_tokens"] == expected_in
    assert row["cost_usd"] == pytest.approx((expected_in * 2.0 + row["output_tokens"] * 8.0) / 1e6)
    assert set(usage["judge"]) == {"judge-1", "judge-2", "judge-3"}
    assert usage["judge"]["judge-1"]["cost_usd"] is None          # no price given
    manifest = json.loads(run.path("manifest.json").read_text())
    assert manifest["usage"] == usage


def test_estimate_matches_a_hand_computation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    en_doc, zh_doc, long_doc = "word " * 2000, "港口报告" * 500, "y" * 60_000
    for name, text in (("en.txt", en_doc), ("zh.txt", zh_doc), ("long.txt", long_doc)):
        (corpus / name).write_text(text, "utf-8")
    rubric = {"scoring_rubric": [{"points": 100, "correct_criterion": "crit"}]}
    tasks = [{"task_id": t, "question_text": q, "corpus_file": f, "ground_truth": rubric}
             for t, q, f in (("a", "What?", "en.txt"), ("b", "什么?", "zh.txt"), ("c", "Long?", "long.txt"))]
    (tmp_path / "d.json").write_text(json.dumps(tasks, ensure_ascii=False))
    params = openai_params(tmp_path, "http://127.0.0.1:9", data=str(tmp_path / "d.json"), corpus=str(corpus))
    params["model"]["caps"] = {"en": 50_000, "cjk": 20_000}
    params["prices"] = {"contestant-x": {"input": 3.0, "output": 15.0}}
    params["judges"] = params["judges"][:1]
    (tmp_path / "p.json").write_text(json.dumps(params, ensure_ascii=False))

    assert main(["estimate", str(tmp_path / "p.json"), "--wide"]) == 0
    assert not Path(params["output_dir"]).exists()          # nothing written, no call made
    out = capsys.readouterr().out
    generate_tokens = ((len(ANSWER_HEAD) + len("What?") + len("\n\nDocument:\n") + len(en_doc)) / 3.3
                       + (len(ANSWER_HEAD) + len("什么?") + len("\n\nDocument:\n") + len(zh_doc)) / 1.5)

    def judge_chars(question: str) -> int:
        return len(JUDGE_HEAD + question + "\nRUBRIC:\nP1 (100pts): crit\nRESPONSE:\n" + "x" * 5000 + JUDGE_TAIL)
    judge_tokens = judge_chars("What?") / 3.3 + judge_chars("什么?") / 3.3   # under 21 ideographs: en
    from evalnb.pipeline.accounting import estimate
    from evalnb.pipeline.run import load_config, make_benchmark
    config, bench_class = load_config(tmp_path / "p.json")
    bench = make_benchmark(config, bench_class)
    rows = {r["stage"]: r for r in estimate(config, bench, bench.tasks, config.output_dir)}
    g, j = rows["generate"], rows["judge"]
    assert (g["calls"], g["skipped_no_call"], g["already_done"], g["to_make"]) == (3, 1, 0, 2)
    assert g["est_input_tokens"] == round(generate_tokens)
    assert g["max_output_tokens"] == 2 * 8192
    assert g["max_total_cost_usd"] == pytest.approx((round(generate_tokens) * 3.0 + 2 * 8192 * 15.0) / 1e6)
    assert (j["calls"], j["to_make"], j["max_output_tokens"]) == (2, 2, 2 * 16384)
    assert j["est_input_tokens"] == round(judge_tokens)
    assert f"{round(generate_tokens):,}" in out and "ESTIMATE" in out


def test_estimate_counts_work_already_done(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    run = evalnb.open_run(openai_params(tmp_path, server.url))
    evalnb.generate(run)
    from evalnb.pipeline.accounting import estimate
    rows = estimate(run.config, run.benchmark, run.tasks, run.dir)
    g = next(r for r in rows if r["stage"] == "generate")
    assert (g["already_done"], g["to_make"], g["est_input_tokens"]) == (12, 0, 0)
    assert all(r["to_make"] == 11 for r in rows if r["stage"] == "judge")


def context_limited(limits: dict[str, int]):
    def respond(request: RecordedRequest):
        ideographs = sum("\u4e00" <= c <= "\u9fff" for c in request.prompt[:4000])
        limit = limits["cjk" if ideographs > 20 else "en"]
        if len(request.prompt) > limit:
            return Error(400, f"This model's maximum context length is {limit}", code="context_length_exceeded")
        return Text("OK")
    return respond


def test_probe_finds_the_window_within_one_percent(server: FakeLLMServer, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    limits = {"en": 1_234_567, "cjk": 345_678}
    server.responder = context_limited(limits)
    params = openai_params(tmp_path, server.url)
    params["model"].pop("caps")
    (tmp_path / "p.json").write_text(json.dumps(params))
    assert main(["probe-window", str(tmp_path / "p.json")]) == 0
    overhead = len(ANSWER_HEAD) + len("Reply with the single word OK.") + len("\n\nDocument:\n")
    record = json.loads((Path(params["output_dir"]) / "window_probe.json").read_text())
    for kind, limit in limits.items():
        truth = limit - overhead
        found = record["caps"][kind]
        assert truth * 0.99 <= found <= truth, (kind, found, truth)
    probes = {p["kind"]: p for p in record["probes"]}
    assert all(p["calls"] <= 40 + 1 for p in probes.values())   # the search, then one check with the run's budget
    assert server.count() == sum(p["calls"] for p in probes.values())
    budgets = [r.body["max_tokens"] for r in server.requests]
    assert budgets.count(8192) == 2 and set(budgets) == {16, 8192}   # a word per probe; the run's budget once a kind
    assert "model.caps:" in capsys.readouterr().out


def test_mixed_panel_through_the_whole_pipeline(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    judge_script = tmp_path / "judge.py"
    judge_script.write_text(textwrap.dedent("""
        import sys
        prompt = sys.stdin.read()
        assert prompt.startswith("STRICT grader."), prompt[:40]
        print('{"points_awarded":[60],"total":60}')
    """))
    params = openai_params(tmp_path, server.url)
    params["judges"] = [
        {"provider": "openai", "name": "judge-openai", "base_url": f"{server.url}/v1"},
        {"provider": "anthropic", "name": "judge-claude", "base_url": server.url},
        {"provider": "gemini", "name": "judge-gemini", "base_url": server.url},
        {"provider": "command", "name": "judge-command", "command": [sys.executable, str(judge_script)]},
    ]
    (tmp_path / "p.json").write_text(json.dumps(params))
    assert main(["run", str(tmp_path / "p.json")]) == 0
    scores = json.loads((Path(params["output_dir"]) / "scores.json").read_text())
    assert scores["complete"] and scores["scored_n"] == 11
    assert {server.count(api=a) for a in ("anthropic", "gemini")} == {11}
    for row in scores["tasks"]:
        if row["status"] == "ok":
            assert [j["status"] for j in row["judges"]] == ["ok"] * 4
            assert row["judges"][3]["score"] == 0.6
    manifest = json.loads((Path(params["output_dir"]) / "manifest.json").read_text())
    assert manifest["routes"]["judge2"]["as_returned"] == ["judge-claude"]
    assert manifest["routes"]["judge3"]["as_returned"] == ["judge-gemini-fake-001"]
    assert manifest["routes"]["judge4"]["as_returned"] == [f"command:{Path(sys.executable).name} judge.py"]
