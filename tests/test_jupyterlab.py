"""JupyterLab itself, as a new user meets it: the test environment's JupyterLab on
127.0.0.1 (a free port, a token, a temporary root, no network), driven by Debian's chromium
headless through selenium and Debian's chromedriver.

In an ``evalnb init`` folder, the four stage notebooks are opened in turn, no kernel shut down
(each stays open in its tab), and Run All Cells is chosen in each; then the README's own-notebook
snippet runs in a new notebook. What the page shows is asserted: no error output in any cell
(nothing drawn in JupyterLab's error colour, progress included), the progress bars and the
stages' lines, the tables' integer counts, whole labels and judges named by model, figures at
an ordinary figure's size, the evidence of an unanswered item; and, while another process
holds the run, the one-line refusal without a traceback.

The page is driven through JupyterLab's own commands by tests/labdriver.py, each notebook named
by its widget's id, every wait bounded and explaining itself when it gives up; it never gets a
focus event (as headless chromium leaves it on some machines), so the test runs the same on all.

Skipped, saying why, only where no browser can be had; under CI (``CI`` set) a missing
browser is a failure instead."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.app.runs.notebooks import notebook_for
from evalnb.core.types import STAGES
from evalnb.pipeline.run import OFFLINE_LABEL
from tests.conftest import ROOT
from tests.browser import requests_made, start_chromium
from tests.labdriver import Lab, LabPage

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    user_data = f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=tmp_path)}"
    # No focus event ever, on every machine: the driver must not depend on one (tests/labdriver.py).
    driver = start_chromium((*CHROMIUM_FLAGS, user_data), "JupyterLab browser test", focused=False)
    try:
        yield driver
    finally:
        driver.quit()


def shown(view: dict[str, Any], mime: str | None = None) -> str:
    return "\n".join(o["text"] for c in view["cells"] for o in c["outputs"] if mime is None or o["mime"] == mime)


def error_outputs(view: dict[str, Any]) -> list[str]:
    """Outputs JupyterLab draws as errors: tracebacks and anything on stderr."""
    return [o["text"] for c in view["cells"] for o in c["outputs"] if o["mime"] == "application/vnd.jupyter.stderr"]


def readme_snippet() -> list[str]:
    """The README's own-notebook snippet (section "In JupyterLab"), one cell per statement."""
    section = (ROOT / "README.md").read_text().split("## In JupyterLab", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "the README's JupyterLab section has no python snippet"
    lines = [line.split("  #", 1)[0].rstrip() for line in code.group(1).splitlines() if line.strip()]
    return ["\n".join(lines[:2]), *lines[2:]]   # import and open_run together, then a cell per stage or view


# --- the test ----------------------------------------------------------------------------------------

def test_the_stage_notebooks_one_after_another_then_a_notebook_of_ones_own(chromium: Any, tmp_path: Path) -> None:
    folder = tmp_path / "my-evals"
    assert main(["init", str(folder)]) == 0
    run_dir = folder / "outputs" / "demo-wildtrace"
    lab = Lab(folder, tmp_path / "jupyter")
    try:
        lab_page = LabPage(chromium, lab)
        lab_page.load()
        views = {}
        for stage in STAGES:   # in turn, each tab left open with its kernel
            notebook = lab_page.open_notebook(f"notebooks/{notebook_for(stage).name}")
            lab_page.run_all(notebook)
            views[stage] = lab_page.page(notebook)
            lab_page.snapshot(notebook, stage)
            assert error_outputs(views[stage]) == [], (stage, error_outputs(views[stage]))
        sessions = json.loads(urllib.request.urlopen(lab.url("api/sessions"), timeout=10).read())
        assert len(sessions) == 4   # no kernel shut down

        generate, judge, aggregate, report = (views[s] for s in STAGES)
        # The bar is cleared once its stage is over (no progress stays in the notebook); what
        # each stage did stays.
        assert not re.search(r"\d+%\|", shown(generate, "text/plain") + shown(judge, "text/plain"))
        assert "generate: 12 answers made (10 ok, 1 empty, 1 out_of_context)" in shown(generate)
        assert "judge: 30 judgements made (30 ok)" in shown(judge)
        # Judges named by their model; the run's summary and labels whole, counts as integers.
        for role, model in (("judge1", "rubric-overlap"), ("judge2", "rubric-overlap-strict"),
                            ("judge3", "rubric-overlap-lenient")):
            assert f"{role} (offline:{model})" in shown(judge, "text/html")
        assert OFFLINE_LABEL in shown(generate, "text/html") and "..." not in shown(generate, "text/html")
        scores = json.loads((run_dir / "scores.json").read_text())
        label = scores["metrics"]["scored_n"]["label"]
        headline = [o for c in aggregate["cells"] for o in c["outputs"] if label in o["text"]][0]["text"]
        for metric in scores["metrics"].values():
            assert metric["label"] in headline
        assert "12.0" not in headline and ".000000" not in headline and "False" not in headline
        html = aggregate["html"]   # the one table style: value [low, high], then n
        assert re.search(rf"<td[^>]*>{re.escape(label)}</td>\s*<td[^>]*>{scores['scored_n']}</td>", html), html
        all_tasks = scores["metrics"]["all_tasks"]
        assert re.search(rf"<td[^>]*>{all_tasks['value']:.3f} \[[\d.]+, [\d.]+\]</td>\s*"
                         rf"<td[^>]*>{scores['n_tasks']}</td>\s*</tr>", html), html
        # Figures at an ordinary figure's size, beside the notebook's text.
        images = [i for c in report["cells"] for i in c["images"]]
        assert len(images) >= 2, images
        for image in images:   # one column (3.3 in) or two (7 in), drawn at 300 dpi and shown at 100
            assert 300 <= image["width"] <= 720 and image["width"] <= report["textWidth"] + 1, (image, report["textWidth"])
            assert image["natural"] > 2.5 * image["width"], image
        # An unanswered item's evidence: no length over "(none)".
        assert not re.search(r"\([\d,]+ characters\)\s*\(none\)", shown(report))
        assert "response: (none)" in shown(report)

        # The README's snippet in a new notebook at the folder's root: everything already recorded.
        cells = [c.replace("params/my.yaml", "params/demo_wildtrace.yaml") for c in readme_snippet()]
        notebook = lab_page.new_notebook(cells)
        lab_page.run_all(notebook)
        own = lab_page.page(notebook)
        lab_page.snapshot(notebook, "own-notebook")
        assert error_outputs(own) == [], error_outputs(own)
        assert "generate: all 12 answers already recorded; no call made" in shown(own)
        assert "judge: all 30 judgements already recorded; no call made" in shown(own)
        assert scores["metrics"]["scored_n"]["label"] in shown(own, "text/html")
        assert len([i for c in own["cells"] for i in c["images"]]) == 1
        assert len(json.loads(urllib.request.urlopen(lab.url("api/sessions"), timeout=10).read())) == 5

        # While another process holds the run, a stage is refused in one line, no traceback.
        script = tmp_path / "hold_run.py"
        script.write_text(HOLD.format(params=str(folder / "params" / "demo_wildtrace.yaml")))
        holder = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=folder)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            notebook = lab_page.new_notebook(["import evalnb\nrun = evalnb.open_run('params/demo_wildtrace.yaml')\n"
                                              "evalnb.judge(run)"])
            lab_page.run_all(notebook)
            [refusal] = error_outputs(lab_page.page(notebook))
        finally:
            holder.communicate("", timeout=60)
        assert refusal.startswith(f"RunLocked: {run_dir} is in use by ") and "Traceback" not in refusal
        assert len(refusal.strip().splitlines()) == 1, refusal
        assert f"in use by `hold_run.py` (pid {holder.pid}, since " in refusal and "then try again" in refusal

        elsewhere = [u for u in requests_made(chromium)
                     if not u.startswith((f"http://127.0.0.1:{lab.port}/", f"ws://127.0.0.1:{lab.port}/",
                                          "data:", "blob:", "about:", "chrome://", "chrome-untrusted://"))]
        assert elsewhere == []   # nothing but this JupyterLab
    finally:
        lab.stop()


HOLD = """
import sys
import evalnb
evalnb.open_run({params!r}, hold_lock=True)   # as `evalnb run` holds it, until told to stop
print("held", flush=True)
sys.stdin.read()
"""
