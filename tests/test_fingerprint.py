"""Each thing a run's fingerprint holds is fingerprinted in one place, and a refused resume
names it once: the retry policy, the judge panel, the prompt texts and
the task set are the shared part's, whatever the benchmark; the built-in benchmarks' own parts
hold the rest. A run recorded before (the benchmarks then kept their own ``retry`` and
``tasks`` parts, WildTrace its ``judge_panel`` and ``prompts`` too, GeoKTools and
GeoExpertQueries the judge and the prompt hashes inside ``scoring`` and ``rating``) still
resumes, its fingerprint.json as written; a run from before the shared part is refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.core.errors import FingerprintMismatch
from evalnb.records.fingerprint import SHARED_KEYS, fingerprint
from evalnb.pipeline import run as opening, stages as pipeline
from evalnb.pipeline.recompute import check_fingerprint, open_recorded
from tests.conftest import ROOT, openai_params

URL = "http://127.0.0.1:9"
DATA = ROOT / "evalnb" / "data"
TASKS_LINE = re.compile(r"tasks: the task set changed \(sha256 [0-9a-f]{12} -> [0-9a-f]{12}\)")


def params(benchmark: str, tmp_path: Path) -> dict[str, Any]:
    """Each built-in benchmark with a judge on an OpenAI-compatible endpoint (never called here)."""
    judge = [{"provider": "openai", "name": "the-judge", "base_url": f"{URL}/v1"}]
    retry = {"max_retries": 5, "base_delay": 0.01, "max_delay": 0.02}
    out = str(tmp_path / "run")
    if benchmark == "wildtrace":
        return openai_params(tmp_path, URL)
    if benchmark == "geoktools":
        return {"benchmark": "geoktools", "run_name": "gk", "output_dir": out, "data": str(DATA / "geoktools/cases.json"),
                "predictions": str(DATA / "geoktools/predictions.jsonl"), "scorer": "llm", "judges": judge,
                "retry": retry}
    return {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": out,
            "data": str(DATA / "geoexpertqueries/queries.json"), "traces": str(DATA / "geoexpertqueries/traces.jsonl"),
            "rating_date": "2026-11-30", "judges": judge, "retry": retry}


def open_run(p: dict[str, Any]) -> opening.Run:
    return opening.open_run(p, prefetch_sdks=False)


def edited_tasks(p: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The parameters with a copy of the data file whose first item's text has one word more."""
    data = json.loads(Path(p["data"]).read_text("utf-8"))
    items = data["tasks"] if isinstance(data, dict) else data
    field = "question_text" if "question_text" in items[0] else "query"
    items[0][field] += " Briefly."
    copy = tmp_path / f"edited{Path(p['data']).suffix}"
    copy.write_text(json.dumps(data), "utf-8")
    return p | {"data": str(copy)}


def refusal(p: dict[str, Any]) -> list[str]:
    with pytest.raises(FingerprintMismatch, match="refusing to resume") as refused:
        open_run(p)
    return [line.strip() for line in str(refused.value).splitlines()[1:-1]]


BENCHMARKS = ("wildtrace", "geoktools", "geoexpertqueries")


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_each_thing_is_fingerprinted_in_one_place(benchmark: str, tmp_path: Path) -> None:
    run = open_run(params(benchmark, tmp_path))
    parts = run.fingerprint["parts"]
    assert not set(parts) & set(SHARED_KEYS)   # the shared part's alone
    text = json.dumps(parts)
    judge = run.config.judges[0].name
    assert text.count(f'"{judge}"') == 1                                      # the panel's
    assert text.count(parts["shared"]["value"]["tasks"]) == 1                 # the task set's hash
    for digest in parts["shared"]["value"]["prompts"].values():              # each prompt text's hash
        assert text.count(digest) == 1
    assert json.loads(run.path("fingerprint.json").read_text()) == json.loads(json.dumps(run.fingerprint))


