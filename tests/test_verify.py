"""``evalnb verify``: a run recomputed from its stores and inputs; every alteration caught and named."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalnb
from evalnb.app.main import main
from tests.conftest import SAMPLE, DemoOutputs, deterministic_responder, is_figure, offline_params, openai_params
from tests.fakeserver import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent


def executed_run(folder: Path, params: dict[str, Any]) -> Path:
    """A run made by `evalnb run` (its notebooks executed), on a copy of the sample data."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SAMPLE, folder / "data")
    params |= {"data": str(folder / "data" / "tasks.json"), "corpus": str(folder / "data" / "corpus"),
               "output_dir": str(folder / "run")}
    (folder / "params.yaml").write_text(yaml.safe_dump(params), "utf-8")
    assert main(["run", str(folder / "params.yaml")]) == 0
    return folder / "run"


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("verify")
    return executed_run(base, offline_params(base))


def verify(target: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["verify", str(target), *extra])
    return code, capsys.readouterr().out.splitlines()


def test_a_clean_run_verifies(clean_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.read_bytes() for p in clean_run.rglob("*") if p.is_file()}
    code, lines = verify(clean_run, capsys=capsys)
    assert (code, lines) == (0, [])
    assert {p: p.read_bytes() for p in clean_run.rglob("*") if p.is_file()} == before   # nothing written


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text("utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")


def score_edited(run: Path) -> None:
    edit_json(run / "scores.json", lambda s: s["tasks"][2].update(score=0.123))


def store_line_removed(run: Path) -> None:
    lines = (run / "judge.jsonl").read_text("utf-8").splitlines(keepends=True)
    (run / "judge.jsonl").write_text("".join(lines[:4] + lines[5:]), "utf-8")


def judge_score_edited(run: Path) -> None:
    lines = [json.loads(line) for line in (run / "judge.jsonl").read_text("utf-8").splitlines()]
    lines[0]["score"] = 0.0 if lines[0]["score"] else 1.0
    (run / "judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")


def notebook_output_edited(run: Path) -> None:
    def change(nb: Any) -> None:
        for cell in nb["cells"]:
            if cell["cell_type"] == "code" and "evalnb.headline(run)" in "".join(cell["source"]):
                data = cell["outputs"][0]["data"]
                text = "".join(data["text/plain"])
                row = text.index("\nAll:")   # the all_tasks row (shown by its label)
                value = re.search(r"\b0\.\d+", text[row:])   # its value, the first fraction on the row
                assert value is not None, text
                data["text/plain"] = text[:row] + text[row:].replace(value.group(0), "0.999999", 1)
    edit_json(run / "04_report.ipynb", change)


def edit_figure(run: Path, change: Callable[[str], str]) -> None:
    """The report's first figure output (its HTML, the PNG inside it) changed by ``change``."""
    def edit(nb: Any) -> None:
        [output, *_] = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []) if is_figure(o)]
        output["data"]["text/html"] = change("".join(output["data"]["text/html"]))
    edit_json(run / "04_report.ipynb", edit)


def other_pixels(page: str) -> str:
    """The figure's embedded PNG with one base64 letter changed, in the middle of its pixels."""
    start = page.index("base64,") + len("base64,")
    middle = start + (page.index('"', start) - start) // 2
    return page[:middle] + ("B" if page[middle] != "B" else "C") + page[middle + 1:]


def figure_pixels_edited(run: Path) -> None:
    edit_figure(run, other_pixels)


def key_planted(run: Path) -> None:
    edit_json(run / "manifest.json", lambda m: m.update(note="sk-ant-api03-" + "Q" * 40))


