"""Both released representations, and strict validation with errors that say where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import evalnb
from evalnb.benchmarks.wildtrace.tasks import read_tasks
from evalnb.app.main import main
from evalnb.core.errors import DataError
from tests.conftest import SAMPLE, offline_params, sample_tasks


def test_both_representations_load_identically() -> None:
    assert read_tasks(SAMPLE / "tasks.json") == read_tasks(SAMPLE / "tasks.jsonl")
    assert len(read_tasks(SAMPLE / "tasks.json")) == 12


def test_both_representations_score_identically(tmp_path: Path) -> None:
    results = []
    for name in ("tasks.json", "tasks.jsonl"):
        run = evalnb.open_run(offline_params(tmp_path / name, data=str(SAMPLE / name)))
        evalnb.generate(run)
        evalnb.judge(run)
        evalnb.aggregate(run)
        scores = json.loads(run.path("scores.json").read_text())
        results.append(([(t["task_id"], t["status"], t["score"]) for t in scores["tasks"]],
                        scores["overall"], scores["fingerprint"]["sha256"]))
    assert results[0] == results[1]


def write_jsonl(path: Path, tasks: list[dict]) -> Path:
    lines = [json.dumps(t | {"ground_truth": json.dumps(t["ground_truth"])}) for t in tasks]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", sample_tasks()[:3])
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-5]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"d\.jsonl, line 2: invalid JSON"):
        read_tasks(path)


def test_missing_field_names_task_and_field(tmp_path: Path) -> None:
    tasks = sample_tasks()[:2]
    del tasks[1]["question_text"]
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"tasks": tasks}))
    with pytest.raises(DataError, match=r"d\.json, task 'wt-sample-02', field 'question_text': missing"):
        read_tasks(path)


def test_wrong_type_in_rubric_names_the_nested_field(tmp_path: Path) -> None:
    tasks = sample_tasks()[:1]
    tasks[0]["ground_truth"]["scoring_rubric"][1]["points"] = "ten"
    path = write_jsonl(tmp_path / "d.jsonl", tasks)
    with pytest.raises(DataError, match=r"line 1, task 'wt-sample-01', field "
                                        r"'ground_truth.scoring_rubric\[1\].points': expected a number"):
        read_tasks(path)


def test_bad_serialised_ground_truth(tmp_path: Path) -> None:
    tasks = sample_tasks()[:1]
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(tasks[0] | {"ground_truth": "{not json"}) + "\n")
    with pytest.raises(DataError, match=r"field 'ground_truth': not valid serialised JSON"):
        read_tasks(path)


def test_duplicate_task_ids_are_refused(tmp_path: Path) -> None:
    tasks = sample_tasks()[:2]
    tasks[1]["task_id"] = tasks[0]["task_id"]
    path = write_jsonl(tmp_path / "d.jsonl", tasks)
    with pytest.raises(DataError, match=r"line 2.*duplicate id 'wt-sample-01' \(first seen at line 1\)"):
        read_tasks(path)


def test_cli_reports_missing_corpus_file_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE / "corpus", corpus)
    (corpus / "budget_memo.txt").unlink()
    params = offline_params(tmp_path, corpus=str(corpus))
    params_file = tmp_path / "p.json"
    params_file.write_text(json.dumps(params))
    assert main(["run", str(params_file)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "task 'wt-sample-05', field 'corpus_file': corpus file not found" in err[0]
    assert not Path(params["output_dir"]).exists()


def test_corpus_file_may_not_escape_the_corpus(tmp_path: Path) -> None:
    tasks = sample_tasks()[:1]
    tasks[0]["corpus_file"] = "../tasks.json"
    data = tmp_path / "d.json"
    data.write_text(json.dumps(tasks))
    with pytest.raises(DataError, match="outside the corpus directory"):
        evalnb.open_run(offline_params(tmp_path, data=str(data)))


def test_documents_are_decoded_exactly(tmp_path: Path) -> None:
    # \r\n must count as two characters: the file's text, not a newline-translated copy.
    from evalnb.core.data import Corpus
    (tmp_path / "d.txt").write_bytes("a\r\nb\u00e9".encode())
    assert Corpus(tmp_path).read("d.txt") == "a\r\nb\u00e9"
