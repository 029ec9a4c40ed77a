"""Item evidence: for each benchmark, a constructed item's evidence matches its
records field by field, in the report notebook's HTML, in tasks.html and in `evalnb show`;
secrets never reach any of them."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.app.main import main
from evalnb.evidence.items import TASKS_PAGE, load_evidence
from evalnb.evidence.items_html import evidence_html, tasks_view
from evalnb.core.types import Fact, ItemEvidence, Passage, Table
from tests.conftest import deterministic_responder, judge_total_for, openai_params, sample_tasks
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text
from tests.test_geoexpertqueries import DATA as GEQ
from tests.test_geoktools import write_cases


def run_all(params: dict) -> evalnb.Run:
    run = evalnb.open_run(params)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
    run.close()
    return run


def records(run: evalnb.Run, stage: str) -> dict[str, dict]:
    out = {}
    for line in run.path(f"{stage}.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["key"]] = record
    return out


def page_items(run_dir: Path) -> dict[str, dict]:
    """The evidence embedded in tasks.html, as the page's script reads it."""
    page = (run_dir / TASKS_PAGE).read_text()
    data = re.search(r'<script type="application/json" id="evidence-data">(.*?)</script>', page, re.S)
    assert data is not None
    return {i["item_id"]: i for i in json.loads(data.group(1))["items"]}


def shown(run_dir: Path, item_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["show", str(run_dir), item_id]) == 0
    return capsys.readouterr().out


def section(item: ItemEvidence, label: str) -> Any:
    found = [s for s in item.sections if s.label == label]
    assert len(found) == 1, (label, [s.label for s in item.sections])
    return found[0]