@pytest.mark.parametrize("alter, names", [
    (score_edited, ["scores.json: tasks[wt-sample-03].score: recorded 0.123"]),
    (store_line_removed, ["judge.jsonl: ", "manifest.json stores.judge", "scores.json: "]),
    (judge_score_edited, ["judge.jsonl: wt-sample-01::judge1: score: recorded"]),
    (notebook_output_edited, ["04_report.ipynb: cell 6 (evalnb.headline): output text/plain differs"]),
    (figure_pixels_edited, ["04_report.ipynb: cell ", "(evalnb.score_histogram): output text/html differs"]),
    (key_planted, ["manifest.json, line ", "a key-shaped string (sk-ant-…)"]),
])
def test_each_alteration_is_caught_and_named(clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             alter: Callable[[Path], None], names: list[str]) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(clean_run, copy)
    alter(copy)
    code, lines = verify(copy, capsys=capsys)
    assert code == 1
    for name in names:
        assert any(name in line for line in lines), (name, lines)
    assert all(line.startswith(str(copy)) for line in lines)   # each line names its file
    assert not any("Q" * 40 in line for line in lines)        # a key is named, never shown


def test_under_another_matplotlib_a_figure_is_checked_without_its_pixels(
        clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Another matplotlib draws other pixels from the same numbers: the figure's PNG (inside its
    HTML, its one copy) is not compared, and its caption and displayed size still are."""
    from evalnb.app.runs.notebooks import render_html

    copy = tmp_path / "copy"
    shutil.copytree(clean_run, copy)
    edit_json(copy / "manifest.json", lambda m: m["packages"].update(matplotlib="0.0.1"))
    edit_figure(copy, other_pixels)
    assert not (copy / "paper").exists()
    render_html(copy / "04_report.ipynb")   # the record's page, made from the notebook as it now is
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 0
    assert "figures not compared (matplotlib differs from the run's)" in capsys.readouterr().err
    edit_figure(copy, lambda page: page.replace("</figcaption>", " And something else.</figcaption>"))
    render_html(copy / "04_report.ipynb")
    code, lines = verify(copy, capsys=capsys)
    assert code == 1 and len(lines) == 1 and "(evalnb.score_histogram): output text/html differs" in lines[0], lines


def test_a_changed_data_file_is_caught(clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs are checked against the fingerprint, at their recorded paths or where --set says."""
    data = tmp_path / "tasks.json"
    shutil.copyfile(clean_run.parent / "data" / "tasks.json", data)
    assert verify(clean_run, "--set", f"data={data}", capsys=capsys) == (0, [])
    tasks = json.loads(data.read_text("utf-8"))
    tasks["tasks"][0]["ground_truth"]["scoring_rubric"][0]["points"] += 1
    data.write_text(json.dumps(tasks), "utf-8")
    code, lines = verify(clean_run, "--set", f"data={data}", capsys=capsys)
    assert code == 1
    assert any("fingerprint.json: parts.shared.tasks: recorded sha256" in line and "the data file" in line
               for line in lines)


