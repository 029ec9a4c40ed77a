"""JupyterLab itself, as a new user meets it (issue 18): the test environment's JupyterLab on
127.0.0.1 (a free port, a token, a temporary root, no network), driven by Debian's chromium
headless through selenium and Debian's chromedriver.

In an ``evalnb init`` folder, the four stage notebooks are opened in turn, no kernel shut down
(each stays open in its tab), and Run All Cells is chosen in each; then the README's own-notebook
snippet runs in a new notebook. What the page shows is asserted: no error output in any cell
(nothing drawn in JupyterLab's error colour, progress included), the progress bars and the
stages' lines, the tables' integer counts, whole labels and judges named by model, figures at
an ordinary figure's size, the evidence of an unanswered item; and, while another process
holds the run, the one-line refusal without a traceback.

Skipped, saying why, only where no browser can be had; under CI (``CI`` set) a missing
browser is a failure instead."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.app.notebooks import notebook_for
from evalnb.core.types import STAGES
from evalnb.stages.pipeline import OFFLINE_LABEL
from tests.conftest import ROOT
from tests.test_tasks_page import requests_made, start_chromium

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")
RUN_TIMEOUT = 600   # seconds for one notebook's Run All (kernel start and imports on a loaded machine)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    """A JupyterLab server of the test environment, isolated from the user's Jupyter files."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.port, self.token = root, _free_port(), secrets.token_hex(16)
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env.update(JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
                   JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
        env.pop("MPLBACKEND", None)   # the kernels as a fresh JupyterLab starts them: the inline backend
        self.log = (home / "jupyterlab.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--ServerApp.open_browser=False", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly",
             *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],   # CI containers
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url('api/status')}", timeout=5) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"JupyterLab did not start:\n{(home / 'jupyterlab.log').read_text()}")
            time.sleep(0.25)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def stop(self) -> None:
        self.process.terminate()   # the server shuts its kernels down
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    user_data = f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=tmp_path)}"
    driver = start_chromium((*CHROMIUM_FLAGS, user_data), "JupyterLab browser test")
    try:
        yield driver
    finally:
        driver.quit()


# --- driving JupyterLab through its own commands --------------------------------------------------

def until(driver: Any, script: str, timeout: float = RUN_TIMEOUT, *args: Any) -> Any:
    """Wait for ``script`` (a JavaScript function body) to return something true; return it."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.25).until(lambda d: d.execute_script(script, *args))


def command(driver: Any, name: str, args: dict[str, Any] | None = None) -> None:
    """A JupyterLab command, as the menu or its keyboard shortcut runs it."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.jupyterapp.commands.execute(arguments[0], arguments[1]).then(() => done(null), e => done(String(e)));",
        name, args or {})


CURRENT = "const p = window.jupyterapp.shell.currentWidget;"


def open_notebook(driver: Any, path: str) -> None:
    command(driver, "docmanager:open", {"path": path, "factory": "Notebook"})
    until(driver, CURRENT + "return !!(p && p.context && p.context.path === arguments[0] && p.context.isReady "
                            "&& p.sessionContext.session && p.sessionContext.session.kernel "
                            "&& p.sessionContext.session.kernel.connectionStatus === 'connected');",
          RUN_TIMEOUT, path)


def run_all(driver: Any) -> None:
    """Kernel > Run All Cells in the current notebook; return once every code cell has run (or
    one has failed, which stops the rest)."""
    command(driver, "notebook:run-all-cells")
    state = until(driver, CURRENT + """
        const cells = p.content.widgets.filter(c => c.model.type === 'code');
        const failed = cells.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
        const busy = p.sessionContext.session.kernel.status !== 'idle';
        if (failed && !busy) { return 'failed'; }
        return !busy && cells.every(c => c.model.executionCount !== null) ? 'done' : false;""")
    assert state in ("done", "failed")


def page(driver: Any) -> dict[str, Any]:
    """What the current notebook's page shows: each code cell's outputs as rendered (mime type,
    text), its images' displayed sizes, and the width of the notebook's text."""
    return driver.execute_script(CURRENT + """
        const node = p.content.node;
        const cells = Array.from(node.querySelectorAll('.jp-CodeCell')).map(cell => ({
            outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(o => ({
                mime: o.getAttribute('data-mime-type') || '', text: o.textContent})),
            images: Array.from(cell.querySelectorAll('.jp-OutputArea-output img')).map(i => ({
                width: i.getBoundingClientRect().width, height: i.getBoundingClientRect().height,
                natural: i.naturalWidth}))}));
        const text = node.querySelector('.jp-MarkdownCell .jp-RenderedMarkdown');
        return {cells: cells, textWidth: text ? text.getBoundingClientRect().width : null,
                html: Array.from(node.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerHTML).join('\\n')};""")


def shown(view: dict[str, Any], mime: str | None = None) -> str:
    return "\n".join(o["text"] for c in view["cells"] for o in c["outputs"] if mime is None or o["mime"] == mime)


def error_outputs(view: dict[str, Any]) -> list[str]:
    """Outputs JupyterLab draws as errors: tracebacks and anything on stderr."""
    return [o["text"] for c in view["cells"] for o in c["outputs"] if o["mime"] == "application/vnd.jupyter.stderr"]


