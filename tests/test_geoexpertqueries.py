"""GeoExpertQueries: trace reading and conversion, condensation, the two prompt variants with
the date header, three rated runs mapped through the likert file."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

import evalnb
from evalnb.benchmarks.geoexpertqueries import protocol as geq
from evalnb.app.main import main
from evalnb.core.errors import DataError
from evalnb.benchmarks.geoexpertqueries.protocol import parse_rating
from evalnb.core.replies import JudgeReplyError
from evalnb.benchmarks.geoexpertqueries.trajectories import clip, condense, from_openai_messages, read_traces
from evalnb.core.data import Where
from tests.conftest import ROOT
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

DATA = ROOT / "evalnb" / "data" / "geoexpertqueries"
PROMPTS = ROOT / "evalnb" / "benchmarks" / "geoexpertqueries" / "prompts"

TRACE = {"id": "q1", "steps": [
    {"type": "message", "role": "assistant", "content": "Looking it up."},
    {"type": "tool_call", "name": "geo.search", "arguments": {"q": "Delft", "n": 2}, "output": "2 hits"},
    {"type": "tool_call", "name": "geo.fail", "arguments": "raw args", "output": None},
    {"type": "code", "language": "python", "code": "print(1 + 1)", "output": "2"},
    {"type": "code", "code": "x = 1", "output": None},
], "final_response": "Delft has 2 hits."}


def test_condense_every_step_kind() -> None:
    expected = (
        "Step 1: message from assistant\nLooking it up.\n\n"
        'Step 2: tool call geo.search\nArguments: {"q": "Delft", "n": 2}\nOutput:\n2 hits\n\n'
        "Step 3: tool call geo.fail\nArguments: raw args\nOutput: (none)\n\n"
        "Step 4: code (python)\nprint(1 + 1)\nOutput:\n2\n\n"
        "Step 5: code (unknown language)\nx = 1\nOutput: (none)\n\n"
        "Final response:\nDelft has 2 hits.")
    assert condense(TRACE) == expected


def test_long_outputs_keep_beginning_and_end_and_say_what_was_cut() -> None:
    text = "A" * 500 + "M" * 1000 + "Z" * 500
    clipped = clip(text, 200)
    assert len(clipped) <= 200
    head, tail = clipped.split("\n[... ")[0], clipped.split(" characters cut ...]\n")[1]
    assert set(head) == {"A"} and set(tail) == {"Z"}
    assert f"[... {len(text) - len(head) - len(tail):,} characters cut ...]" in clipped
    trace = dict(TRACE, steps=[{"type": "tool_call", "name": "dump", "arguments": {}, "output": text}])
    condensed = condense(trace, output_chars=300, total_chars=10_000)
    assert "characters cut ...]" in condensed and condensed.endswith("Final response:\nDelft has 2 hits.")
    # The overall limit keeps the final response whole and cuts the steps in the middle.
    many = dict(TRACE, steps=[TRACE["steps"][1]] * 400)
    short = condense(many, total_chars=3000)
    assert len(short) <= 3000 and short.startswith("Step 1: tool call geo.search")
    assert "Step 400: tool call geo.search" in short and short.endswith("Delft has 2 hits.")


def test_openai_transcript_is_converted() -> None:
    transcript = {"id": "q2", "messages": [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "How far is Delft from Leiden?"},
        {"role": "assistant", "content": "Measuring.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "route", "arguments": '{"from": "Delft"}'}},
            {"id": "c2", "type": "function", "function": {"name": "geocode", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "52.0,4.3"},
        {"role": "tool", "tool_call_id": "c1", "content": "24 km"},
        {"role": "assistant", "content": "About 24 km."}]}
    assert from_openai_messages(transcript, Where("t")) == {"id": "q2", "final_response": "About 24 km.", "steps": [
        {"type": "message", "role": "assistant", "content": "Measuring."},
        {"type": "tool_call", "id": "c1", "name": "route", "arguments": {"from": "Delft"}, "output": "24 km"},
        {"type": "tool_call", "id": "c2", "name": "geocode", "arguments": "not json", "output": "52.0,4.3"}]}


@pytest.mark.parametrize("line, field, problem", [
    ({"id": "geq-01", "steps": [{"type": "tool_call", "arguments": {}}], "final_response": "x"},
     "steps[0]", "'name' is a required property"),
    ({"id": "geq-01", "steps": [{"type": "code", "code": 5}], "final_response": "x"},
     "steps[0].code", "5 is not of type 'string'"),
    ({"id": "geq-01", "steps": [{"type": "video", "url": "x"}], "final_response": "x"},
     "steps[0].type", "'video' is not one of"),
    ({"id": "geq-01", "steps": [], "final_response": 3}, "final_response", "is not of type 'string'"),
    ({"id": "geq-01", "steps": []}, "(record)", "'final_response' is a required property"),
    ({"id": "geq-01", "messages": [{"role": "user", "content": "q"},
                                   {"role": "tool", "tool_call_id": "x", "content": "?"},
                                   {"role": "assistant", "content": "a"}]},
     "messages[1].tool_call_id", "answers no earlier tool call"),
])
def test_malformed_trace_line_is_reported_with_line_and_field(tmp_path: Path, line: dict, field: str,
                                                              problem: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(TRACE | {"id": "geq-02"}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(DataError, match=rf"t\.jsonl, line 2, task 'geq-01', field '{re.escape(field)}': "
                                        rf".*{re.escape(problem)}"):
        read_traces(path, ["geq-01", "geq-02"])


def test_sample_traces_read_with_their_report() -> None:
    traces = read_traces(DATA / "traces.jsonl", [f"geq-0{i}" for i in range(1, 7)])
    assert sorted(traces.traces) == [f"geq-0{i}" for i in range(1, 6)]
    assert traces.unknown_ids == ["geq-99"] and traces.converted_ids == ["geq-03", "geq-05"]


def params(tmp_path: Path, judge: dict, **extra) -> dict:
    return {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp_path / "run"),
            "data": str(DATA / "queries.json"), "traces": str(DATA / "traces.jsonl"),
            "rating_date": "2026-11-30", "judges": [judge],
            "retry": {"base_delay": 0.01, "max_delay": 0.02}, **extra}


def server_judge(server: FakeLLMServer) -> dict:
    return {"provider": "openai", "name": "autorater", "base_url": f"{server.url}/v1"}


@pytest.mark.parametrize("variant", ["tool_agnostic", "workflow"])
def test_prompt_variants_render_exactly_with_the_date_header(server: FakeLLMServer, tmp_path: Path,
                                                              variant: str) -> None:
    server.responder = lambda r: Text('{"rating": 2, "justification": "ok"}')
    p = params(tmp_path, server_judge(server), prompt_variant=variant,
               available_tools=["elevation.sample", "poi.search"], num_runs=1)
    run = evalnb.open_run(p)
    evalnb.generate(run)
    evalnb.judge(run)
    queries = {q["id"]: q for q in json.loads((DATA / "queries.json").read_text())}
    responses = {r["task_id"]: r for r in json.loads(run.path("responses.json").read_text())["records"]}
    template = (PROMPTS / f"geoexpertqueries_{variant}.txt").read_text()
    expected = {"Today is 2026-11-30.\n\n" + template.replace("{query}", queries[i]["query"])
                .replace("{reference}", queries[i]["reference"])
                .replace("{tools}", "- elevation.sample\n- poi.search")
                .replace("{trajectory}", responses[i]["response"]) for i in responses if responses[i]["response"]}
    assert {r.prompt for r in server.requests} == expected
    assert all("temperature" not in r.body for r in server.requests)


def test_three_runs_mapped_and_averaged(server: FakeLLMServer, tmp_path: Path) -> None:
    replies = {"geq-01": ["2", "1", "2"], "geq-02": ["0", "0", "1"], "geq-03": ["2", "2", "2"],
               "geq-04": ["1", "1", "1"], "geq-05": ["Rating: 2", "rating = 0", "2"]}
    queries = {q["id"]: q["query"] for q in json.loads((DATA / "queries.json").read_text())}

    def respond(request: RecordedRequest) -> Text:
        task = next(i for i, q in queries.items() if f"QUERY:\n{q}\n" in request.prompt)
        answer = replies[task].pop(0)
        return Text(answer if "ating" in answer else json.dumps({"rating": int(answer), "justification": "j"}))
    server.responder = respond
    run = evalnb.open_run(params(tmp_path, server_judge(server)))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    mapped = {"geq-01": (1 + 0.5 + 1) / 3, "geq-02": (0 + 0 + 0.5) / 3, "geq-03": 1.0, "geq-04": 0.5,
              "geq-05": (1 + 0 + 1) / 3, "geq-06": 0.0}
    got = {t["task_id"]: t["score"] for t in scores["tasks"]}
    assert got == pytest.approx(mapped)
    assert scores["overall"] == pytest.approx(sum(mapped.values()) / 6)
    assert server.count() == 15                      # 5 traces x 3 runs; no call for the missing one
    assert scores["rating_counts"] == {"0": 3, "1": 5, "2": 7}
    assert scores["agreement"] == {"queries": 5, "unanimous_share": 2 / 5, "max_spread_share": 1 / 5,
                                   "mean_range": (1 + 1 + 0 + 0 + 2) / 5}
    config = scores["judge_config"]
    assert config["date_header"] == "Today is 2026-11-30." and config["num_runs"] == 3
    assert config["likert"] == {"0": 0.0, "1": 0.5, "2": 1.0}
    assert config["prompt_file"]["sha256"] == hashlib.sha256(
        (PROMPTS / "geoexpertqueries_tool_agnostic.txt").read_bytes()).hexdigest()
    assert scores["ci"]["overall"]["n"] == 6


def test_garbage_rating_exits_2_and_rerun_repeats_only_that_call(server: FakeLLMServer, tmp_path: Path) -> None:
    calls = {"n": 0}

    def respond(request: RecordedRequest) -> Text:
        calls["n"] += 1
        return Text("I would rate this highly." if calls["n"] == 4 else '{"rating": 1}')
    server.responder = respond
    (tmp_path / "p.json").write_text(json.dumps(params(tmp_path, server_judge(server), concurrency=1)))
    stages = ["--stage", "generate", "--stage", "judge", "--stage", "aggregate"]
    assert main(["run", str(tmp_path / "p.json"), *stages]) == 2
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["overall"] is None and scores["resumable"] == {"judge_calls": 1}
    bad = [(t["task_id"], r) for t in scores["tasks"] for r in t["runs"] if r["status"] != "ok"]
    assert len(bad) == 1 and bad[0][1]["status"] == "failed_parse" and bad[0][1]["rating"] is None
    failed_prompt = server.requests[3].prompt
    assert main(["run", str(tmp_path / "p.json"), *stages]) == 0
    assert server.count() == 16 and server.requests[-1].prompt == failed_prompt
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["overall"] == pytest.approx(5 * 0.5 / 6)


def test_likert_file_replaces_the_map(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda r: Text('{"rating": 1}')
    likert = tmp_path / "likert.json"
    likert.write_text('{"0": 0, "1": 0.25, "2": 1}')
    run = evalnb.open_run(params(tmp_path, server_judge(server), likert_file=str(likert), num_runs=2))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    assert scores["overall"] == pytest.approx(5 * 0.25 / 6)
    assert scores["judge_config"]["likert_sha256"] == hashlib.sha256(likert.read_bytes()).hexdigest()


@pytest.mark.parametrize("reply, rating", [('{"rating": 2}', 2), ('{"rating": "1"}', 1),
                                           ("Rating: 0", 0), ("...\n**Rating**: 2", 2)])
def test_parse_rating(reply: str, rating: int) -> None:
    assert parse_rating(reply, {"0": 0.0, "1": 0.5, "2": 1.0}) == rating


@pytest.mark.parametrize("reply", ['{"rating": 3}', '{"rating": 1.5}', "two", '{"score": 2}', ""])
def test_unparsable_rating_is_a_failure(reply: str) -> None:
    with pytest.raises(JudgeReplyError):
        parse_rating(reply, {"0": 0.0, "1": 0.5, "2": 1.0})


def test_default_date_is_the_run_start_and_survives_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = params(tmp_path, {"provider": "offline", "name": "rubric-overlap"}, rating_date=None)
    first = evalnb.open_run(p)
    today = datetime.now(timezone.utc).date().isoformat()
    assert first.fingerprint["parts"]["rating"]["value"]["date"] == today

    class Tomorrow(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2099, 1, 2, tzinfo=timezone.utc)
    monkeypatch.setattr(geq, "datetime", Tomorrow)
    again = evalnb.open_run(p)                           # not refused: the recorded date is kept
    assert again.benchmark.rating_date == today
    assert evalnb.open_run(p | {"output_dir": str(tmp_path / "new")}).benchmark.rating_date == "2099-01-02"
