"""WildTrace answers produced elsewhere (``responses: FILE``) graded like generated ones."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.core.errors import DataError, FingerprintMismatch
from evalnb.records.stores import JsonlStore
from tests.conftest import deterministic_responder, judge_total_for, offline_params, openai_params, sample_tasks
from tests.fakeserver import FakeLLMServer

TASKS = {t["task_id"]: t for t in sample_tasks()}
POINTS = {i: sum(r["points"] for r in t["ground_truth"]["scoring_rubric"]) for i, t in TASKS.items()}
OVER_CAP = "wt-sample-10"   # its document (70,632 characters) is over the 50,000 cap the parameters give


def answer(task_id: str) -> str:
    return f"An answer written elsewhere for {task_id}: {TASKS[task_id]['question_text'][:40]}"


def all_stages(params: dict[str, Any]) -> dict[str, Any]:
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    return json.loads(run.path("scores.json").read_text("utf-8"))


def imported(tmp_path: Path, name: str, content: str, **overrides: Any) -> dict[str, Any]:
    path = tmp_path / name
    path.write_text(content, "utf-8")
    return offline_params(tmp_path, responses=str(path), **overrides)


def write_shape(shape: str, answers: dict[str, str]) -> tuple[str, str]:
    rows = [{"task_id": t, "response": a} for t, a in answers.items()]
    if shape == "jsonl":
        return "answers.jsonl", "".join(json.dumps(r) + "\n" for r in rows)
    if shape == "list":
        return "answers.json", json.dumps(rows)
    if shape == "keyed":
        return "answers.json", json.dumps({t: {"response": a} for t, a in answers.items()})
    if shape == "keyed-strings":
        return "answers.json", json.dumps(answers)
    assert shape == "evalnb"
    return "responses.json", json.dumps({"benchmark": "wildtrace", "run_name": "elsewhere",
                                        "model": {"provider": "openai", "name": "extractive-bm25"},
                                        "records": [{"status": "ok", **r, "route": {"in_scope": True}} for r in rows]})


@pytest.mark.parametrize("shape", ["jsonl", "list", "keyed", "keyed-strings", "evalnb"])
def test_each_accepted_shape_is_recorded_as_generated_answers(tmp_path: Path, shape: str) -> None:
    answers = {t: answer(t) for t in TASKS if t != "wt-sample-04"}   # one task left unanswered
    name, content = write_shape(shape, answers)
    scores = all_stages(imported(tmp_path, name, content))
    records = JsonlStore(tmp_path / "run" / "generate.jsonl").load()
    assert set(records) == set(TASKS)
    for record in records.values():
        assert record["source"] == "imported" and record["attempts"] == 0 and "usage" not in record
    for task_id in set(answers) - {OVER_CAP}:
        assert records[task_id]["status"] == "ok" and records[task_id]["text"] == answers[task_id]
    # The contestant's cap decides, whatever the file holds: scored 0, judged by nobody.
    assert records[OVER_CAP]["status"] == "out_of_context" and records[OVER_CAP]["text"] is None
    judged = {r["task_id"] for r in JsonlStore(tmp_path / "run" / "judge.jsonl").load().values()}
    assert judged == set(answers) - {OVER_CAP}
    rows = {r["task_id"]: r for r in scores["tasks"]}
    assert rows["wt-sample-04"]["status"] == "missing" and rows["wt-sample-04"]["score"] == 0.0
    assert rows[OVER_CAP]["score"] == 0.0 and rows[OVER_CAP]["judges"] == []
    report = scores["responses_report"]
    assert report["missing_ids"] == ["wt-sample-04"] and report["out_of_context_answered_ids"] == [OVER_CAP]
    assert report["sha256"] == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    # missing is final: the run is complete, All counts it as 0 over the 12 tasks of the data file.
    assert scores["complete"] is True and scores["status_counts"] == {"ok": 10, "out_of_context": 1, "missing": 1}
    ok_scores = [rows[t]["score"] for t in answers if t != OVER_CAP]
    assert scores["all_tasks_overall"] == pytest.approx(sum(ok_scores) / 12)
    assert scores["scored_overall"] == pytest.approx(sum(ok_scores) / 10) and scores["scored_n"] == 10
    assert scores["usage"]["generate"] == {}   # no model call, no tokens


def test_statuses_given_in_the_file(tmp_path: Path) -> None:
    rows = [{"task_id": "wt-sample-01", "response": "I cannot help with that.", "status": "refused"},
            {"task_id": "wt-sample-02", "response": "   ", "status": "ok"},           # blank: empty, as generated
            {"task_id": "wt-sample-03", "response": None, "status": "failed_permanent"},
            {"task_id": "wt-sample-05", "response": None, "status": "out_of_context"},  # in scope here: no answer
            {"task_id": "wt-sample-06", "response": None, "status": "failed_transient"},
            {"task_id": OVER_CAP, "response": None, "status": "out_of_context"},
            {"task_id": "not-in-the-data", "response": "x"}]
    rows += [{"task_id": t, "response": answer(t)} for t in ("wt-sample-07", "wt-sample-08")]
    scores = all_stages(imported(tmp_path, "answers.json", json.dumps(rows)))
    status = {r["task_id"]: r["status"] for r in scores["tasks"]}
    assert status["wt-sample-01"] == "refused" and status["wt-sample-02"] == "empty"
    assert status["wt-sample-03"] == "failed_permanent" and status[OVER_CAP] == "out_of_context"
    assert status["wt-sample-05"] == status["wt-sample-06"] == "missing"
    assert status["wt-sample-07"] == status["wt-sample-08"] == "ok"
    report = scores["responses_report"]
    assert report["file_statuses_without_answer"] == {"wt-sample-05": "out_of_context",
                                                      "wt-sample-06": "failed_transient"}
    assert report["unknown_ids"] == ["not-in-the-data"] and report["out_of_context_answered"] == 0
    judged = {r["task_id"] for r in JsonlStore(tmp_path / "run" / "judge.jsonl").load().values()}
    assert judged == {"wt-sample-07", "wt-sample-08"}   # only ok answers go to the judges
    assert scores["complete"] is True
    assert [r["score"] for r in scores["tasks"] if r["status"] != "ok"] == [0.0] * 10


@pytest.mark.parametrize("name, content, where, field", [
    ("a.json", json.dumps([{"task_id": "wt-sample-01", "response": "x"}, {"task_id": "wt-sample-02", "response": 5}]),
     "task '#1'", "response"),
    ("a.jsonl", '{"task_id": "wt-sample-01", "response": "x"}\n\n{"response": "y"}\n', "line 3", "task_id"),
    ("a.jsonl", '{"task_id": "wt-sample-01", "response": "x"}\n{"task_id": "wt-sample-02"}\n', "line 2", "response"),
    ("a.json", json.dumps({"wt-sample-01": "x", "wt-sample-02": {"response": None}}), "task 'wt-sample-02'",
     "response"),
    ("a.json", json.dumps([{"task_id": "wt-sample-01", "response": None, "status": "ok"}]), "task '#0'", "response"),
    ("a.json", json.dumps([{"task_id": "wt-sample-01", "response": "x", "status": "great"}]), "task '#0'", "status"),
    ("a.jsonl", '{"task_id": "wt-sample-01", "response": "x"}\n{"task_id": "wt-sample-01", "response": "y"}\n',
     "line 2", "task_id"),
    ("a.json", '{"wt-sample-01": "x", "wt-sample-01": "y"}', "task 'wt-sample-01'", "task_id"),
    ("a.json", json.dumps({"wt-sample-01": {"task_id": "wt-sample-02", "response": "x"}}), "task 'wt-sample-01'",
     "task_id"),
    ("a.json", json.dumps({"benchmark": "geoktools", "records": []}), "a.json", "benchmark"),
])
def test_a_malformed_file_is_one_line_naming_file_entry_and_field(tmp_path: Path, name: str, content: str,
                                                                   where: str, field: str) -> None:
    params = imported(tmp_path, name, content)
    with pytest.raises(DataError) as e:
        evalnb.open_run(params)
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / name) in message and where in message
    assert f"field {field!r}" in message
    assert not (tmp_path / "run").exists()   # nothing written


def test_the_file_is_part_of_the_fingerprint(tmp_path: Path) -> None:
    params = imported(tmp_path, "answers.json", json.dumps({t: answer(t) for t in TASKS}))
    all_stages(params)
    parts = json.loads((tmp_path / "run" / "fingerprint.json").read_text())["parts"]
    digest = hashlib.sha256((tmp_path / "answers.json").read_bytes()).hexdigest()
    assert parts["contestant"]["value"]["responses_sha256"] == digest
    (tmp_path / "answers.json").write_text(json.dumps({t: answer(t) + "!" for t in TASKS}), "utf-8")
    with pytest.raises(FingerprintMismatch, match="contestant"):
        evalnb.open_run(params)


def test_a_run_of_generated_answers_has_no_responses_part(tmp_path: Path) -> None:
    """Runs that generate keep the fingerprint they had: resuming them is not refused."""
    run = evalnb.open_run(offline_params(tmp_path))
    assert "responses_sha256" not in run.fingerprint["parts"]["contestant"]["value"]


def test_an_evalnb_run_rejudged_under_another_panel(server: FakeLLMServer, tmp_path: Path) -> None:
    """Grade run A under panel B: one parameter. B's numbers equal those computed here from
    A's answers and what the judges were sent; the contestant is never called, and needs no key."""
    all_stages(offline_params(tmp_path / "a"))
    a_responses = tmp_path / "a" / "run" / "responses.json"
    a_records = {r["task_id"]: r for r in json.loads(a_responses.read_text())["records"]}
    server.responder = deterministic_responder
    params = openai_params(tmp_path / "b", server.url, responses=str(a_responses))
    params["model"] = {"provider": "openai", "name": "extractive-bm25", "api_key_env": "EVALNB_TEST_UNSET_KEY",
                       "caps": {"en": 50000, "cjk": 20000}, "base_url": f"{server.url}/v1"}
    params["judges"] = params["judges"][:2]
    run = evalnb.open_run(params, require_keys=True)   # the contestant's key is not needed
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    assert all(r.prompt.startswith("STRICT grader.") for r in server.requests)   # no answer was asked for
    # By hand: each judge's total is a function of the prompt it was sent.
    questions = {t["question_text"][:600]: i for i, t in TASKS.items()}
    per_task: dict[str, list[float]] = {}
    for request in server.requests:
        task_id = questions[request.prompt.split("QUESTION: ", 1)[1].split("\nRUBRIC:", 1)[0]]
        assert f"RESPONSE:\n{a_records[task_id]['response'][:5000]}\nReply JSON" in request.prompt
        per_task.setdefault(task_id, []).append(min(1.0, judge_total_for(request.prompt) / POINTS[task_id]))
    judged = {t for t, r in a_records.items() if r["status"] == "ok"}
    assert set(per_task) == judged and all(len(v) == 2 for v in per_task.values())
    expected = {t: sum(v) / 2 for t, v in per_task.items()}
    rows = {r["task_id"]: r for r in scores["tasks"]}
    for task_id, record in a_records.items():
        assert rows[task_id]["status"] == record["status"]
        assert rows[task_id]["score"] == pytest.approx(expected.get(task_id, 0.0))
    assert scores["all_tasks_overall"] == pytest.approx(sum(expected.values()) / len(TASKS))
    assert scores["scored_overall"] == pytest.approx(sum(expected.values()) / len(expected))
    assert scores["responses_report"]["shape"] == "evalnb-responses"


def test_the_generate_notebook_shows_the_file_and_its_hash(tmp_path: Path) -> None:
    """Through `evalnb run`: the generate record names the file and its sha256, the report lists
    what the import did, and the run verifies."""
    import yaml

    from evalnb.app.main import main

    answers = {t: answer(t) for t in TASKS if t != "wt-sample-04"}
    params = imported(tmp_path, "answers.jsonl", write_shape("jsonl", answers)[1])
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params), "utf-8")
    assert main(["run", str(params_file)]) == 0
    digest = hashlib.sha256((tmp_path / "answers.jsonl").read_bytes()).hexdigest()
    generate_nb = (tmp_path / "run" / "01_generate.ipynb").read_text("utf-8")
    assert digest in generate_nb and "no model call" in generate_nb
    report_nb = (tmp_path / "run" / "04_report.ipynb").read_text("utf-8")
    assert "imported answers (responses:)" in report_nb and "wt-sample-04" in report_nb
    assert main(["verify", str(tmp_path / "run")]) == 0

