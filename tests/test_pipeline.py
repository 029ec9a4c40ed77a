"""WildTrace end to end: aggregation, resumable failures, exit 2, fingerprints."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.app.main import main
from evalnb.core.errors import FingerprintMismatch
from evalnb.records.stores import JsonlStore
from tests.conftest import deterministic_responder, judge_total_for, openai_params, sample_tasks
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Refusal, Text
from tests.test_openai_provider import by_task


def all_stages(params: dict) -> evalnb.Run:
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    return run


def scores_of(run: evalnb.Run) -> dict:
    return json.loads(run.path("scores.json").read_text())


def test_aggregation_against_an_independent_computation(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = by_task({"wt-sample-01": [Refusal()], "wt-sample-03": [Text("")]})
    run = all_stages(openai_params(tmp_path, server.url))
    # Recompute from what the judges were sent: each judge's total is a function of its prompt.
    points = {t["task_id"]: sum(i["points"] for i in t["ground_truth"]["scoring_rubric"])
              for t in sample_tasks()}
    questions = {t["question_text"][:600]: t["task_id"] for t in sample_tasks()}
    per_task: dict[str, list[float]] = {}
    for request in server.requests:
        if request.prompt.startswith("STRICT grader."):
            question = request.prompt.split("QUESTION: ", 1)[1].split("\nRUBRIC:", 1)[0]
            task_id = questions[question]
            per_task.setdefault(task_id, []).append(
                min(1.0, judge_total_for(request.prompt) / points[task_id]))
    assert all(len(v) == 3 for v in per_task.values())
    expected = {k: sum(v) / 3 for k, v in per_task.items()}
    scores = scores_of(run)
    assert set(expected) == {t["task_id"] for t in scores["tasks"] if t["status"] == "ok"}
    assert scores["scored_n"] == 9                       # 12 - refused - empty - out of context
    assert scores["scored_overall"] == pytest.approx(sum(expected.values()) / 9)
    assert scores["all_tasks_overall"] == pytest.approx(sum(expected.values()) / 12)
    assert scores["overall"] == scores["all_tasks_overall"] and scores["n_tasks"] == 12
    assert scores["complete"] is True
    assert scores["status_counts"] == {"ok": 9, "refused": 1, "empty": 1, "out_of_context": 1}
    for row in scores["tasks"]:
        if row["status"] != "ok":
            assert row["score"] == 0.0 and row["judges"] == []   # never sent to judges


def test_clamped_judge_score_is_recorded(server: FakeLLMServer, tmp_path: Path) -> None:
    def respond(request: RecordedRequest) -> Text:
        if request.prompt.startswith("STRICT"):
            return Text('{"points_awarded":[150],"total":150}')
        return deterministic_responder(request)
    server.responder = respond
    scores = scores_of(all_stages(openai_params(tmp_path, server.url)))
    verdicts = [j for t in scores["tasks"] for j in t["judges"]]
    assert verdicts and all(j["score"] == 1.0 and j["clamped"] and j["total"] == 150 for j in verdicts)


def test_transient_generation_failure_is_resumable(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = by_task({"wt-sample-02": [Error(503)]})
    params = openai_params(tmp_path, server.url)
    scores = scores_of(all_stages(params))
    assert scores["complete"] is False and scores["overall"] is None
    assert scores["all_tasks_overall"] is None
    assert scores["resumable"] == {"generation": 1, "judge_calls": 0}
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "incomplete"
    before = len(server.requests)
    server.responder = deterministic_responder
    scores = scores_of(all_stages(params))
    assert scores["complete"] is True and scores["overall"] is not None
    # Only the failed task was generated again, then judged by the three judges.
    assert len(server.requests) - before == 1 + 3


def test_judge_failure_exits_2_then_rerun_completes_without_repeating(
        server: FakeLLMServer, tmp_path: Path) -> None:
    question = next(t["question_text"] for t in sample_tasks() if t["task_id"] == "wt-sample-05")
    garbage = {"left": 1}

    def respond(request: RecordedRequest) -> Text:
        if request.model == "judge-2" and f"QUESTION: {question[:600]}" in request.prompt and garbage["left"]:
            garbage["left"] -= 1
            return Text("I think this answer is quite good, maybe 80 out of 100.")
        return deterministic_responder(request)
    server.responder = respond
    params_file = tmp_path / "p.json"
    params_file.write_text(json.dumps(openai_params(tmp_path, server.url)))

    assert main(["run", str(params_file)]) == 2
    run_dir = tmp_path / "run"
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["overall"] is None and scores["all_tasks_overall"] is None
    assert scores["complete"] is False and scores["scored_n"] == 10
    assert json.loads((run_dir / "status.json").read_text())["state"] == "incomplete"
    failed = [(t["task_id"], j) for t in scores["tasks"] for j in t["judges"] if j["status"] != "ok"]
    assert len(failed) == 1 and failed[0][0] == "wt-sample-05"
    assert failed[0][1]["status"] == "failed_parse" and failed[0][1]["score"] is None
    assert "80 out of 100" in failed[0][1]["reply"]
    assert (run_dir / "04_report.ipynb").exists() and (run_dir / "04_report.html").exists()

    seen = len(server.requests)
    assert main(["run", str(params_file)]) == 0
    again = server.requests[seen:]
    # No generation repeated, no successful judge call repeated: only the failed one.
    assert [(r.model, f"QUESTION: {question[:600]}" in r.prompt) for r in again] == [("judge-2", True)]
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["complete"] is True and scores["overall"] is not None and scores["scored_n"] == 11


@pytest.mark.parametrize("change, lines", [
    # the panel and the retry policy: the shared part's, named once (tests/test_fingerprint.py)
    (lambda p: p["judges"][1].update(name="judge-other"), ['judge_panel[judge2].name: "judge-2" -> "judge-other"']),
    (lambda p: p["model"].update(caps={"en": 60000, "cjk": 20000}), ["caps.en: 50000 -> 60000"]),
    # reasoning: true is the protocol's 32768-token budget for the contestant (its §2)
    (lambda p: p["model"].update(reasoning=True), ["decoding.model.max_tokens: 8192 -> 32768"]),
    (lambda p: p["retry"].update(max_retries=2, base_delay=0.5), ["retry.max_retries: 5 -> 2",
                                                                  "retry.base_delay: 0.01 -> 0.5"]),
])
def test_resume_with_a_different_fingerprint_is_refused_naming_each_changed_value(
        tmp_path: Path, change: Any, lines: list[str]) -> None:
    """Each changed value on a line of its own, named by its key path, old -> new."""
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    evalnb.open_run(params)
    change(params)
    with pytest.raises(FingerprintMismatch, match="refusing to resume") as refused:
        evalnb.open_run(params)
    shown = [line.strip() for line in str(refused.value).splitlines()[1:-1]]
    assert shown == lines


def test_a_refusal_names_at_most_a_few_changes(tmp_path: Path) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    evalnb.open_run(params)
    # 3 names, the budget, 2 caps, the retries: 7 values, each once
    for i, judge in enumerate(params["judges"]):
        judge.update(name=f"other-{i}")
    params["model"].update(reasoning=True, caps={"en": 1, "cjk": 1})
    params["retry"].update(max_retries=1)
    with pytest.raises(FingerprintMismatch) as refused:
        evalnb.open_run(params)
    text = str(refused.value).splitlines()
    assert len(text) == 1 + 5 + 1 + 1, text   # the head, five changes, how many more, what to do
    assert text[6].strip() == "... and 2 more changed values"


def test_changed_prompt_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    evalnb.open_run(params)
    import evalnb.benchmarks.wildtrace.prompt_text as wildtrace   # where the prompts' texts live
    monkeypatch.setattr(wildtrace, "JUDGE_PROMPT", wildtrace.JUDGE_PROMPT + " ")
    with pytest.raises(FingerprintMismatch, match=r"\n  prompts.wildtrace_judge: the prompt text changed "
                                                  r"\(sha256 [0-9a-f]{12} -> [0-9a-f]{12}\)\n"):
        evalnb.open_run(params)


def test_endpoint_address_is_not_part_of_the_fingerprint(tmp_path: Path) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    first = evalnb.open_run(params).fingerprint
    params["model"]["base_url"] = "http://127.0.0.1:10/v1"
    assert evalnb.open_run(params).fingerprint == first


def test_unlisted_model_warns_visibly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    del params["model"]["caps"]
    run = evalnb.open_run(params)
    assert "not in the caps table" in capsys.readouterr().err
    assert any("probe" in w for w in run.warnings)
    assert "warning" in run.summary().index


def test_stage_functions_work_inside_a_running_event_loop(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder

    async def like_a_notebook_cell() -> dict:
        return scores_of(all_stages(openai_params(tmp_path, server.url)))
    assert asyncio.run(like_a_notebook_cell())["complete"] is True


def test_store_drops_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"key": "a", "status": "ok"}\n{"key": "b", "sta')
    store = JsonlStore(path)
    assert list(store.load()) == ["a"]
    store.append({"key": "b", "status": "ok"})
    store.close()
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["a", "b"]


def test_store_later_record_wins(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s.jsonl")
    store.append({"key": "a", "status": "failed_transient"})
    store.append({"key": "a", "status": "ok"})
    store.close()
    assert store.load()["a"]["status"] == "ok"


def max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    return peak


def test_concurrency_is_run_wide_and_per_endpoint(tmp_path: Path) -> None:
    # Three judges share the run's cap of 4; judge-1 is limited to 1 of its own.
    with FakeLLMServer(latency=0.15) as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url, concurrency=4)
        params["judges"][0]["concurrency"] = 1
        all_stages(params)
        # Each request holds the server for `latency` (minus a little for clock granularity).
        spans = [(r.time, r.time + 0.14) for r in server.requests if r.model.startswith("judge")]
        assert max_overlap(spans) == 4
        judge1 = [(r.time, r.time + 0.14) for r in server.requests if r.model == "judge-1"]
        assert max_overlap(judge1) == 1