def snapshot(driver: Any, name: str) -> None:
    """With EVALNB_LAB_SCREENSHOTS=DIR: the current notebook, whole, as DIR/name.png (to look at)."""
    folder = os.environ.get("EVALNB_LAB_SCREENSHOTS")
    if not folder:
        return
    height = driver.execute_script(CURRENT + "return p.content.node.scrollHeight;")
    driver.set_window_size(1400, min(12000, int(height) + 300))
    time.sleep(1)   # let the panel lay out at the new size
    driver.save_screenshot(str(Path(folder) / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def readme_snippet() -> list[str]:
    """The README's own-notebook snippet (section "In JupyterLab"), one cell per statement."""
    section = (ROOT / "README.md").read_text().split("## In JupyterLab", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "the README's JupyterLab section has no python snippet"
    lines = [line.split("  #", 1)[0].rstrip() for line in code.group(1).splitlines() if line.strip()]
    return ["\n".join(lines[:2]), *lines[2:]]   # import and open_run together, then a cell per stage or view


def new_notebook(driver: Any, cells: list[str]) -> None:
    command(driver, "notebook:create-new", {"cwd": "", "kernelName": "python3"})
    until(driver, CURRENT + "return !!(p && p.context && p.context.isReady && p.content.model "
                            "&& p.sessionContext.session && p.sessionContext.session.kernel);")
    driver.execute_script(CURRENT + """
        const shared = p.content.model.sharedModel;
        shared.transact(() => {
            shared.deleteCellRange(0, shared.cells.length);
            shared.insertCells(0, arguments[0].map(source => ({cell_type: 'code', source: source})));
        });""", cells)
    until(driver, CURRENT + "return p.content.widgets.length === arguments[0];", 60, len(cells))


# --- the test ----------------------------------------------------------------------------------------

def test_the_stage_notebooks_one_after_another_then_a_notebook_of_ones_own(chromium: Any, tmp_path: Path) -> None:
    folder = tmp_path / "my-evals"
    assert main(["init", str(folder)]) == 0
    run_dir = folder / "outputs" / "demo-wildtrace"
    lab = Lab(folder, tmp_path / "jupyter")
    try:
        chromium.get(lab.url("lab"))
        until(chromium, "return window.jupyterapp && window.jupyterapp.started "
                        "&& document.querySelector('.jp-LabShell') !== null;", 180)
        views = {}
        for stage in STAGES:   # in turn, each tab left open with its kernel
            open_notebook(chromium, f"notebooks/{notebook_for(stage).name}")
            run_all(chromium)
            views[stage] = page(chromium)
            snapshot(chromium, stage)
            assert error_outputs(views[stage]) == [], (stage, error_outputs(views[stage]))
        sessions = json.loads(urllib.request.urlopen(lab.url("api/sessions"), timeout=10).read())
        assert len(sessions) == 4   # no kernel shut down

        generate, judge, aggregate, report = (views[s] for s in STAGES)
        # Progress as plain output (the bar's final state), and what each stage did.
        assert re.search(r"generate: 100%\|\S+\| 12/12", shown(generate, "text/plain"))
        assert "generate: 12 answers made (10 ok, 1 empty, 1 out_of_context)" in shown(generate)
        assert re.search(r"judge: 100%\|\S+\| 30/30", shown(judge, "text/plain"))
        assert "judge: 30 judgements made (30 ok)" in shown(judge)
        # Judges named by their model; the run's summary and labels whole, counts as integers.
        for role, model in (("judge1", "rubric-overlap"), ("judge2", "rubric-overlap-strict"),
                            ("judge3", "rubric-overlap-lenient")):
            assert f"{role} (offline:{model})" in shown(judge, "text/html")
        assert OFFLINE_LABEL in shown(generate, "text/html") and "..." not in shown(generate, "text/html")
        scores = json.loads((run_dir / "scores.json").read_text())
        headline = [o for c in aggregate["cells"] for o in c["outputs"] if "scored_n" in o["text"]][0]["text"]
        for metric in scores["metrics"].values():
            assert metric["label"] in headline
        assert "12.0" not in headline and ".000000" not in headline
        html = aggregate["html"]
        assert re.search(r"<th>scored_n</th>\s*<td>tasks scored</td>\s*<td>False</td>\s*"
                         rf"<td>{scores['scored_n']}</td>", html), html
        assert re.search(rf"<td>{scores['n_tasks']}</td>\s*</tr>", html)   # n of the first metric
        # Figures at an ordinary figure's size, beside the notebook's text.
        images = [i for c in report["cells"] for i in c["images"]]
        assert len(images) == 2
        for image in images:
            assert 500 <= image["width"] <= 680 and image["width"] <= report["textWidth"], image
            assert image["natural"] > image["width"]   # drawn at 150 dpi, shown at 100
        # An unanswered item's evidence: no length over "(none)".
        assert not re.search(r"\([\d,]+ characters\)\s*\(none\)", shown(report))
        assert "response: (none)" in shown(report)

        # The README's snippet in a new notebook at the folder's root: everything already recorded.
        cells = [c.replace("params/my.yaml", "params/demo_wildtrace.yaml") for c in readme_snippet()]
        new_notebook(chromium, cells)
        run_all(chromium)
        own = page(chromium)
        snapshot(chromium, "own-notebook")
        assert error_outputs(own) == [], error_outputs(own)
        assert "generate: all 12 answers already recorded; no call made" in shown(own)
        assert "judge: all 30 judgements already recorded; no call made" in shown(own)
        assert "scored_n" in shown(own, "text/html") and len([i for c in own["cells"] for i in c["images"]]) == 1
        assert len(json.loads(urllib.request.urlopen(lab.url("api/sessions"), timeout=10).read())) == 5

        # While another process holds the run, a stage is refused in one line, no traceback.
        script = tmp_path / "hold_run.py"
        script.write_text(HOLD.format(params=str(folder / "params" / "demo_wildtrace.yaml")))
        holder = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=folder)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            new_notebook(chromium, ["import evalnb\nrun = evalnb.open_run('params/demo_wildtrace.yaml')\n"
                                    "evalnb.judge(run)"])
            run_all(chromium)
            [refusal] = error_outputs(page(chromium))
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
