"""The test environment's JupyterLab (a server on 127.0.0.1: a free port, a token, a temporary
root, no network) and its page in headless chromium, driven through JupyterLab's own commands.

Every notebook is named by its widget's id, which the command that opened it returned; nothing
reads the shell's *current* widget. JupyterLab's shell keeps that by ``focus`` events, and a
headless chromium page may never get one (``document.hasFocus()`` false: the element is focused
but no event is dispatched), so on such a machine ``shell.currentWidget`` stays null while the
notebook sits open with its kernel connected. Every wait is bounded, says what it waits for and,
when it gives up, what it saw, the page's console, the dialogs open and the server's log tail."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.browser import page_state, wait_for_script

LAB_START = 120     # seconds for the server to answer, and again for the page to restore its layout
KERNEL_START = 120  # seconds for a notebook to open with its kernel connected and idle (a loaded machine)
RUN_ALL = 240       # seconds for one notebook's Run All (imports and a stage on a loaded machine)
COMMAND = 60        # seconds for any other command to finish


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
        self.log_path = home / "jupyterlab.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--ServerApp.open_browser=False", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly",
             *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],   # CI containers
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        start = time.monotonic()
        while True:   # bounded: the server answers, exits, or LAB_START passes
            try:
                with urllib.request.urlopen(f"{self.url('api/status')}", timeout=5) as reply:
                    if reply.status == 200:
                        print(f"waited {time.monotonic() - start:.1f} s for JupyterLab to answer on port {self.port}")
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() - start > LAB_START:
                raise AssertionError(f"JupyterLab did not answer within {LAB_START} s "
                                     f"(exit status {self.process.poll()}):\n{self.log_tail(200)}")
            time.sleep(0.25)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        self.log.flush()
        text = self.log_path.read_text(errors="replace").replace(self.token, "<token>")
        return f"JupyterLab's log, the last {lines} lines:\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        self.process.terminate()   # the server shuts its kernels down
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


# In every look: ``p`` is the notebook whose widget id is arguments[0] (undefined while it is not in
# the main area), ``state()`` each part of "open with its kernel connected" as the page has it now.
NOTEBOOK = """
const app = window.jupyterapp;
const p = Array.from(app.shell.widgets('main')).find(w => w.id === arguments[0]);
const state = () => {
  const current = app.shell.currentWidget ? app.shell.currentWidget.id : null;
  if (!p) { return {found: false, current: current,
                    main: Array.from(app.shell.widgets('main')).map(w => w.id + ' ' + w.title.label)}; }
  const s = p.sessionContext, session = s ? s.session : null, kernel = session ? session.kernel : null;
  return {found: true, path: p.context.path, contextReady: p.context.isReady, sessionReady: !!(s && s.isReady),
          session: session ? session.id : null, kernel: kernel ? kernel.name + ' ' + kernel.id : null,
          connectionStatus: kernel ? kernel.connectionStatus : null, status: kernel ? kernel.status : null,
          shown: s ? s.kernelDisplayStatus : null, current: current};
};
"""

# A command runs in the page without the driver waiting on its promise (Run All's resolves only when
# every cell has run); what it came to is kept in window.__evalnbCommands[n] for the looks.
START_COMMAND = """
const log = window.__evalnbCommands = window.__evalnbCommands || [];
const entry = {name: arguments[0], state: 'pending', widget: null, value: null, error: null};
log.push(entry);
const settle = v => { entry.state = 'resolved';
  entry.widget = v && typeof v === 'object' && typeof v.id === 'string' ? v.id : null;
  entry.value = ['boolean', 'number', 'string'].includes(typeof v) ? v : typeof v; };