def test_a_changed_document_is_caught(clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(clean_run.parent / "data" / "corpus", corpus)
    document = json.loads((clean_run.parent / "data" / "tasks.json").read_text())["tasks"][0]["corpus_file"]
    (corpus / document).write_text((corpus / document).read_text("utf-8") + "one more sentence.", "utf-8")
    code, lines = verify(clean_run, "--set", f"corpus={corpus}", capsys=capsys)
    assert code == 1
    assert any("generate.jsonl: wt-sample-01: route.doc_chars: recorded" in line for line in lines), lines


def test_missing_inputs_are_named(clean_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An input verify cannot read: "could not check", apart from "does not match", exit 2."""
    code, lines = verify(clean_run, "--set", "data=/nonexistent/tasks.json", capsys=capsys)
    assert code == 2 and len(lines) == 1
    assert "config.json: could not check: the run's inputs cannot be read" in lines[0]
    assert "/nonexistent/tasks.json" in lines[0]
    main(["verify", str(clean_run), "--set", "data=/nonexistent/tasks.json"])
    assert capsys.readouterr().err.endswith(f"evalnb verify: {clean_run}: 1 could not check\n")


def test_a_discrepancy_beside_what_could_not_be_checked_decides_the_exit_status(
        clean_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs that cannot be read, and a key planted in the record: exit 1, the two counted apart."""
    copy = tmp_path / "copy"
    shutil.copytree(clean_run, copy)
    key_planted(copy)
    capsys.readouterr()
    assert main(["verify", str(copy), "--set", "data=/nonexistent/tasks.json"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2 and "could not check" in lines[0] and "a key-shaped string" in lines[1], lines
    assert err.endswith(f"evalnb verify: {copy}: 1 discrepancy (does not match); 1 could not check\n")


def test_reaggregation_is_byte_identical(tmp_path: Path) -> None:
    run = evalnb.open_run(offline_params(tmp_path))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    files = ("scores.json", "evidence.json", "tasks.html", "responses.json")
    first = {name: run.path(name).read_bytes() for name in files}
    manifest = json.loads(run.path("manifest.json").read_text())
    again = evalnb.open_run(offline_params(tmp_path))
    evalnb.aggregate(again)
    assert {name: again.path(name).read_bytes() for name in files} == first
    assert "updated_at" not in json.loads(first["scores.json"])
    later = json.loads(run.path("manifest.json").read_text())
    assert manifest["aggregated_at"] and later["aggregated_at"] >= manifest["aggregated_at"]
    assert later["stores"]["generate"]["lines"] == 12


def test_verify_needs_no_network_and_no_key(server: FakeLLMServer, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A run made against an endpoint, verified in a fresh process after the endpoint is gone,
    with no key variable set."""
    server.responder = deterministic_responder
    params = openai_params(tmp_path, server.url)
    for endpoint in (params["model"], *params["judges"]):
        endpoint["api_key_env"] = "EVALNB_VERIFY_TEST_KEY"
    monkeypatch.setenv("EVALNB_VERIFY_TEST_KEY", "a-key-of-the-run-only")
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    run.close()
    server.stop()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_KEY")}
    result = subprocess.run([sys.executable, "-m", "evalnb.app.main", "verify", str(tmp_path / "run")], env=env,
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    # Made through the API: no executed notebooks here, which verify says on stderr.
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr
    assert "no executed stage notebooks here" in result.stderr


def test_every_run_of_the_demo_verifies(demo_outputs: DemoOutputs, capsys: pytest.CaptureFixture[str]) -> None:
    """The session's one `evalnb demo` (tests/conftest.py), read and never written."""
    assert demo_outputs.code == 0, demo_outputs.printed
    folders = sorted(p for p in demo_outputs.dir.iterdir() if p.is_dir())
    assert len(folders) == 5 and any((p / "compare.json").exists() for p in folders)
    before = {p: p.stat().st_mtime_ns for p in demo_outputs.dir.rglob("*") if p.is_file()}
    for folder in folders:
        assert verify(folder, capsys=capsys) == (0, []), folder
    assert {p: p.stat().st_mtime_ns for p in demo_outputs.dir.rglob("*") if p.is_file()} == before


def test_a_run_being_written_is_said_so_and_not_checked(clean_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A run another process holds (its lock) is being written: exit 2, naming the holder; the
    same run tampered with once that process has gone still exits 1."""
    import time

    copy = tmp_path / "copy"
    shutil.copytree(clean_run, copy)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from evalnb.records.lock import acquire; acquire(Path(sys.argv[1]), 'evalnb.judge'); "
                               "print('held', flush=True); time.sleep(120)", str(copy)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        score_edited(copy)
        capsys.readouterr()
        code = main(["verify", str(copy)])
        said = capsys.readouterr()
        assert code == 2 and said.out == "", said
        assert "being written by" in said.err and f"pid {holder.pid}" in said.err and "nothing checked" in said.err
    finally:
        holder.kill()
        holder.wait(timeout=30)
    deadline = time.monotonic() + 30   # the OS frees the lock when its holder dies
    while (code := verify(copy, capsys=capsys)[0]) == 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert code == 1
