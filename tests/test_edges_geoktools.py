"""GeoKTools at the edges, numeric strings on each side, and
repeats that must come from agent runs. Expected scores are worked out by hand in comments."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

import evalnb
from evalnb.benchmarks.geoktools.analysis import rouge_blind_table
from evalnb.core.errors import ConfigError, DataError
from evalnb.benchmarks.geoktools.scoring import deterministic_score, exact_match
from tests.fakeserver import FakeLLMServer, Text
from tests.test_geoktools import params, run_all, write_cases


# --- JSON booleans are not numbers -------------------------------------------------------------

@pytest.mark.parametrize("response, golden, expected", [
    ("[true]", "[1]", False),                  # Python says True == 1; JSON does not
    ("[1]", "[true]", False),
    ("[false]", "[0]", False),
    ("[0.0]", "[false]", False),
    ('[{"a": true}]', '[{"a": 1}]', False),    # nested too
    ("[[1, true]]", "[[1, 1]]", False),
    ("[true]", "[true]", True),
    ("[ true ]", "[true]", True),              # JSON-equal, not string-equal
    ("[1.0]", "[1]", True),                    # numbers still compare by value
])
def test_exact_match_keeps_booleans_apart(response: str, golden: str, expected: bool) -> None:
    assert exact_match(response, golden) is expected


@pytest.mark.parametrize("response, golden, score", [
    ("[true]", "[1]", 0.0),              # a boolean is no number: not within any tolerance
    ('["x", false]', '["x", 0]', 0.5),   # [1 (ROUGE "x"="x"), 0]
    ("[1]", "[true]", 0.0),              # a golden boolean equals only a boolean
    ("[0]", "[false]", 0.0),
    ("[[1, 1]]", "[[1, true]]", 0.0),
    ("[true, 5.2]", "[true, 5]", 1.0),   # [1, e = 0.04 -> 1]
    ("[false, 5]", "[true, 5]", 0.5),
])
def test_deterministic_scorer_keeps_booleans_apart(response: str, golden: str, score: float) -> None:
    assert deterministic_score(response, golden)[0] == pytest.approx(score)


def test_booleans_through_the_pipeline(tmp_path: Path) -> None:
    scores = run_all(write_cases(tmp_path, [("a", 1, "[1]", "[true]"), ("b", 1, "[true]", "[true]")]))
    rows = {t["case_id"]: t for t in scores["tasks"]}
    assert (rows["a"]["method"], rows["a"]["score"]) == ("deterministic", 0.0)
    assert (rows["b"]["method"], rows["b"]["score"]) == ("exact", 1.0)


# --- golden answers must be lists; ----------- missing responses score 0 -----------------------

@pytest.mark.parametrize("golden", [
    '{"answer": [1]}', '"Nile"', "42", "Nile", "[1, 2", "The answer is [1]", "[1] [2]",
    "[NaN]", "[Infinity]", "[1e400]", "[" + "9" * 400 + "]",
])
def test_golden_that_is_not_a_json_list_is_a_data_error(tmp_path: Path, golden: str) -> None:
    p = write_cases(tmp_path, [("a", 1, "[1]", "[1]"), ("b", 2, golden, "[1]")])
    with pytest.raises(DataError, match=r"cases\.json, task 'b', field 'golden_answer_raw': "):
        evalnb.open_run(p)
    assert not Path(p["output_dir"]).exists()


def test_null_or_absent_response_scores_zero(tmp_path: Path) -> None:
    p = write_cases(tmp_path, [("a", 1, "[1]", "[1]"), ("b", 1, "[2]", "x"), ("c", 2, "[3]", "x")])
    (tmp_path / "pred.jsonl").write_text('{"id": "a", "response": "[1]"}\n'
                                         '{"id": "b", "response": null}\n'
                                         '{"id": "c"}\n')
    scores = run_all(p)
    rows = {t["case_id"]: t for t in scores["tasks"]}
    assert scores["complete"] and scores["overall"] == pytest.approx(1 / 3)
    assert [(rows[c]["status"], rows[c]["score"]) for c in "bc"] == [("empty", 0.0), ("empty", 0.0)]
    report = scores["predictions_report"]
    assert report["no_response_ids"] == ["b", "c"] and report["missing_ids"] == []


# --- numeric strings: the golden's JSON type decides ---------------------------------------------

@pytest.mark.parametrize("response, golden, score", [
    # Golden side: a string stays a string (ROUGE-L on its tokens), whatever it holds.
    ("[2023]", '["2024"]', 0.0),           # tokens [2023] vs [2024]; numerically e = 0.0005
    ("[2024]", '["2024"]', 1.0),           # the number's JSON text "2024"
    ('["2024"]', '["2024"]', 1.0),
    ("[2.6]", '["2.5"]', 0.5),             # tokens [2, 6] vs [2, 5]: LCS 1, P = R = 1/2
    ('["100 km"]', '["100"]', 2 / 3),      # P 1/2, R 1: F1 = 2 * 1/2 / (3/2)
    # Prediction side: a string holding only a plain decimal number counts as it.
    ('["105"]', "[100]", 1.0),             # e = 0.05
    ('[" 95 "]', "[100]", 1.0),            # surrounding blanks allowed
    ('["+100"]', "[100]", 1.0),
    ('["1e2"]', "[100]", 1.0),
    ('["125"]', "[100]", 0.75),            # e = 0.25 -> 1 - e
    ('[".5"]', "[0.5]", 1.0),
    ('["100 km"]', "[100]", 0.0),          # not only a number
    ('["1,000"]', "[1000]", 0.0),          # separators are not plain
    ('["1_000"]', "[1000]", 0.0),          # (Python's float() would take this one)
    ('["nan"]', "[100]", 0.0),
    ('["inf"]', "[100]", 0.0),
    ('["0x64"]', "[100]", 0.0),
    ('["１００"]', "[100]", 0.0),           # full-width digits are not ASCII digits
    ("[1e400]", "[100]", 0.0),             # beyond float range: no number
])
def test_numeric_strings_on_each_side(response: str, golden: str, score: float) -> None:
    assert deterministic_score(response, golden)[0] == pytest.approx(score)


def test_golden_numeric_strings_are_listed(tmp_path: Path) -> None:
    scores = run_all(write_cases(tmp_path, [("a", 1, '["2024", "Nile", 5]', "[2023]"),
                                            ("b", 2, '["-1.5"]', "[]")]))
    listed = scores["golden_numeric_strings"]
    assert listed["count"] == 2 and listed["cases"] == 2
    assert [(e["case_id"], e["index"], e["text"]) for e in listed["elements"]] == [("a", 0, "2024"), ("b", 0, "-1.5")]


# --- repeats are agent runs --------------------------------------------------------------------

def write_params_file(tmp_path: Path, extra: str) -> Path:
    from tests.test_geoktools import DATA
    text = (f"benchmark: geoktools\nrun_name: gk\noutput_dir: out\ndata: {DATA / 'cases.json'}\n"
            "retry: {base_delay: 0.01, max_delay: 0.02}\n" + extra)
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_repeats_over_a_single_predictions_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"id": "gk-01", "response": "[1]"}\n')
    path = write_params_file(tmp_path, "predictions: p.jsonl\nrepeats: 3\n")
    with pytest.raises(ConfigError) as error:
        evalnb.open_run(path)
    message = str(error.value)
    assert message.startswith(f"{path}: repeats: ")
    assert "a list of 3 files, one per agent run" in message and "omit predictions" in message
    assert not (tmp_path / "out").exists()


def test_repeats_that_disagree_with_the_files_are_refused(tmp_path: Path) -> None:
    for n in (1, 2):
        (tmp_path / f"r{n}.jsonl").write_text(f'{{"id": "gk-0{n}", "response": "[1]"}}\n')
    path = write_params_file(tmp_path, "predictions: [r1.jsonl, r2.jsonl]\nrepeats: 3\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: repeats: 3, but predictions lists 2 files")):
        evalnb.open_run(path)
    missing = write_params_file(tmp_path, "predictions: [r1.jsonl, r9.jsonl]\n")
    with pytest.raises(ConfigError, match=re.escape(f"{missing}: predictions[1]: {tmp_path / 'r9.jsonl'}: file not found")):
        evalnb.open_run(missing)
    assert not (tmp_path / "out").exists()


def test_one_predictions_file_per_agent_run(tmp_path: Path) -> None:
    # Two cases; run 1 answers [1] and [2] right; run 2 gets "a" wrong ([2] vs golden [1]: e = 1 -> 0).
    (tmp_path / "cases.json").write_text(json.dumps(
        [{"id": i, "query": f"q {i}", "golden_answer_raw": g, "K": k, "snapshot_date": "2026-01-01"}
         for i, k, g in (("a", 1, "[1]"), ("b", 2, "[2]"))]))
    (tmp_path / "r1.jsonl").write_text('{"id": "a", "response": "[1]"}\n{"id": "b", "response": "[2]"}\n')
    (tmp_path / "r2.jsonl").write_text('{"id": "a", "response": "[2]"}\n{"id": "b", "response": "[2]"}\n')
    path = tmp_path / "params.yaml"   # relative paths in the list are relative to the file
    path.write_text("benchmark: geoktools\nrun_name: gk\noutput_dir: out\ndata: cases.json\n"
                    "predictions: [r1.jsonl, r2.jsonl]\n")
    run = evalnb.open_run(path)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    assert scores["repeats"] == 2
    got = {(t["case_id"], t["repeat"]): t["score"] for t in scores["tasks"]}
    assert got == {("a", 1): 1.0, ("b", 1): 1.0, ("a", 2): 0.0, ("b", 2): 1.0}
    summary = scores["repeat_summary"]["overall"]
    assert summary["mean"] == pytest.approx(0.75) and summary["sd"] == pytest.approx(statistics.stdev([1.0, 0.5]))
    assert scores["overall"] == pytest.approx(0.75)           # case a: (1 + 0) / 2; case b: 1
    assert [r["file"] for r in scores["predictions_report"]] == [str(tmp_path / "r1.jsonl"), str(tmp_path / "r2.jsonl")]
    assert [r["repeat"] for r in scores["predictions_report"]] == [1, 2]


def test_identical_predictions_files_are_flagged(tmp_path: Path) -> None:
    (tmp_path / "r1.jsonl").write_text('{"id": "gk-01", "response": "[1]"}\n')
    (tmp_path / "r2.jsonl").write_text('{"id": "gk-01", "response": "[1]"}\n')
    run = evalnb.open_run(params(tmp_path, predictions=[str(tmp_path / "r1.jsonl"), str(tmp_path / "r2.jsonl")]))
    assert any("predictions[1] is identical to predictions[0]" in w for w in run.warnings)


def test_model_answers_each_query_once_per_repeat(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda r: Text("[1]")
    p = write_cases(tmp_path, [("a", 1, "[1]", ""), ("b", 2, "[2]", "")])
    p |= {"predictions": None, "repeats": 3,
          "model": {"provider": "openai", "name": "agent", "base_url": f"{server.url}/v1"}}
    scores = run_all(p)
    assert server.count() == 6 and scores["repeats"] == 3
    assert scores["overall"] == pytest.approx(0.75)   # a: 1 each run; b: [1] vs [2], e = 0.5 -> 0.5


# --- golden strings ROUGE-L cannot see --------------------------------------------------------------

def hand_blind(text: str) -> bool:
    """rouge-score's DefaultTokenizer, restated: lower-case, then runs of [a-z0-9]."""
    return not re.findall(r"[a-z0-9]+", text.lower())