const fail = e => { entry.state = 'rejected'; entry.error = String(e && e.stack ? e.stack : e).slice(0, 2000); };
try { Promise.resolve(window.jupyterapp.commands.execute(arguments[0], arguments[1])).then(settle, fail); }
catch (e) { fail(e); }
return log.length - 1;
"""
COMMAND_STATE = "const command = (window.__evalnbCommands || [])[arguments[1]] || null;"


class LabPage:
    """The JupyterLab page of ``lab`` in ``driver``."""

    def __init__(self, driver: Any, lab: Lab) -> None:
        self.driver, self.lab = driver, lab
        self.paths: dict[str, str] = {}   # widget id -> the notebook's path, to name it in messages

    def _wait(self, what: str, script: str, timeout: float, *args: Any) -> Any:
        return wait_for_script(self.driver, what, script, timeout, *args, context=self.lab.log_tail)

    def load(self) -> None:
        """The page, once JupyterLab has restored its layout (widgets added before are held back)."""
        self.driver.get(self.lab.url("lab"))
        self._wait("JupyterLab's page to start and restore its layout", """
            const app = window.jupyterapp;
            if (app && !window.__evalnbRestored) {
              window.__evalnbRestored = 'waiting';
              app.restored.then(() => { window.__evalnbRestored = 'restored'; },
                                e => { window.__evalnbRestored = 'failed: ' + e; });
            }
            const shell = document.querySelector('.jp-LabShell') !== null;
            return {done: !!app && shell && window.__evalnbRestored === 'restored',
                    seen: {app: !!app, shell: shell, restored: window.__evalnbRestored || null,
                           readyState: document.readyState}};""", LAB_START)

    def command(self, name: str, args: dict[str, Any] | None = None, timeout: float = COMMAND) -> dict[str, Any]:
        """A JupyterLab command, as the menu or its keyboard shortcut runs it; what it came to."""
        n = self.start(name, args)
        entry = self._wait(f"the command {name} to finish", COMMAND_STATE +
                           "return {done: !!command && command.state !== 'pending', seen: command};", timeout, None, n)
        assert entry["state"] == "resolved", \
            f"the command {name} failed: {entry['error']}\n{page_state(self.driver)}\n{self.lab.log_tail()}"
        return dict(entry)

    def start(self, name: str, args: dict[str, Any] | None = None) -> int:
        return int(self.driver.execute_script(START_COMMAND, name, args or {}))

    def _open_with_kernel(self, widget: str | None, what: str, path: str | None) -> str:
        assert widget, f"{what}: the command returned no widget"
        seen = self._wait(f"{what} open with its kernel connected and idle", NOTEBOOK + """
            const s = state();
            return {done: s.found && (arguments[1] === null || s.path === arguments[1]) && s.contextReady
                          && s.sessionReady && s.connectionStatus === 'connected' && s.status === 'idle', seen: s};""",
                   KERNEL_START, widget, path)
        self.paths[widget] = seen["path"]
        return widget

    def open_notebook(self, path: str) -> str:
        """File > Open of ``path`` in the notebook editor; the notebook's widget id."""
        entry = self.command("docmanager:open", {"path": path, "factory": "Notebook"})
        return self._open_with_kernel(entry["widget"], path, path)

    def new_notebook(self, cells: list[str]) -> str:
        """File > New > Notebook (Python 3) at the root, holding ``cells``; its widget id."""
        entry = self.command("notebook:create-new", {"cwd": "", "kernelName": "python3"})
        widget = self._open_with_kernel(entry["widget"], "a new notebook", None)
        self.driver.execute_script(NOTEBOOK + """
            const shared = p.content.model.sharedModel;
            shared.transact(() => {
                shared.deleteCellRange(0, shared.cells.length);
                shared.insertCells(0, arguments[1].map(source => ({cell_type: 'code', source: source})));
            });""", widget, cells)
        self._wait(f"the new notebook to show its {len(cells)} cells", NOTEBOOK +
                   "return {done: !!p && p.content.widgets.length === arguments[1], "
                   "seen: p ? {cells: p.content.widgets.length} : state()};", COMMAND, widget, len(cells))
        return widget

    def run_all(self, widget: str) -> str:
        """Run > Run All Cells in that notebook; 'done' once every code cell has run, 'failed' once
        one has failed (which stops the rest), and the kernel is idle again."""
        n = self.start("notebook:run-all-cells", {"semanticWidget": widget})   # that notebook, not the current one
        seen = self._wait(f"Run All Cells in {self.paths.get(widget, widget)} to finish", NOTEBOOK + COMMAND_STATE + """
            if (!p || !command) { return {done: false, seen: {notebook: state(), command: command}}; }
            const cells = p.content.widgets.filter(c => c.model.type === 'code');
            const ran = cells.filter(c => c.model.executionCount !== null).length;
            const failed = cells.filter(c => c.model.outputs.toJSON().some(o => o.output_type === 'error')).length;
            const next = cells.find(c => c.model.executionCount === null);
            const s = state();
            return {done: command.state !== 'pending' && s.status === 'idle',
                    seen: {path: s.path, command: command.state, error: command.error, cells: cells.length, ran: ran,
                           failed: failed, kernel: s.status, connection: s.connectionStatus,
                           next: next ? next.model.sharedModel.getSource().split('\\n')[0].slice(0, 80) : null}};""",
                          RUN_ALL, widget, n)
        assert seen["command"] == "resolved", f"Run All Cells failed: {seen['error']}"
        state = "failed" if seen["failed"] else "done" if seen["ran"] == seen["cells"] else "incomplete"
        assert state in ("done", "failed"), seen
        return state

    def page(self, widget: str) -> dict[str, Any]:
        """What the notebook's page shows once its outputs are drawn (every image loaded): each code
        cell's outputs as rendered (mime type, text), its images' displayed sizes, and the width
        of the notebook's text."""
        self._wait(f"the outputs of {self.paths.get(widget, widget)} drawn", NOTEBOOK + """
            if (!p) { return {done: false, seen: state()}; }
            const cells = p.content.widgets.filter(c => c.model.type === 'code');
            // an output with no data (a cleared progress bar) draws nothing: count the others
            const shown = c => Array.from({length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i))
                                    .filter(o => Object.keys(o.data || {}).length > 0).length;
            const drawn = cells.filter(c => c.node.querySelectorAll('.jp-OutputArea-child').length
                                            === shown(c)).length;
            const images = Array.from(p.content.node.querySelectorAll('.jp-OutputArea-output img'));
            const loaded = images.filter(i => i.complete && i.naturalWidth > 0).length;
            return {done: drawn === cells.length && loaded === images.length,
                    seen: {cells: cells.length, drawn: drawn, images: images.length, loaded: loaded}};""",
                   COMMAND, widget)
        return self.driver.execute_script(NOTEBOOK + """
            const node = p.content.node;
            const cells = Array.from(node.querySelectorAll('.jp-CodeCell')).map(cell => ({
                outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(o => ({
                    mime: o.getAttribute('data-mime-type') || '', text: o.textContent})),
                images: Array.from(cell.querySelectorAll('.jp-OutputArea-output img')).map(i => ({
                    width: i.getBoundingClientRect().width, height: i.getBoundingClientRect().height,
                    natural: i.naturalWidth}))}));
            const text = node.querySelector('.jp-MarkdownCell .jp-RenderedMarkdown');
            return {cells: cells, textWidth: text ? text.getBoundingClientRect().width : null,
                    html: Array.from(node.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerHTML).join('\\n')};""",
            widget)

    def snapshot(self, widget: str, name: str) -> None:
        """With EVALNB_LAB_SCREENSHOTS=DIR: the notebook, whole, as DIR/name.png (to look at)."""
        folder = os.environ.get("EVALNB_LAB_SCREENSHOTS")
        if not folder:
            return
        self.driver.execute_script(NOTEBOOK + "app.shell.activateById(arguments[0]);", widget)
        height = self.driver.execute_script(NOTEBOOK + "return p.content.node.scrollHeight;", widget)
        self.driver.set_window_size(1400, min(12000, int(height) + 300))
        self.driver.execute_async_script(   # two animation frames: the panel laid out at the new size
            "const done = arguments[arguments.length - 1];"
            "requestAnimationFrame(() => requestAnimationFrame(() => done(null)));")
        self.driver.save_screenshot(str(Path(folder) / f"{name}.png"))
        self.driver.set_window_size(1400, 1000)
