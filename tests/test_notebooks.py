"""The stage notebooks: thin, output-free in git, and the full demo pipeline through papermill."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
import pytest

from tests.test_cli_runs import check_demo_in_the_terminal
from evalnb.app.runs.notebooks import COMPARE_NOTEBOOK, notebook_for
from evalnb.core.types import STAGES
from tests.conftest import ROOT, DemoOutputs, embedded_pngs, figure_outputs, shown_size

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_stage_has_a_notebook() -> None:
    assert [notebook_for(s) for s in STAGES] + [COMPARE_NOTEBOOK] == NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_in_git_carry_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_thin(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert tagged == [nb.cells[1]]
    assert not re.search(r"(api_key|sk-|token)\s*=", tagged[0].source)
    for cell in nb.cells[2:]:
        if cell.cell_type != "code":
            continue
        assert not re.search(r"^\s*(def|class|for|while|async|with)\b|lambda|OpenAI\(", cell.source, re.M)
        calls = re.findall(r"evalnb\.\w+\(", cell.source)
        assert len(calls) <= 1 or cell.source.startswith("import evalnb")


def about_output(notebook: Path) -> str:
    """The Markdown that a record's ``evalnb.about`` cell left in the .ipynb itself."""
    executed = nbformat.read(notebook, as_version=4)
    return next(o["data"]["text/markdown"] for c in executed.cells if c.cell_type == "code"
                and "evalnb.about" in c.source for o in c.outputs if "text/markdown" in o.get("data", {}))