def in_every_view(run_dir: Path, item: ItemEvidence, texts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Each text appears whole in `evalnb show`, in tasks.html's data, and (escaped) in the notebook HTML."""
    text_view = shown(run_dir, item.item_id, capsys)
    page = json.dumps(page_items(run_dir)[item.item_id], ensure_ascii=False)
    notebook = evidence_html(item, limit=10**9)
    for text in texts:
        assert text in text_view, text
        assert json.dumps(text, ensure_ascii=False)[1:-1] in page, text
        assert html.escape(text) in notebook, text


# --- WildTrace ------------------------------------------------------------------------------------------

def test_wildtrace_item_evidence_matches_its_records(server: FakeLLMServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def respond(request: RecordedRequest) -> Text:
        if request.prompt.startswith("STRICT grader.") and request.model == "judge-2":
            total = judge_total_for(request.prompt)
            return Text(f'Itemised: {{"points_awarded": [{total}, 0], "total": {total}}}')
        return deterministic_responder(request)
    server.responder = respond
    run = run_all(openai_params(tmp_path, server.url))
    task = next(t for t in sample_tasks() if t["task_id"] == "wt-sample-02")
    generated, judged = records(run, "generate")[task["task_id"]], records(run, "judge")
    meta, items = load_evidence(run.dir)
    item = next(i for i in items if i.item_id == task["task_id"])
    assert meta["benchmark"] == "wildtrace" and meta["noun"] == "task"

    assert (item.status, section(item, "status").value) == ("ok", "ok")
    route = generated["route"]
    assert section(item, "route").value == (f"cap {route['cap']} characters ({route['cap_kind']}), "
                                            f"document {route['doc_chars']} characters")
    assert section(item, "question").text == task["question_text"]
    assert section(item, "response").text == generated["text"]
    rubric = task["ground_truth"]["scoring_rubric"]
    assert section(item, "rubric").rows == tuple((f"P{i}", r["points"], r["correct_criterion"])
                                                 for i, r in enumerate(rubric, 1))
    max_points = sum(r["points"] for r in rubric)
    for n in (1, 2, 3):
        verdict = judged[f"{task['task_id']}::judge{n}"]
        label = f"judge{n} judge-{n}"
        assert item.judges[label] == verdict["score"]
        assert section(item, f"{label}: reply").text == verdict["text"]
        row = section(item, f"{label}: verdict").rows[0]
        assert row[:5] == ("ok", verdict["total"], max_points, verdict["score"], verdict["clamped"])
        assert verdict["score"] == min(1.0, verdict["total"] / max_points)
        # per-item points, as each judge gave them (judge-2 itemises two)
        assert row[5] == (f"P1={verdict['total']:g}, P2=0" if n == 2 else f"P1={verdict['total']:g}")
    panel = sum(judged[f"{task['task_id']}::judge{n}"]["score"] for n in (1, 2, 3)) / 3
    assert item.score == pytest.approx(panel) and section(item, "panel mean").value == f"{panel:.4f}"
    assert item.disagreement == pytest.approx(max(item.judges.values()) - min(item.judges.values()))
    in_every_view(run.dir, item, [task["question_text"], generated["text"], rubric[0]["correct_criterion"],
                                  judged[f"{task['task_id']}::judge2"]["text"]], capsys)
    # Out-of-context: its route, no response, no judge.
    far = next(i for i in items if i.status == "out_of_context")
    assert section(far, "response").text is None and far.judges == {} and far.score == 0.0


# --- GeoKTools -----------------------------------------------------------------------------------------

def test_geoktools_item_evidence_names_each_elements_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_cases(tmp_path, [("a", 4, '[100, 200, "Nile", 5]', 'Thinking... [105, 300, "Nile river"]'),
                               ("b", 1, '["北京"]', "[1]"), ("c", 2, "[0]", "[0]")])
    run = run_all(p)
    meta, items = load_evidence(run.dir)
    item = next(i for i in items if i.item_id == "a")
    assert section(item, "K").value == "4" and section(item, "query").text == "q a"
    assert section(item, "golden list").text == '[100, 200, "Nile", 5]'
    assert section(item, "response").text == 'Thinking... [105, 300, "Nile river"]'
    assert section(item, "list parsed from the response").text == '[105, 300, "Nile river"]'
    rouge = 2 * (1 / 2) * 1 / (1 / 2 + 1)   # "nile" vs "nile river": P 1/2, R 1
    assert section(item, "elements").rows == (
        (0, "100", "105", 1.0, "within 10%"),
        (1, "200", "300", 0.5, "1 - relative error"),
        (2, '"Nile"', '"Nile river"', pytest.approx(rouge), "ROUGE-L"),
        (3, "5", "(missing)", 0.0, "missing"))
    assert item.score == pytest.approx((1 + 0.5 + rouge + 0) / 4)
    row = json.loads(run.path("scores.json").read_text())["tasks"][0]
    assert item.score == row["score"] and section(item, "status").value.startswith("ok; scored by deterministic")
    exact = next(i for i in items if i.item_id == "c")
    assert section(exact, "elements").rows == ((0, "0", "0", 1.0, "exact match of the whole response"),)
    blind = next(i for i in items if i.item_id == "b")
    assert section(blind, "ROUGE-blind golden strings").value == 'element 0 "北京" (ROUGE-L scores it 0)'
    in_every_view(run.dir, item, ['Thinking... [105, 300, "Nile river"]', "1 - relative error", "within 10%"], capsys)
    # The report declares the ROUGE-blind table without naming the benchmark.
    tables = evalnb.open_run(p)
    from evalnb.pages.report import benchmark_tables
    rendered = benchmark_tables(tables)._repr_html_()
    tables.close()
    assert "北京" in rendered and "ROUGE-L cannot see" in rendered


def test_geoktools_llm_judge_reply_is_evidence(server: FakeLLMServer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    reply = json.dumps({"element_scores": [0.5, 1.0], "score": 0.75, "rationale": "close enough"})
    server.responder = lambda r: Text(reply)
    p = write_cases(tmp_path, [("a", 2, '[10, "Rhine"]', '[12, "Rhein"]')])
    p |= {"scorer": "llm", "judges": [{"provider": "openai", "name": "geo-judge", "base_url": f"{server.url}/v1"}]}
    run = run_all(p)
    _, items = load_evidence(run.dir)
    item = items[0]
    assert section(item, "judge reply").text == reply
    assert section(item, "elements").rows == ((0, "10", "12", 0.5, "judge"), (1, '"Rhine"', '"Rhein"', 1.0, "judge"))
    in_every_view(run.dir, item, [reply], capsys)


# --- GeoExpertQueries ---------------------------------------------------------------------------------------

def test_geoexpertqueries_item_evidence_matches_its_records(server: FakeLLMServer, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ratings = iter([2, 1, 0] * 10)
    server.responder = lambda r: Text(json.dumps({"rating": next(ratings), "justification": "because"}))
    params = {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp_path / "run"),
              "data": str(GEQ / "queries.json"), "traces": str(GEQ / "traces.jsonl"), "rating_date": "2026-11-30",
              "concurrency": 1, "judges": [{"provider": "openai", "name": "autorater", "base_url": f"{server.url}/v1"}]}
    run = run_all(params)
    queries = {q["id"]: q for q in json.loads((GEQ / "queries.json").read_text())}
    traces = {json.loads(line)["id"]: json.loads(line) for line in (GEQ / "traces.jsonl").read_text().splitlines()
              if line.strip()}
    generated, judged = records(run, "generate"), records(run, "judge")
    _, items = load_evidence(run.dir)
    item = next(i for i in items if i.item_id == "geq-01")
    assert section(item, "query").text == queries["geq-01"]["query"]
    trajectory = section(item, "condensed trajectory")
    assert trajectory.text == generated["geq-01"]["text"] and trajectory.collapsed
    assert section(item, "final response").text == traces["geq-01"]["final_response"]
    runs = [judged[f"geq-01::run{n}"] for n in (1, 2, 3)]
    scale = {0: 0.0, 1: 0.5, 2: 1.0}
    assert section(item, "ratings").rows == tuple((n, "ok", r["rating"], scale[r["rating"]])
                                                  for n, r in enumerate(runs, 1))
    for n, record in enumerate(runs, 1):
        assert section(item, f"run {n}: reply").text == record["text"]
    mean = sum(scale[r["rating"]] for r in runs) / 3
    assert item.score == pytest.approx(mean) and section(item, "mapped mean").value == f"{mean:.4f}"
    assert item.judges == {f"run{n}": scale[r["rating"]] for n, r in enumerate(runs, 1)}
    in_every_view(run.dir, item, [queries["geq-01"]["query"], traces["geq-01"]["final_response"], runs[0]["text"]],
                  capsys)
    missing = next(i for i in items if i.status == "missing")
    assert section(missing, "condensed trajectory").text is None and missing.score == 0.0


# --- the notebook's Tasks section, show's refusals, secrets -------------------------------------------------

def test_notebook_tasks_section_lists_every_item_and_shows_the_extremes(tmp_path: Path) -> None:
    from tests.conftest import offline_params
    run = run_all(offline_params(tmp_path))
    view = tasks_view(run.dir)
    page = view._repr_html_()
    assert "<script" not in page                          # static HTML: survives into the HTML record
    for item in view.items:
        assert f"<td>{html.escape(item.item_id)}</td>" in page
    from evalnb.evidence.items import lowest_scoring, most_disagreed
    low = lowest_scoring(view.items)
    spread = most_disagreed(view.items, shown=low)
    # the most-disagreed list holds only items that disagree at all, none already shown.
    disagreeing = [i for i in view.items if i.disagreement and i not in low]
    assert len(low) == 5 and len(spread) == min(5, len(disagreeing))
    assert all(i.disagreement > 0 for i in spread) and not {i.item_id for i in spread} & {i.item_id for i in low}
    assert [i.score for i in low] == sorted(i.score for i in view.items if i.score is not None)[:5]
    for item in (*low, *spread):
        assert f'id="evidence-{item.item_id}"' in page
    long_texts = [s.text for i in low for s in i.sections if isinstance(s, Passage) and s.text and len(s.text) > 1500]
    if long_texts:
        assert "characters not shown here" in page
    # The text/plain the record keeps beside the HTML points to the items; it is not a copy of them.
    text = repr(view)
    assert text.startswith(f"{len(view.items)} tasks") and "tasks.html" in text
    assert all(i.item_id in text for i in (*low, *spread))
    passages = [s.text for i in view.items for s in i.sections if isinstance(s, Passage) and s.text and len(s.text) > 40]
    assert passages and not any(p in text for p in passages)


def test_show_refuses_an_unknown_item_and_a_run_without_evidence(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    p = write_cases(tmp_path, [("case-one", 1, "[1]", "[1]")])
    run = run_all(p)
    assert main(["show", str(run.dir), "case-onw"]) == 1
    assert "no item 'case-onw'; did you mean case-one?" in capsys.readouterr().err
    assert main(["show", str(tmp_path), "x"]) == 1
    assert "run the aggregate stage first" in capsys.readouterr().err


def test_secrets_never_reach_the_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    shaped = "sk-" + os.urandom(16).hex()                        # caught by its shape
    valued = "gateway-" + os.urandom(12).hex()                   # caught as a registered key value
    monkeypatch.setenv("EVALNB_GATEWAY_KEY", valued)
    p = write_cases(tmp_path, [("a", 1, "[1]", f"my key is {shaped} and {valued} [2]")])
    p["model"] = {"provider": "none", "name": "none", "api_key_env": "EVALNB_GATEWAY_KEY"}
    run = run_all(p)
    for name in ("evidence.json", TASKS_PAGE):
        text = (run.dir / name).read_text()
        assert shaped not in text and valued not in text and "[redacted]" in text
    out = shown(run.dir, "a", capsys)
    assert shaped not in out and valued not in out
    assert shaped not in tasks_view(run.dir)._repr_html_()


def test_evidence_round_trips_through_its_json() -> None:
    item = ItemEvidence("x", "ok", 0.5, {"j1": 0.25, "j2": 0.75},
                        (Fact("f", "v"), Passage("p", "text", collapsed=True), Table("t", ("a", "b"), ((1, "z"),))))
    assert ItemEvidence.from_dict(json.loads(json.dumps(item.as_dict()))) == item
    assert item.disagreement == 0.5 and item.as_dict()["disagreement"] == 0.5


def test_show_in_python_is_the_same_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long = "[1] " + "word " * 1000                                  # longer than the notebook's shortening
    run = run_all(write_cases(tmp_path, [("a", 1, "[1]", long)]))
    view = evalnb.show(run.dir, "a")
    assert str(view) == shown(run.dir, "a", capsys)
    assert html.escape(long) in view._repr_html_()                # whole, not shortened
    assert "characters not shown here" in evidence_html(view.item)  # the Tasks section shortens it
