"""``evalnb run``: a run's stage notebooks in turn, in one kernel, under one lock for the whole
command, with live progress (:mod:`evalnb.app.live`) and the results at the end
(:mod:`evalnb.app.results`); the exit status read from the run's ``status.json``.

papermill cannot exit 2 by itself, so the aggregate stage writes ``status.json`` and this
command reads it.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalnb.app import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK, output
from evalnb.app.live import LiveView, live_progress
from evalnb.app.inspection.status import interrupted_text, stage_end_lines
from evalnb.app.runs.kernels import also_import, execute_stage, start_run_kernel, stop_kernel
from evalnb.app.runs.notebooks import _yield_cpu, failure_cause, notebook_for, redact_notebook, render_html
from evalnb.core.errors import EndpointFailure
from evalnb.records import completion
from evalnb.records.lock import TOKEN_ENV
from evalnb.core.jsondiff import short
from evalnb.records.manifest import add_rerun, update_manifest
from evalnb.records.stores import read_json_if_exists, write_json
from evalnb.core.redaction import redact
from evalnb.execution.batch import WAIT_ENV
from evalnb.execution.batch.journal import JOURNAL_NAME
from evalnb.execution.batch.views import waiting_line
from evalnb.execution.budget_views import refusal_line
from evalnb.providers import modules_for
from evalnb.evidence.failures import incomplete_line


def execute_stages(params: str | Path, sets: Sequence[str], stages: Sequence[str],
                   wait: float | None = None, forced: bool = False, results: bool = True) -> int:
    """``wait``: poll batches in flight until they finish, this many seconds apart (batch mode).
    A stage with nothing to do is not executed (evalnb.pipeline.rerun), unless ``forced`` (the
    stages were named with ``--stage``). ``results``: end with the results table (``evalnb
    demo`` prints its own, once)."""
    with live_progress() as view:
        code = _execute_stages(params, sets, stages, wait, forced, view)
    # Only after its aggregate or report stage ran (else scores.json may be stale), and not after
    # an error, whose one line says what happened.
    if results and _LAST_RUN and {"aggregate", "report"} & set(stages) and code != EXIT_ERROR:
        from evalnb.app.results import run_results, run_text

        doc = run_results(_LAST_RUN[-1])
        output.results(run_text(doc), doc)
    return code


_LAST_RUN: list[Path] = []   # the run directory this command opened (its results, its Ctrl-C line)


def _execute_stages(params: str | Path, sets: Sequence[str], stages: Sequence[str], wait: float | None,
                    forced: bool, view: LiveView | None) -> int:
    # The run's one kernel boots while the parameters are checked (evalnb.app.runs.kernels), so what it
    # reads from its environment is set first: the token that lets it in under this command's
    # lock (evalnb.records.lock), and how long its batch engine waits.
    settings = {TOKEN_ENV: secrets.token_hex(16), **({WAIT_ENV: f"{wait:g}"} if wait is not None else {})}
    os.environ.update(settings)
    kernel = None
    try:
        kernel = start_run_kernel(Path.cwd()) if stages else None
        return _run_stages(params, sets, stages, kernel, forced, view)
    finally:
        stop_kernel(kernel)
        for name in settings:
            os.environ.pop(name, None)


def _run_stages(params: str | Path, sets: Sequence[str], stages: Sequence[str], kernel: Any,
                forced: bool = False, view: LiveView | None = None) -> int:
    from evalnb.pipeline.run import open_run   # imported while the kernel boots (see execute_stages)
    from evalnb.pipeline.rerun import plan

    # Validates everything before a notebook starts, then holds the run directory: a second
    # process is refused, and only this command's own kernel is let in (evalnb.records.lock).
    run = open_run(params, sets, require_keys=True, prefetch_sdks=False, hold_lock=True, keep_config=True)
    assert run.lock is not None
    _LAST_RUN.append(run.dir)
    completion.sweep_temporary(run.dir)   # a killed writer's half-written temporary files
    output.SETTINGS.on_interrupt.append(lambda: interrupted_text(run.dir))
    try:
        todo = plan(run, {stage: run.path(notebook_for(stage).name) for stage in stages}, forced=forced)
        _skip(run, todo.skip)
        if todo.changed:   # this invocation's own settings, beside the record's (never over it)
            add_rerun(run.path("manifest.json"), todo.rerun_entry())
            if todo.execute:
                write_json(run.path("config.json"), run.config.to_dict())   # the settings the stages now run under
            else:
                print(f"evalnb: nothing to do, so no call was made under the changed settings "
                      f"({setting_changes(todo.changed)}); config.json and the records keep the settings they "
                      "were made under, and manifest.json's reruns records this invocation's", file=sys.stderr)
        if kernel is not None and todo.execute:   # every endpoint's SDK, before the first stage
            also_import(kernel, modules_for([run.config.model, *run.config.judges]))
        if todo.execute:
            update_manifest(run.path("manifest.json"), environment=True)   # once; the stages trust it
        failed = _execute(run, todo.execute, kernel, view, Path(params))
    finally:
        run.close()
    waiting = _batches_waiting(run.dir)
    if not failed and (stop := refusal_line(run.dir, os.environ.get(TOKEN_ENV, ""))):   # the spending ceiling
        print(f"evalnb: {stop}", file=sys.stderr)
        return EXIT_INCOMPLETE
    if failed or "aggregate" not in stages:
        if not failed and waiting:
            print(f"evalnb: {waiting}", file=sys.stderr)
            return EXIT_INCOMPLETE
        return EXIT_ERROR if failed else EXIT_OK
    status = read_json_if_exists(run.path("status.json")) or {"state": "error"}
    print(f"evalnb: run {status['state']}: {run.dir}", file=sys.stderr)
    if status["state"] == "complete":
        return EXIT_OK
    if status["state"] == "incomplete":
        if waiting:
            print(f"evalnb: {waiting}", file=sys.stderr)
        else:
            print(f"evalnb: {incomplete_line(run.dir)}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_ERROR


def _skip(run: Any, stages: Sequence[str]) -> None:
    """Stages with nothing to do: their records stand (an HTML page missing is written, from
    the record as it is)."""
    if stages:
        print(f"evalnb: nothing to do in {', '.join(stages)}: {'its record stands' if len(stages) == 1 else 'their records stand'} "
              f"in {run.dir}", file=sys.stderr)
    for stage in stages:
        html = run.path(notebook_for(stage).name).with_suffix(".html")
        if not html.exists() or not completion.stage_states(run.dir)[stage].state == "complete":
            render_html(html.with_suffix(".ipynb"))
            completion.record(run.dir, stage, "complete")


def setting_changes(changed: Sequence[tuple[str, Any, Any]], limit: int = 3) -> str:
    """``concurrency: 16 -> 8, model.concurrency: 16 -> 8``, at most ``limit``, then how many more."""
    text = ", ".join(f"{path}: {short(old, 40)} -> {short(new, 40)}" for path, old, new in changed[:limit])
    return text + (f" and {len(changed) - limit} more" if len(changed) > limit else "")


def _batches_waiting(run_dir: Path) -> str | None:
    """The one line for batches still in flight (batch mode), or None."""
    if not (run_dir / JOURNAL_NAME).exists():
        return None
    return waiting_line(run_dir)


def _execute(run: Any, stages: Sequence[str], kernel: Any, view: LiveView | None = None,
             params: Path | None = None) -> bool:
    """Each stage's notebook in turn, in the run's kernel reset to a new one's state; HTML
    written beside each record in the background. True as soon as one stage fails (its real
    cause printed)."""
    from papermill.exceptions import PapermillExecutionError   # papermill, while the kernel warms up

    if "aggregate" in stages:
        run.path("status.json").unlink(missing_ok=True)
    html = ThreadPoolExecutor(max_workers=1, initializer=_yield_cpu)
    pages: dict[str, Future[Path]] = {}   # stage -> its HTML being written
    current = None   # the stage whose notebook runs now
    try:
        for stage in stages:
            _completed(run.dir, pages)   # between stages: the kernel writes nothing now
            record = run.path(notebook_for(stage).name)
            _say(view, f"evalnb: {stage} -> {record}")
            completion.record(run.dir, stage, "running")
            current = stage
            try:
                execute_stage(kernel, notebook_for(stage), record, {"config": run.config.to_dict()}, run.dir, params)
            except PapermillExecutionError as e:
                current = None
                redact_notebook(record)
                completion.record(run.dir, stage, "failed")
                render_html(record)
                if e.ename == EndpointFailure.__name__:   # an endpoint failure: its own one line, no "stage failed"
                    print(f"evalnb: {redact(' '.join(str(e.evalue).split()))}", file=sys.stderr)
                    return True
                print(f"evalnb: {stage} stage failed: {failure_cause(record, e)} (record: {record})",
                      file=sys.stderr)
                return True
            except Exception as e:   # the kernel died or timed out: the record may look clean
                current = None
                redact_notebook(record)
                completion.record(run.dir, stage, "interrupted")
                print(f"evalnb: {stage} stage did not finish: {redact(f'{type(e).__name__}: {e}')} "
                      f"(record: {record})", file=sys.stderr)
                return True
            current = None
            redact_notebook(record)
            completion.record(run.dir, stage, "executed")
            pages[stage] = html.submit(render_html, record)
            if view is not None:
                view.drain()
            for line in stage_end_lines(run.dir, stage):
                _say(view, f"evalnb: {line}")
        return False
    finally:
        stop_kernel(kernel)   # while the last record's HTML is written
        if current is not None:   # Ctrl-C while its notebook ran: the kernel is stopped, its record final
            completion.record(run.dir, current, "interrupted")
        html.shutdown(wait=True)
        _completed(run.dir, pages)


def _completed(run_dir: Path, pages: dict[str, Future[Path]]) -> None:
    """Stages whose HTML is written: complete (one whose HTML failed stays executed, and the
    next run writes it)."""
    for stage, page in list(pages.items()):
        if page.done():
            del pages[stage]
            if page.exception() is None:
                completion.record(run_dir, stage, "complete")


def _say(view: LiveView | None, line: str) -> None:
    """A line of the command's own, drawn clear of the progress bars (hidden by ``-q``)."""
    if view is not None:
        view.message(line)
    else:
        output.say(line)