@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("change", ["panel", "panel setting", "tasks", "retry"])
def test_a_refusal_names_the_changed_thing_once(benchmark: str, change: str, tmp_path: Path) -> None:
    p = params(benchmark, tmp_path)
    open_run(p)
    changed = json.loads(json.dumps(p))
    if change == "panel":
        changed["judges"][0]["name"] = "other-judge"
    elif change == "panel setting":   # one the panel's settings hold: never a part of its own too
        changed["judges"][0]["strip_think"] = True
    elif change == "retry":
        changed["retry"]["max_retries"] = 1
    else:
        changed = edited_tasks(changed, tmp_path)
    lines = refusal(changed)
    if change == "panel":
        judge = p["judges"][0]["name"]
        assert lines == [f'judge_panel[judge1].name: "{judge}" -> "other-judge"']
    elif change == "panel setting":
        assert lines == ["judge_panel[judge1].settings.strip_think: false -> true"]
    elif change == "retry":
        assert lines == ["retry.max_retries: 5 -> 1"]
    else:
        assert len(lines) == 1 and TASKS_LINE.fullmatch(lines[0]), lines
    open_run(p)   # unchanged: resumes


def test_the_command_refuses_naming_the_panel_once_and_an_unchanged_run_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``evalnb run``: the refusal, then the same command with the recorded panel."""
    p = openai_params(tmp_path, URL)
    p["model"] = {"provider": "offline", "name": "extractive-bm25", "caps": {"en": 50000, "cjk": 20000}}
    p["judges"] = [{"provider": "offline", "name": "rubric-overlap"}]
    open_run(p)
    first = (tmp_path / "run" / "fingerprint.json").read_bytes()
    changed = json.loads(json.dumps(p))
    changed["judges"][0]["name"] = "rubric-overlap-strict"
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(changed))
    capsys.readouterr()
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("rubric-overlap") == 2 and "shared" not in err, err   # one line: old -> new
    assert '  judge_panel[judge1].name: "rubric-overlap" -> "rubric-overlap-strict"\n' in err
    assert (tmp_path / "run" / "fingerprint.json").read_bytes() == first
    run = open_run(p)   # the run as started resumes (evalnb run's first step)
    pipeline.generate(run)
    made = (run.dir / "generate.jsonl").read_bytes()
    pipeline.generate(open_run(p))
    assert (run.dir / "generate.jsonl").read_bytes() == made   # nothing made twice


# --- a run recorded before: the duplicates ---------------------------------------------------------

def as_main_wrote(run: opening.Run) -> dict[str, Any]:
    """The fingerprint evalnb wrote for this run before each thing had one place (main at
    2e5443e; checked equal, hash and all, to what that code writes for these parameters): the
    shared part, and beside it the benchmarks' own ``retry`` and ``tasks`` (the same values);
    WildTrace's ``prompts`` (the same hashes) and ``judge_panel`` (roles, providers, names);
    GeoKTools' and GeoExpertQueries' judge configuration whole in ``scoring`` / ``rating``;
    ``strip_think`` naming every role that sets it, judges too."""
    values = {k: v["value"] for k, v in run.fingerprint["parts"].items()}
    shared = values["shared"]
    extra = {"retry": shared["retry"], "tasks": shared["tasks"]}
    if run.config.benchmark == "wildtrace":
        extra |= {"prompts": shared["prompts"],
                  "judge_panel": [{k: j[k] for k in ("role", "provider", "name")} for j in shared["judge_panel"]]}
    elif run.config.benchmark == "geoktools":
        values["scoring"] = run.benchmark.judge_config()   # type: ignore[attr-defined]
    else:
        values["rating"] = run.benchmark.judge_config() | {"date": values["rating"]["date"]}   # type: ignore[attr-defined]
    config = run.config
    if roles := [role for role, e in (("model", config.model), *config.judge_roles()) if e.strip_think]:
        values["strip_think"] = roles
    return fingerprint(values | extra)


def recorded_by_main(p: dict[str, Any]) -> tuple[opening.Run, dict[str, Any]]:
    """A run directory whose fingerprint.json is the one main wrote."""
    run = open_run(p)
    old = json.loads(json.dumps(as_main_wrote(run)))
    run.path("fingerprint.json").write_text(json.dumps(old))
    assert old["sha256"] != run.fingerprint["sha256"] and set(SHARED_KEYS) & set(old["parts"])
    return run, old


@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("strip", [False, True])
def test_a_run_recorded_by_main_resumes_as_it_was_written(benchmark: str, strip: bool, tmp_path: Path) -> None:
    p = params(benchmark, tmp_path)
    p["judges"][0]["strip_think"] = strip   # main listed the judge in strip_think too
    run, old = recorded_by_main(p)
    assert ("strip_think" in old["parts"]) == strip
    written = run.path("fingerprint.json").read_bytes()
    again = open_run(p)
    assert again.fingerprint == old                                   # in force: the record's own
    assert run.path("fingerprint.json").read_bytes() == written       # never rewritten
    opened = open_recorded(run.dir, tmp_path / "scratch", (), "")     # evalnb verify's reading
    assert not isinstance(opened, str) and opened[0].fingerprint == old
    assert check_fingerprint(run.dir, "", opened[0]) == []
    # a change to it is named once, though the record holds the panel and the retry policy twice
    changed = json.loads(json.dumps(p))
    changed["judges"][0]["name"] = "other-judge"
    changed["retry"]["max_retries"] = 1
    assert refusal(changed) == [f'judge_panel[judge1].name: "{p["judges"][0]["name"]}" -> "other-judge"',
                                "retry.max_retries: 5 -> 1"]
    assert TASKS_LINE.fullmatch(refusal(edited_tasks(p, tmp_path))[0])


def test_a_run_recorded_by_main_compares_with_a_new_one(tmp_path: Path) -> None:
    """compare reads both the same way: the shared part key by key, the duplicates read past."""
    from evalnb.benchmarks.wildtrace.protocol import WildTraceProtocol
    from evalnb.records.fingerprint import comparable_parts
    from evalnb.comparison.compare import RunRecord, check_comparable

    parts = (*comparable_parts(WildTraceProtocol.COMPARABLE_PARTS), "subset")
    _, old = recorded_by_main(openai_params(tmp_path / "a", URL))
    same = open_run(openai_params(tmp_path / "b", URL) | {"model": {"provider": "openai", "name": "contestant-y",
                                                                    "caps": {"en": 50000, "cjk": 20000}}})
    records = [RunRecord(tmp_path / name, {}, fp, {}) for name, fp in (("a", old), ("b", same.fingerprint))]
    check_comparable(records, parts)   # another contestant only: comparable
    other = openai_params(tmp_path / "c", URL)
    other["judges"][2]["name"] = "judge-other"
    records[1] = RunRecord(tmp_path / "c", {}, open_run(other).fingerprint, {})
    with pytest.raises(FingerprintMismatch, match=r": judge_panel differ \(first -> second\):\n"
                                                  r'  judge_panel\[judge3\]\.name: "judge-3" -> "judge-other"\nThe'):
        check_comparable(records, parts)


def test_a_resumed_run_recorded_by_main_quotes_its_own_fingerprint(tmp_path: Path) -> None:
    """scores.json quotes the fingerprint in force, so the record stays one."""
    p = openai_params(tmp_path, URL)
    p["model"] = {"provider": "offline", "name": "extractive-bm25", "caps": {"en": 50000, "cjk": 20000}}
    p["judges"] = [{"provider": "offline", "name": n} for n in ("rubric-overlap", "rubric-overlap-strict")]
    _, old = recorded_by_main(p)
    run = open_run(p)
    for stage in (pipeline.generate, pipeline.judge, pipeline.aggregate):
        stage(run)
    assert json.loads(run.path("scores.json").read_text())["fingerprint"] == old


def test_a_run_from_before_the_shared_part_is_refused_in_one_line(tmp_path: Path) -> None:
    """docs/operations.md: such a run's scores stand, but it is not resumed."""
    p = openai_params(tmp_path, URL)
    run, old = recorded_by_main(p)
    del old["parts"]["shared"]
    run.path("fingerprint.json").write_text(json.dumps(fingerprint({k: v["value"] for k, v in old["parts"].items()})))
    assert refusal(p) == ["shared: <absent> -> retry, judge_panel, prompts, tasks "
                          "(a record made before evalnb kept these in one shared part)"]
    opened = open_recorded(run.dir, tmp_path / "scratch", (), "")   # evalnb verify names it once too
    assert not isinstance(opened, str)
    lines = check_fingerprint(run.dir, "", opened[0])
    assert len(lines) == 1 and "fingerprint.json: parts.shared: recorded sha256 None" in lines[0], lines