def test_demo_through_papermill_writes_a_complete_record(demo_outputs: DemoOutputs,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    # A non-inline backend inherited by the kernel must not drop the figures (the fixture sets
    # MPLBACKEND=Agg for the demo and its kernels).
    tmp_path = demo_outputs.dir
    assert demo_outputs.code == 0
    # every kernel of the demo, the compare's too, on Unix sockets: no TCP, no warning
    # (what the kernels print reaches this process's descriptors, kept by the fixture).
    assert "TCP" not in demo_outputs.printed and "WARNING" not in demo_outputs.printed
    run = tmp_path / "demo-wildtrace"
    for stage in STAGES:
        assert (run / notebook_for(stage).name).exists()
        assert (run / notebook_for(stage).with_suffix(".html").name).exists()
    scores = json.loads((run / "scores.json").read_text())
    assert scores["complete"] and scores["offline"] and "not comparable" in scores["label"]
    assert set(scores["status_counts"]) >= {"ok", "out_of_context", "empty"}
    assert json.loads((run / "status.json").read_text())["state"] == "complete"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["packages"]["openai"] and manifest["routes"]["model"]["as_sent"] == "extractive-bm25"

    report = nbformat.read(run / "04_report.ipynb", as_version=4)
    figures = figure_outputs(report)
    assert len(figures) == 2
    # Each figure's PNG is in the record once: the <img> of its captioned HTML, no image/png beside
    # it; the very bytes written to figures/ (docs/results.md, "Figures").
    saved = {p.read_bytes() for p in (run / "figures").glob("*.png")}
    for figure in figures:
        assert set(figure.data) == {"text/html", "text/plain"} and "<figcaption>" in figure.data["text/html"]
        [png] = embedded_pngs(figure.data["text/html"])
        assert png in saved and html.escape(figure.data["text/plain"]) in figure.data["text/html"]
    assert len(embedded_pngs((run / "04_report.ipynb").read_text())) == 2
    # Shown at an ordinary figure's size (matplotlib's 100 dpi: a one-column figure, 3.3 inches,
    # 330 pixels wide), not at its 300-dpi pixels; the HTML record says the same.
    for figure in figures:
        size = shown_size(figure)
        assert size["width"] == 330 and 180 <= size["height"] <= 420, size
    page = (run / "04_report.html").read_text()
    assert f'width="{shown_size(figures[0])["width"]}"' in page and "<figcaption>" in page
    assert (run / "figures" / "score_histogram.pdf").exists()
    # The page shows each figure once, from the notebook's one copy (its stylesheet has an image of its own).
    assert page.count('src="data:image/png;base64,') == 2 and saved <= set(embedded_pngs(page))
    injected = [c for c in report.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "demo-wildtrace" in injected[0].source

    # No progress in the record (the terminal drew it), no stderr, no widget state; the stage's
    # line says what it did.
    generate = nbformat.read(run / "01_generate.ipynb", as_version=4)
    outputs = [o for c in generate.cells for o in c.get("outputs", [])]
    assert [o for o in outputs if o.get("name") == "stderr"] == [] and "widgets" not in generate.metadata
    for stage in ("01_generate", "02_judge", "03_aggregate", "04_report"):
        for shown in ((run / f"{stage}.ipynb").read_text(), (run / f"{stage}.html").read_text()):
            assert not re.search(r"\d+%\|", shown), stage
    said = "".join(o.text for o in outputs if o.get("name") == "stdout")
    assert said == "generate: 12 answers made (10 ok, 1 empty, 1 out_of_context)\n"
    assert (run / "01_generate.ipynb").stat().st_size < 60_000

    compare = tmp_path / "demo-compare-wildtrace"
    assert (compare / "paper" / "05_compare.html").exists() and (run / "paper" / "04_report.html").exists()
    executed = nbformat.read(compare / "05_compare.ipynb", as_version=4)
    assert len(figure_outputs(executed)) == 2 and len(embedded_pngs((compare / "05_compare.ipynb").read_text())) == 2

    # every demo run leaves tasks.html, and its report shows item evidence (static HTML).
    for name in ("demo-wildtrace", "demo-wildtrace-lead-3", "demo-geoktools", "demo-geoexpertqueries"):
        run_dir = tmp_path / name
        assert (run_dir / "tasks.html").exists() and (run_dir / "evidence.json").exists(), name
        executed = nbformat.read(run_dir / "04_report.ipynb", as_version=4)
        shown = [o["data"]["text/html"] for c in executed.cells if c.cell_type == "code" for o in c.outputs
                 if "text/html" in o.get("data", {})]
        assert any('class="evidence"' in h and "lowest-scoring" in h for h in shown), name
        assert 'class="evidence"' in (run_dir / "04_report.html").read_text(), name
    # each stage record says what the stage did for its own benchmark, and carries its
    # provenance in the .ipynb itself (not only in its HTML).
    from importlib.metadata import version
    own = {"demo-wildtrace": "out of context", "demo-geoktools": "predictions file",
           "demo-geoexpertqueries": "trajectory"}
    for name, phrase in own.items():
        fingerprint = json.loads((tmp_path / name / "fingerprint.json").read_text())["sha256"]
        described = []
        for stage in STAGES:
            text = about_output(tmp_path / name / notebook_for(stage).name)
            assert fingerprint in text and f"evalnb | {version('evalnb')}" in text and "route: model" in text, name
            described.append(text.split("\n\n")[0])
        assert phrase in described[0], (name, described[0])
        assert len(set(described)) == len(STAGES), name
    generates = {about_output(tmp_path / n / "01_generate.ipynb").split("\n\n")[0] for n in own}
    assert len(generates) == len(own)   # three benchmarks, three descriptions
    assert "Golden strings ROUGE-L cannot see" in (tmp_path / "demo-geoktools" / "04_report.html").read_text()
    # The lowest-scoring task's evidence in the record is its own: the question and each judge's reply.
    from evalnb.evidence.items import load_evidence, lowest_scoring
    _, items = load_evidence(tmp_path / "demo-wildtrace")
    lowest = lowest_scoring(items)[0]
    record = (tmp_path / "demo-wildtrace" / "04_report.html").read_text()
    for section in lowest.sections:
        if section.label == "question" or section.label.endswith(": reply"):
            assert html.escape(section.text, quote=False) in record.replace("&quot;", '"').replace("&#x27;", "'")

    for name, figure in (("demo-geoktools", "accuracy_by_k"), ("demo-geoexpertqueries", "ratings_and_agreement")):
        other = tmp_path / name
        scores = json.loads((other / "scores.json").read_text())
        assert scores["complete"] and scores["offline"] and scores["ci"]["overall"]["n_boot"] == 10_000
        assert (other / "figures" / f"{figure}.png").exists()
        report = nbformat.read(other / "04_report.ipynb", as_version=4)
        assert len(figure_outputs(report)) == 2 and len(embedded_pngs((other / "04_report.ipynb").read_text())) == 2
    # what the terminal showed of it, and what `evalnb status` says of its folders.
    check_demo_in_the_terminal(tmp_path, demo_outputs, capfd)


def test_notebooks_run_as_is_from_their_folder(tmp_path: Path) -> None:
    """As JupyterLab runs them: no injected parameters, working directory notebooks/."""
    import shutil

    import papermill
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / "params", tmp_path / "params")
    (tmp_path / "evalnb").symlink_to(ROOT / "evalnb")
    for stage in ("generate", "judge", "aggregate"):
        name = notebook_for(stage).name
        papermill.execute_notebook(str(tmp_path / "notebooks" / name), str(tmp_path / name),
                                   kernel_name="python3", cwd=str(tmp_path / "notebooks"), progress_bar=False)
    scores = json.loads((tmp_path / "outputs" / "demo-wildtrace" / "scores.json").read_text())
    assert scores["complete"] and scores["n_tasks"] == 12
    assert not (tmp_path / "notebooks" / "outputs").exists()
    # Executed without evalnb run's terminal, the bar was drawn in the notebook, then cleared:
    # no progress line stays in the record.
    for stage in ("generate", "judge"):
        record = (tmp_path / notebook_for(stage).name).read_text()
        assert not re.search(r"\d+%\|", record), stage
