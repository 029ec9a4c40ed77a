"""Where the notebooks are, and the one path by which a command executes one: in a kernel
of evalnb's own (Unix sockets, :mod:`evalnb.app.runs.kernels`), keys filtered out of the record,
and HTML written beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalnb.app.runs.kernels import execute_stage, start_run_kernel, stop_kernel
from evalnb.app.project import project_dir
from evalnb.records.stores import write_text
from evalnb.core.redaction import redact
from evalnb.records.tracebacks import innermost_cause
from evalnb.core.types import STAGES

PROJECT = project_dir()   # notebooks/ and params/: the checkout's, or the wheel's project template
NOTEBOOKS = PROJECT / "notebooks"
COMPARE_NOTEBOOK = NOTEBOOKS / "05_compare.ipynb"


def notebook_for(stage: str) -> Path:
    return NOTEBOOKS / f"{STAGES.index(stage) + 1:02d}_{stage}.ipynb"


def render_html(notebook: Path) -> Path:
    """The executed notebook as HTML beside it (headless nbconvert, through the one exporter)."""
    from evalnb.pages.render import record_html   # nbconvert: loaded once a record exists, not at start-up
    return record_html(notebook)


def execute_alone(notebook: Path, output: Path, parameters: dict[str, Any], cwd: Path) -> None:
    """One notebook outside a run (the compare notebook) through the stages' own path: a
    kernel started for it, the record redacted, its HTML beside it. Raises papermill's
    ``PapermillExecutionError`` when a cell fails (the record is kept)."""
    kernel = start_run_kernel(cwd, ("evalnb.comparison.leaderboard", "pandas"), ())
    try:
        execute_stage(kernel, notebook, output, parameters, cwd)
    finally:
        stop_kernel(kernel)
        redact_notebook(output)
    render_html(output)


def _yield_cpu() -> None:
    """The HTML thread runs at low priority (Linux: nice is per thread): converting a finished
    stage's record must not take CPU from the calls of the next one."""
    import threading

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):   # not Linux, or not permitted: run at normal priority
        pass


def failure_cause(notebook: Path, error: Exception) -> str:
    """The exception a stage cell raised, on one line: its type and message, read from the
    executed notebook (papermill's own exception may carry only a wrapper's empty message).
    Through exception groups, the innermost cause (:mod:`evalnb.records.tracebacks`): IPython
    shows a group only as text on the cell's stderr, with no error output."""
    import nbformat

    try:
        nb = nbformat.read(notebook, as_version=4)
    except (OSError, ValueError):
        nb = None
    for cell in (nb.cells if nb else []):
        outputs = cell.get("outputs", [])
        for out in outputs:
            if out.get("output_type") == "error" and out.get("ename") != "PapermillExecutionError":
                cause = innermost_cause(out.get("traceback") or []) or f"{out['ename']}: {out['evalue']}"
                return redact(_one_line(cause))
        if (cell.get("metadata", {}).get("papermill") or {}).get("exception"):   # failed, no error output
            stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
            if group := innermost_cause(stderr):
                return redact(_one_line(group))
    return redact(_one_line(innermost_cause(getattr(error, "traceback", None) or []) or
                            f"{getattr(error, 'ename', type(error).__name__)}: {getattr(error, 'evalue', error)}"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def redact_notebook(notebook: Path) -> None:
    """Key values out of an executed record (a provider error or a traceback may show one)."""
    if not notebook.exists():
        return
    text = notebook.read_text("utf-8")
    clean = redact(text)
    if clean != text:
        write_text(notebook, clean)   # whole or not at all: a kill here never truncates the record
