"""A record says only what happened: a rerun of a finished run executes nothing and
changes nothing; a changed transport setting is recorded as that invocation's; the times shown
as "when the calls were made" come from the stores. And the run's kernel imports the evalnb
that launched it, whatever the current directory holds."""

from __future__ import annotations

import contextlib
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalnb
from evalnb.app.main import main
from evalnb.records.call_times import call_times
from evalnb.records.manifest import stage_entry
from evalnb.records.stores import write_json
from evalnb.pages.render import provenance
from evalnb.pipeline.rerun import Plan, plan
from tests.conftest import offline_params

STAGE_FILES = ("01_generate", "02_judge", "03_aggregate", "04_report")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished offline run, made by `evalnb run` started from a folder that holds a directory
    named evalnb/ (the parent of a checkout): the stage kernel must not import it."""
    base = tmp_path_factory.mktemp("rerun")
    (base / "evalnb").mkdir()
    (base / "evalnb" / "__init__.py").write_text("# not the package: a folder named like it\n", "utf-8")
    (base / "params.yaml").write_text(yaml.safe_dump(offline_params(base)), "utf-8")
    with contextlib.chdir(base):
        assert main(["run", "params.yaml"]) == 0
    return base


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rerun(base: Path, *sets: str) -> int:
    with contextlib.chdir(base):
        return main(["run", "params.yaml", *(a for s in sets for a in ("--set", s))])


def test_a_run_started_beside_an_evalnb_folder_runs_the_installed_package(finished: Path) -> None:
    run = finished / "run"
    for name in STAGE_FILES:
        assert (run / f"{name}.ipynb").exists() and (run / f"{name}.html").exists(), name
    assert "has no attribute" not in (run / "01_generate.ipynb").read_text("utf-8")
    assert json.loads((run / "status.json").read_text())["state"] == "complete"


def test_a_rerun_of_a_finished_run_changes_nothing_and_a_changed_setting_is_the_invocations(
        finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = finished / "run"
    before = snapshot(run)
    capsys.readouterr()
    assert rerun(finished) == 0
    err = capsys.readouterr().err
    assert "nothing to do in generate, judge, aggregate, report" in err and " -> " not in err   # no notebook executed
    assert snapshot(run) == before   # every byte: notebooks, HTML, manifest, config.json, stores, figures

    # --set of a transport setting (not in the fingerprint) on a finished run: no call is made under
    # it, so config.json and the notebooks keep the setting they were made with; the manifest
    # records this invocation's beside its other fields.
    assert rerun(finished, "concurrency=8") == 0
    assert "no call was made under the changed settings (concurrency: 4 -> 8" in capsys.readouterr().err
    after = snapshot(run)
    assert {p for p in after if after[p] != before.get(p)} == {Path("manifest.json")}
    old, new = (json.loads(m[Path("manifest.json")]) for m in (before, after))
    reruns = new.pop("reruns")
    assert new == old   # every time and field as it was
    assert len(reruns) == 1 and reruns[0]["stages_executed"] == []
    assert reruns[0]["settings"]["concurrency"] == {"recorded": 4, "this_invocation": 8}
    assert json.loads((run / "config.json").read_text())["concurrency"] == 4
    for name in STAGE_FILES:
        given = json.loads((run / f"{name}.ipynb").read_text())["metadata"]["papermill"]["parameters"]["config"]
        assert given == json.loads((run / "config.json").read_text()), name


def test_with_work_left_only_the_stages_after_the_last_standing_one_run(finished: Path, tmp_path: Path) -> None:
    """Decided from the stores before any notebook runs: a judge record missing leaves generate's
    record standing; under another setting every stage runs (a skipped notebook would disagree
    with config.json)."""
    params: dict[str, Any] = yaml.safe_load((finished / "params.yaml").read_text())
    run = evalnb.open_run(params, keep_config=True)
    records = {stage: run.path(f"{name}.ipynb") for stage, name in zip(("generate", "judge", "aggregate", "report"),
                                                                       STAGE_FILES)}
    assert plan(run, records).execute == ()
    store = run.path("judge.jsonl")
    kept = store.read_bytes()
    try:
        store.write_bytes(b"".join(kept.splitlines(keepends=True)[:-1]))   # one verdict not made yet
        assert plan(run, records) == Plan(("generate",), ("judge", "aggregate", "report"))
        faster = evalnb.open_run(params | {"concurrency": 8}, keep_config=True)
        assert plan(faster, records).skip == () and plan(faster, records).execute == tuple(records)
        assert plan(run, records, forced=True).skip == ()
    finally:
        store.write_bytes(kept)


def test_the_endpoint_dates_are_the_calls_times_from_the_stores(finished: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(finished / "run", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    for entry in manifest["stages"].values():   # what a rerun used to write over them
        entry.update(started_at="2999-01-01T00:00:00+00:00", finished_at="2999-01-01T00:00:01+00:00")
    write_json(copy / "manifest.json", manifest)
    records = [json.loads(line) for line in (copy / "generate.jsonl").read_text().splitlines()]
    starts = [r["started_at"] for r in records if "started_at" in r]
    first = datetime.fromtimestamp(min(starts), timezone.utc).isoformat(timespec="seconds")
    text = provenance(copy)
    assert "2999" not in text
    assert f"generate model {first} to " in text and f"({len(starts)} calls)" in text


def test_call_times_are_the_first_start_and_last_end_per_stage_and_endpoint() -> None:
    def at(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")
    day = 1_800_000_000.0
    stores = {"generate": [{"endpoint": "model", "started_at": day + 50, "elapsed_s": 3.0},
                           {"endpoint": "model", "started_at": day, "elapsed_s": 1.0},
                           {"endpoint": "model", "status": "out_of_context"}],   # no call: no time
              "judge": [{"endpoint": "judge1", "started_at": day + 86_400, "elapsed_s": 10.0}]}
    assert call_times(stores) == {
        "generate": {"model": {"first_call": at(day), "last_call": at(day + 53), "calls": 2}},
        "judge": {"judge1": {"first_call": at(day + 86_400), "last_call": at(day + 86_410), "calls": 1}}}


def test_a_stage_run_again_with_no_call_keeps_its_times(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    first = {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T01:00:00+00:00",
             "calls": 3, "new_records": {"ok": 3}}
    write_json(path, {"stages": {"generate": first}})
    again = {"started_at": "2026-02-01T00:00:00+00:00", "finished_at": "2026-02-01T00:00:01+00:00",
             "calls": 3, "new_records": {}}
    assert stage_entry(path, "generate", again) == first | {"reruns_with_nothing_to_do": ["2026-02-01T00:00:01+00:00"]}
    resumed = again | {"new_records": {"ok": 1}}
    assert stage_entry(path, "generate", resumed) == resumed   # calls made now: now's times
