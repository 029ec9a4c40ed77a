"""GeoExpertQueries at the edges: prompt files missing their placeholders, and rating dates written as plain YAML dates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import evalnb
from evalnb.core.errors import ConfigError
from tests.fakeserver import FakeLLMServer, Text
from tests.test_geoexpertqueries import DATA, PROMPTS, server_judge

OFFLINE_JUDGE = "judges: [{provider: offline, name: rubric-overlap}]\n"


def params_file(tmp_path: Path, extra: str) -> Path:
    """A YAML parameters file, as a user writes it (dates unquoted, paths relative)."""
    path = tmp_path / "params.yaml"
    path.write_text(f"benchmark: geoexpertqueries\nrun_name: geq\noutput_dir: out\n"
                    f"data: {DATA / 'queries.json'}\ntraces: {DATA / 'traces.jsonl'}\n" + extra)
    return path


# --- the prompt file must hold the placeholders its variant needs ------------------

@pytest.mark.parametrize("variant, text, missing", [
    ("tool_agnostic", "Rate the answer from 0 to 2.\n", ["{query}", "{trajectory}"]),
    ("tool_agnostic", "QUERY: {query}\nReply with a rating.\n", ["{trajectory}"]),
    ("tool_agnostic", "QUERY: {{query}}\nTRACE: {trajectory }\n", ["{trajectory}"]),   # {{query}} holds {query}
    ("workflow", "QUERY: {query}\nTRACE: {trajectory}\n", ["{tools}"]),
    ("workflow", "TOOLS: {tools}\n", ["{query}", "{trajectory}"]),
])
def test_prompt_file_without_its_placeholders_is_refused(tmp_path: Path, variant: str, text: str,
                                                                    missing: list[str]) -> None:
    prompt = tmp_path / "official_prompt.txt"
    prompt.write_text(text)
    path = params_file(tmp_path, f"prompt_variant: {variant}\nprompt_file: official_prompt.txt\n"
                                 f"rating_date: 2026-03-14\n{OFFLINE_JUDGE}")
    with pytest.raises(ConfigError) as error:
        evalnb.open_run(path)
    message = str(error.value)
    assert message.startswith(f"{path}: prompt_file: {prompt} lacks {', '.join(missing)}, "), message
    assert f"which the {variant} variant needs" in message
    assert not (tmp_path / "out").exists()


def test_a_complete_prompt_file_fills_once(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda r: Text('{"rating": 2}')
    prompt = tmp_path / "official_prompt.txt"
    prompt.write_text("Tools:\n{tools}\nQ: {query}\nT: {trajectory}\nCurrent date {date}\n")
    p = {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp_path / "run"),
         "data": str(DATA / "queries.json"), "traces": str(DATA / "traces.jsonl"), "rating_date": "2026-03-14",
         "prompt_variant": "workflow", "prompt_file": str(prompt), "num_runs": 1,
         "available_tools": ["echo {trajectory}"], "judges": [server_judge(server)]}
    run = evalnb.open_run(p)
    assert any("has no {reference}" in w for w in run.warnings)       # optional, but its absence is said
    assert any("{date} is not filled by evalnb" in w for w in run.warnings)
    evalnb.generate(run)
    evalnb.judge(run)
    queries = {q["id"]: q["query"] for q in json.loads((DATA / "queries.json").read_text())}
    responses = {r["task_id"]: r["response"] for r in json.loads(run.path("responses.json").read_text())["records"]}
    # A tool description holding "{trajectory}" is sent as written, not expanded a second time.
    expected = {f"Today is 2026-03-14.\n\nTools:\n- echo {{trajectory}}\nQ: {queries[i]}\nT: {responses[i]}\n"
                "Current date {date}\n" for i in responses if responses[i]}
    assert {r.prompt for r in server.requests} == expected


def test_shipped_prompt_files_hold_what_their_variant_needs() -> None:
    # Written out by hand from the README, not read from the module.
    needs = {"tool_agnostic": {"{query}", "{trajectory}", "{reference}"},
             "workflow": {"{query}", "{trajectory}", "{reference}", "{tools}"}}
    for variant, names in needs.items():
        text = (PROMPTS / f"geoexpertqueries_{variant}.txt").read_text()
        assert set(re.findall(r"\{\w+\}", text)) == names, variant


# --- rating_date as a plain YAML date -------------------------------------------------------------

def test_unquoted_yaml_rating_date_is_accepted(tmp_path: Path) -> None:
    path = params_file(tmp_path, f"rating_date: 2026-03-14\n{OFFLINE_JUDGE}")
    run = evalnb.open_run(path)
    # papermill writes the parameters into the notebook as JSON: a date object failed there.
    assert json.loads(json.dumps(run.config.to_dict()))["rating_date"] == "2026-03-14"
    assert json.loads(run.path("config.json").read_text())["rating_date"] == "2026-03-14"
    fingerprint = json.loads(run.path("fingerprint.json").read_text())
    assert fingerprint["parts"]["rating"]["value"]["date"] == "2026-03-14"
    assert run.benchmark.rating_template().startswith("Today is 2026-03-14.\n\n")


@pytest.mark.parametrize("line, shown", [
    ("rating_date: 20260314", "20260314"),            # a YAML integer
    ("rating_date: '20260314'", "'20260314'"),        # date.fromisoformat would take it
    ("rating_date: 2026-W11-6", "'2026-W11-6'"),      # and this ISO week date
    ("rating_date: '2026-02-30'", "'2026-02-30'"),
    ("rating_date: 2026-3-14", "'2026-3-14'"),
    ("rating_date: 2026-03-14 10:00:00", "'2026-03-14T10:00:00'"),   # a YAML timestamp: not a date
    ("rating_date: [2026-03-14]", "['2026-03-14']"),
])
def test_rating_date_must_be_yyyy_mm_dd_and_nothing_is_written(tmp_path: Path, line: str, shown: str) -> None:
    path = params_file(tmp_path, f"{line}\n{OFFLINE_JUDGE}")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: rating_date: expected a date YYYY-MM-DD "
                                                    f"(e.g. 2026-03-14), got {shown}")):
        evalnb.open_run(path)
    assert not (tmp_path / "out").exists()


def test_an_impossible_yaml_date_names_the_parameters_file(tmp_path: Path) -> None:
    path = params_file(tmp_path, f"rating_date: 2026-02-30\n{OFFLINE_JUDGE}")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: not valid YAML/JSON (day is out of range for month)")):
        evalnb.open_run(path)
    assert not (tmp_path / "out").exists()