def test_rouge_blind_golden_strings_are_listed(tmp_path: Path) -> None:
    goldens = {"a": '["北京", "Zürich", 5]', "b": '["Ελλάδα", "—", "São Paulo"]', "c": '["Nile"]'}
    p = write_cases(tmp_path, [("a", 1, goldens["a"], '["北京", "Zürich", 5.1]'),
                               ("b", 2, goldens["b"], goldens["b"]), ("c", 3, goldens["c"], '["Nile"]')])
    scores = run_all(p)
    expected = [("a", 0, "北京"), ("b", 0, "Ελλάδα"), ("b", 1, "—")]   # Zürich is z + rich; São Paulo s, o, paulo
    assert [x for x in expected if hand_blind(x[2])] == expected
    assert not hand_blind("Zürich") and not hand_blind("São Paulo")
    blind = scores["rouge_blind_golden_strings"]
    assert [(e["case_id"], e["index"], e["text"]) for e in blind["elements"]] == expected
    assert (blind["count"], blind["cases"], blind["examples"]) == (3, 2, ["北京", "Ελλάδα", "—"])
    rows = {t["case_id"]: t for t in scores["tasks"]}
    # a: not an exact match; 北京 scores 0 though identical, Zürich 1, 5.1 vs 5 (e = 0.02) 1.
    assert rows["a"]["score"] == pytest.approx(2 / 3) and rows["b"]["method"] == "exact"
    table = rouge_blind_table(scores)
    assert len(table) == 3 and list(table["case_id"]) == ["a", "b", "b"]

    class RunDir:   # what the report notebook holds: a run, asked for its files by name
        def path(self, name: str) -> Path:
            return Path(p["output_dir"]) / name
    assert rouge_blind_table(RunDir()).equals(table)
    assert rouge_blind_table({"tasks": []}).empty                  # other benchmarks: an empty table
