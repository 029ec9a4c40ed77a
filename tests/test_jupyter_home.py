"""evalnb in a researcher's own JupyterLab: `evalnb init` gives a folder whose notebooks run as
they are, and a notebook of their own can run evalnb and still plot with plt as usual."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from evalnb.app.main import main
from evalnb.app.runs.notebooks import notebook_for
from evalnb.core.types import STAGES
from tests.conftest import ROOT, embedded_pngs, is_figure

pytestmark = pytest.mark.slow


def _images(nb: nbformat.NotebookNode) -> list[int]:
    """The index of each code cell's images (one entry per image): an image/png output (a plt
    figure), or an evalnb figure (its PNG inside its HTML, and nowhere else in the output)."""
    found = []
    for i, c in enumerate(nb.cells):
        for o in c.outputs if c.cell_type == "code" else []:
            data = o.get("data", {})
            if is_figure(o):
                assert "image/png" not in data and len(embedded_pngs(data["text/html"])) == 1, (i, sorted(data))
                found.append(i)
            elif "image/png" in data:
                found.append(i)
    return found


def _errors(nb: nbformat.NotebookNode) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "error"]


def test_init_copies_a_project_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == [
        *(notebook_for(s).name for s in STAGES), "05_compare.ipynb"]
    assert {p.name for p in (tmp_path / "params").iterdir()} == {p.name for p in (ROOT / "params").iterdir()}
    assert (tmp_path / "data" / "wildtrace" / "tasks.json").exists() and (tmp_path / "examples" / "keyword_rater.py").exists()
    assert "data: ../data/wildtrace/tasks.json" in (tmp_path / "params" / "demo_wildtrace.yaml").read_text()
    assert main(["init", str(tmp_path)]) == 0      # the same files again: nothing to refuse
    mine = tmp_path / "params" / "demo_wildtrace.yaml"
    mine.write_text(mine.read_text() + "concurrency: 2\n")
    capsys.readouterr()
    assert main(["init", str(tmp_path)]) == 1
    assert "params/demo_wildtrace.yaml" in capsys.readouterr().err and "concurrency: 2" in mine.read_text()
    assert main(["init", str(tmp_path), "--force"]) == 0 and "concurrency: 2" not in mine.read_text()


def test_init_notebooks_run_as_they_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As JupyterLab runs them: no injected parameters, working directory the notebooks' folder,
    and a non-inline backend inherited from the environment."""
    import papermill

    from evalnb.pipeline.run import open_run
    from evalnb.pipeline.stages import aggregate, generate, judge

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0                     # the default folder: the current directory
    notebooks = tmp_path / "notebooks"
    for stage in STAGES:
        name = notebook_for(stage).name
        papermill.execute_notebook(str(notebooks / name), str(tmp_path / name), kernel_name="python3",
                                   cwd=str(notebooks), progress_bar=False, start_timeout=120)
    run = tmp_path / "outputs" / "demo-wildtrace"
    scores = json.loads((run / "scores.json").read_text())
    assert scores["complete"] and scores["n_tasks"] == 12
    assert len(_images(nbformat.read(tmp_path / "04_report.ipynb", as_version=4))) == 2
    assert (run / "figures" / "judge_distributions.pdf").exists()
    assert not (notebooks / "outputs").exists()

    # The compare notebook as it is reads params/compare_example.yaml: a second contestant first.
    second = open_run(tmp_path / "params" / "demo_wildtrace.yaml",
                      ["model.name=lead-3", "run_name=demo-wildtrace-lead-3",
                       f"output_dir={tmp_path / 'outputs' / 'demo-wildtrace-lead-3'}"])
    for stage in (generate, judge, aggregate):
        stage(second)
    papermill.execute_notebook(str(notebooks / "05_compare.ipynb"), str(tmp_path / "05_compare.ipynb"),
                               kernel_name="python3", cwd=str(notebooks), progress_bar=False, start_timeout=120)
    assert (tmp_path / "outputs" / "compare-example" / "compare.json").exists()
    assert len(_images(nbformat.read(tmp_path / "05_compare.ipynb", as_version=4))) == 2


OWN_NOTEBOOK = [
    "import asyncio\nimport evalnb",
    "await asyncio.sleep(0)   # top-level await: the kernel's event loop is running",
    "run = evalnb.open_run({params!r}, [{sets!r}])\nevalnb.generate(run)",
    "evalnb.judge(run)",
    "evalnb.aggregate(run)",
    "evalnb.headline(run)",
    "evalnb.score_histogram(run)",
    "evalnb.benchmark_figure(run)",
    "{magic}import matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.title('my own figure')\nplt.show()",
    "print(matplotlib.get_backend())",
    "evalnb.score_histogram(run)",   # again, the inline backend now active: it adds no PNG of its own
]


@pytest.mark.parametrize("mplbackend", [None, "Agg"], ids=["inline", "MPLBACKEND=Agg"])
def test_own_notebook_runs_evalnb_and_plots_with_plt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      mplbackend: str | None) -> None:
    """A researcher's notebook in their own folder, through nbclient with the inline backend:
    evalnb's figures (each its PNG once, inside its HTML) and the researcher's own plt figure
    (image/png) both reach the notebook. With MPLBACKEND=Agg inherited, evalnb's figures still
    show, and the researcher's own shows once they select the inline backend (``%matplotlib
    inline``); an evalnb figure shown after that is still its PNG once, not redrawn by the
    inline backend beside it."""
    from nbclient import NotebookClient

    if mplbackend:
        monkeypatch.setenv("MPLBACKEND", mplbackend)
    else:
        monkeypatch.delenv("MPLBACKEND", raising=False)
    folder = tmp_path / "my-research"
    folder.mkdir()
    fields = {"params": str(ROOT / "params" / "demo_wildtrace.yaml"), "sets": f"output_dir={tmp_path / 'run'}",
              "magic": "%matplotlib inline\n" if mplbackend else ""}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source.format(**fields)) for source in OWN_NOTEBOOK])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, kernel_name="python3", timeout=300, startup_timeout=120,
                   resources={"metadata": {"path": str(folder)}}).execute()
    assert _errors(nb) == []
    assert any("text/html" in o.get("data", {}) for o in nb.cells[5].outputs)   # the headline table
    assert _images(nb) == [6, 7, 8, 10]            # score histogram, judge distributions, the researcher's own, the histogram
    assert nb.cells[10].outputs[0].data == nb.cells[6].outputs[0].data   # the same bytes, whatever the backend
    backend = "".join(o.get("text", "") for o in nb.cells[9].outputs)
    assert "inline" in backend                     # evalnb chose no backend of its own
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["complete"]
    assert (tmp_path / "run" / "figures" / "score_histogram.png").exists()
    assert (tmp_path / "run" / "figures" / "score_histogram.pdf").exists()
    assert not list(folder.iterdir())              # nothing written where the notebook runs
