"""``evalnb``: run the stage notebooks through papermill and report the run's state.

Exit status: 0 complete; 2 something resumable remains (a transient generation failure, a
judge failure); 1 a configuration or data error, or a stage that failed. papermill cannot
exit 2 by itself, so the aggregate stage writes ``status.json`` and this command reads it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from evalnb.errors import ConfigError, EvalnbError
from evalnb.lock import TOKEN_ENV
from evalnb.redaction import redact
from evalnb.project import init_project, project_dir
from evalnb.records import read_json_if_exists

STAGES = ("generate", "judge", "aggregate", "report")
PROJECT = project_dir()   # notebooks/ and params/: the checkout's, or the wheel's project template
NOTEBOOKS = PROJECT / "notebooks"
COMPARE_NOTEBOOK = NOTEBOOKS / "05_compare.ipynb"
# (parameters file, another offline contestant for a second run of that file, or None)
DEMO_RUNS: tuple[tuple[str, str | None], ...] = (
    ("demo_wildtrace.yaml", None), ("demo_wildtrace.yaml", "lead-3"),
    ("demo_geoktools.yaml", None), ("demo_geoexpertqueries.yaml", None))
EXIT_OK, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2


def notebook_for(stage: str) -> Path:
    return NOTEBOOKS / f"{STAGES.index(stage) + 1:02d}_{stage}.ipynb"


def render_html(notebook: Path) -> Path:
    """The executed notebook as HTML beside it (headless nbconvert)."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    target.write_text(body, "utf-8")
    return target


def execute_stages(params: str | Path, sets: Sequence[str], stages: Sequence[str],
                   wait: float | None = None) -> int:
    """``wait``: poll batches in flight until they finish, this many seconds apart (batch mode)."""
    import secrets

    from evalnb.batch import WAIT_ENV
    from evalnb.kernels import start_run_kernel, stop_kernel

    # The run's one kernel boots while the parameters are checked (evalnb.kernels), so what it
    # reads from its environment is set first: the token that lets it in under this command's
    # lock (evalnb.lock), and how long its batch engine waits.
    settings = {TOKEN_ENV: secrets.token_hex(16), **({WAIT_ENV: f"{wait:g}"} if wait is not None else {})}
    os.environ.update(settings)
    kernel = None
    try:
        kernel = start_run_kernel(Path.cwd()) if stages else None
        return _run_stages(params, sets, stages, kernel)
    finally:
        stop_kernel(kernel)
        for name in settings:
            os.environ.pop(name, None)


def _run_stages(params: str | Path, sets: Sequence[str], stages: Sequence[str], kernel: Any) -> int:
    from evalnb.kernels import also_import
    from evalnb.manifest import update_manifest
    from evalnb.pipeline import open_run
    from evalnb.providers import modules_for

    # Validates everything before a notebook starts, then holds the run directory: a second
    # process is refused, and only this command's own kernel is let in (evalnb.lock).
    run = open_run(params, sets, require_keys=True, prefetch_sdks=False)
    assert run.lock is not None
    if kernel is not None:   # every endpoint's SDK, before the first stage
        also_import(kernel, modules_for([run.config.model, *run.config.judges]))
    update_manifest(run.path("manifest.json"), environment=True)   # once; the stages trust it
    try:
        failed = _execute(run, stages, kernel)
    finally:
        run.close()
    waiting = _batches_waiting(run.dir)
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
            print(f"evalnb: resumable work remains {status.get('resumable')}; run the same "
                  "command again to resume", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_ERROR


def _batches_waiting(run_dir: Path) -> str | None:
    """The one line for batches still in flight (batch mode), or None."""
    from evalnb.batch.journal import JOURNAL_NAME
    if not (run_dir / JOURNAL_NAME).exists():
        return None
    from evalnb.batch.engine import waiting_line
    return waiting_line(run_dir)


def status_command(run_dir: Path) -> int:
    """A run's state and its batches, read from the run directory alone: no call, no write."""
    from evalnb.batch.engine import status_text

    if not run_dir.is_dir():
        raise ConfigError(f"status: {run_dir} is not a directory")
    print(status_text(run_dir.resolve()))
    return EXIT_OK


def _execute(run: Any, stages: Sequence[str], kernel: Any) -> bool:
    """Each stage's notebook in turn, in the run's kernel reset to a new one's state; HTML
    written beside each record in the background. True as soon as one stage fails (its real
    cause printed)."""
    from concurrent.futures import ThreadPoolExecutor

    from papermill.exceptions import PapermillExecutionError   # papermill, while the kernel warms up

    from evalnb.kernels import execute_stage, stop_kernel

    if "aggregate" in stages:
        run.path("status.json").unlink(missing_ok=True)
    html = ThreadPoolExecutor(max_workers=1, initializer=_yield_cpu)
    try:
        for stage in stages:
            output = run.path(notebook_for(stage).name)
            print(f"evalnb: {stage} -> {output}", file=sys.stderr)
            try:
                execute_stage(kernel, notebook_for(stage), output, {"config": run.config.to_dict()}, run.dir)
            except PapermillExecutionError as e:
                redact_notebook(output)
                render_html(output)
                print(f"evalnb: {stage} stage failed: {failure_cause(output, e)} (record: {output})",
                      file=sys.stderr)
                return True
            except Exception as e:   # the kernel died or timed out: the record may look clean
                redact_notebook(output)
                print(f"evalnb: {stage} stage did not finish: {redact(f'{type(e).__name__}: {e}')} "
                      f"(record: {output})", file=sys.stderr)
                return True
            redact_notebook(output)
            html.submit(render_html, output)
        return False
    finally:
        stop_kernel(kernel)   # while the last record's HTML is written
        html.shutdown(wait=True)


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
    executed notebook (papermill's own exception may carry only a wrapper's empty message)."""
    import nbformat

    try:
        nb = nbformat.read(notebook, as_version=4)
    except (OSError, ValueError):
        nb = None
    for cell in (nb.cells if nb else []):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("ename") != "PapermillExecutionError":
                return redact(_one_line(f"{out['ename']}: {out['evalue']}"))
    return redact(_one_line(f"{getattr(error, 'ename', type(error).__name__)}: "
                            f"{getattr(error, 'evalue', error)}"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def redact_notebook(notebook: Path) -> None:
    """Key values out of an executed record (a provider error or a traceback may show one)."""
    if not notebook.exists():
        return
    from evalnb.records import write_text

    text = notebook.read_text("utf-8")
    clean = redact(text)
    if clean != text:
        write_text(notebook, clean)   # whole or not at all: a kill here never truncates the record


def estimate_command(params: Path, sets: Sequence[str]) -> int:
    """What a run will call and spend, making no call and writing nothing."""
    import pandas as pd

    from evalnb.accounting import estimate, minimum_run_minutes
    from evalnb.pipeline import load_config, make_benchmark

    config, bench_class = load_config(params, sets)
    bench = make_benchmark(config, bench_class)
    for warning in bench.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    rows = estimate(config, bench, bench.tasks, config.output_dir)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(pd.DataFrame(rows).set_index(["stage", "model"]).to_string())
    shortest = minimum_run_minutes(rows)
    if shortest is not None:
        print(f"Shortest time under the configured rate limits: {shortest:g} minutes (stages in turn, "
              "endpoints of a stage side by side; output counted at its budgets).")
    print("ESTIMATE, no call made: input tokens are characters / 3.3 (English) or / 1.5 (CJK); "
          "output tokens and judge calls for answers not yet generated are upper bounds "
          "(every in-scope task answered, every budget used).")
    if any(r["measured_calls"] for r in rows):
        print("Measured: measured_median_s from this run's finished calls; est_minutes_measured at that median "
              "with the endpoint's concurrency; est_output_tokens_measured at their mean output.")
    if config.prices:
        from evalnb.batch import price_note
        print(f"Costs: max_total_cost_usd at the live price, max_total_cost_batch_usd in batch mode ({price_note(config.prices)}); "
              "mode is how each endpoint is set to run.")
    return EXIT_OK


def probe_command(params: Path, sets: Sequence[str], max_calls: int) -> int:
    """Probe the contestant's context window; print and store a caps entry."""
    import json

    from evalnb.pipeline import check_keys, load_config
    from evalnb.probe import caps_entry, probe_record, probe_window
    from evalnb.records import write_json

    config, _ = load_config(params, sets)
    check_keys(config)
    results = probe_window(config, max_calls=max_calls)
    for r in results:
        print(f"{r.kind}: {r.accepted_chars:,} characters accepted"
              + (f", {r.rejected_chars:,} rejected" if r.rejected_chars else " (the upper bound: probe higher)")
              + f" ({r.calls} calls)")
    target = config.output_dir / "window_probe.json"
    write_json(target, probe_record(config, results))
    print(f"add to the parameters:  model.caps: {json.dumps(caps_entry(results))}   (written to {target})")
    return EXIT_OK


def compare_command(runs: Sequence[Path], out: Path | None, params: Path | None,
                    options: dict[str, Any]) -> int:
    """Run the compare notebook over finished runs; refuse runs that may not be mixed."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from evalnb.compare import open_compare
    from evalnb.config import read_params_file

    config: dict[str, Any] = read_params_file(params) if params else {}
    base = params.parent if params else Path.cwd()
    config["runs"] = [str((base / r).resolve()) for r in config.get("runs", [])] + [str(r.resolve()) for r in runs]
    config["out"] = str((out or base / (config.get("out") or "outputs/compare")).resolve())
    config |= {k: v for k, v in options.items() if v is not None}
    cmp = open_compare(**config)   # refuses before anything is written
    output = cmp.out / COMPARE_NOTEBOOK.name
    cmp.out.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(str(COMPARE_NOTEBOOK), str(output), parameters={"config": config},
                                   kernel_name="python3", cwd=str(cmp.out), progress_bar=False,
                                   start_timeout=120, coalesce_streams=True)
    except PapermillExecutionError as e:
        print(f"evalnb: compare failed: {e.ename}: {e.evalue.strip()} (record: {output})", file=sys.stderr)
        return EXIT_ERROR
    render_html(output)
    print(f"evalnb: compare written to {cmp.out}", file=sys.stderr)
    return EXIT_OK


def render_command(folder: Path, no_input: bool) -> int:
    from evalnb.render import render_folder

    if not folder.is_dir():
        raise ConfigError(f"render: {folder} is not a directory")
    pages = render_folder(folder.resolve(), no_input=no_input)
    if not pages:
        raise ConfigError(f"render: no executed notebooks in {folder}")
    for page in pages:
        print(page)
    return EXIT_OK


def demo(outputs: Path) -> int:
    """Every shipped sample through the offline baselines, from scratch, no key needed; then
    two offline WildTrace contestants compared and rendered for a paper."""
    worst, runs = EXIT_OK, {}
    for name, contestant in DEMO_RUNS:
        run_name = f"demo-{Path(name).stem.removeprefix('demo_')}" + (f"-{contestant}" if contestant else "")
        run_dir = outputs / run_name
        shutil.rmtree(run_dir, ignore_errors=True)
        sets = [f"output_dir={run_dir}", f"run_name={run_name}"]
        sets += [f"model.name={contestant}"] if contestant else []
        worst = max(worst, execute_stages(PROJECT / "params" / name, sets, STAGES))
        runs[run_name] = run_dir
        print(f"evalnb demo: records in {run_dir}", file=sys.stderr)
    compare_dir = outputs / "demo-compare-wildtrace"
    shutil.rmtree(compare_dir, ignore_errors=True)
    worst = max(worst, compare_command([runs["demo-wildtrace"], runs["demo-wildtrace-lead-3"]],
                                       compare_dir, None, {}))
    for folder in (compare_dir, runs["demo-wildtrace"]):
        render_command(folder, no_input=True)
    print(f"evalnb demo: comparison in {compare_dir}; paper-ready HTML in {compare_dir / 'paper'}",
          file=sys.stderr)
    return worst


def show_command(run_dir: Path, item_id: str) -> int:
    """One item's evidence (what its benchmark declares), read from the run's evidence.json."""
    from evalnb.evidence import show

    sys.stdout.write(str(show(run_dir, item_id)))
    return EXIT_OK


def init_command(folder: Path, force: bool) -> int:
    """Copy the notebooks, example parameters, sample data and example rater into ``folder``."""
    try:
        written = init_project(folder.resolve(), force=force)
    except (FileExistsError, OSError) as e:
        print(f"evalnb: error: init: {e}", file=sys.stderr)
        return EXIT_ERROR
    for part in sorted({p.relative_to(folder.resolve()).parts[0] for p in written}):
        print(f"evalnb init: {folder / part}/")
    print(f"evalnb init: {len(written)} files. Open {folder / 'notebooks'} in JupyterLab (the notebooks read "
          f"../params/demo_wildtrace.yaml and write under {folder / 'outputs'}), or run "
          "`evalnb run params/demo_wildtrace.yaml` there.", file=sys.stderr)
    return EXIT_OK


def _skip_iri_grammar() -> None:
    """nbformat imports jsonschema, which imports ``rfc3987_syntax`` when it is installed
    (jupyterlab brings it), and that module builds an Earley parser per IRI term at import:
    3-7 s on this machine, for a format check no notebook schema uses. This command's
    process is ours to configure; a library import of evalnb never does this."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def command() -> NoReturn:
    """The ``evalnb`` console script: :func:`main` in a process that is evalnb's own.

    Once :func:`main` has returned, every file is closed, the kernel stopped and the HTML
    thread joined; what remains is the interpreter tearing down some 1,100 modules, a third
    of a second of nothing. The process ends without it (``os._exit``, streams flushed
    first), as it does on an exception only through the normal path."""
    _skip_iri_grammar()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalnb", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run (or resume) the stage notebooks for a parameters file")
    run_p.add_argument("params", type=Path)
    run_p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a parameter (dotted keys, YAML values); repeatable")
    run_p.add_argument("--stage", choices=STAGES, action="append",
                       help="run only this stage (repeatable); default: all four in order")
    run_p.add_argument("--wait", action="store_true",
                       help="batch mode: poll batches in flight until they finish (default: poll once, exit 2 "
                            "while any is running)")
    run_p.add_argument("--poll-interval", type=float, default=60.0, metavar="SECONDS",
                       help="seconds between polls with --wait (default 60)")
    for name, text in (("estimate", "print the calls, tokens and cost a run will make (no call)"),
                       ("probe-window", "probe the model's context window in characters")):
        p = sub.add_parser(name, help=text)
        p.add_argument("params", type=Path)
        p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
        if name == "probe-window":
            p.add_argument("--max-calls", type=int, default=40, help="per text kind (default 40)")
    cmp_p = sub.add_parser("compare", help="compare finished runs of one benchmark (leaderboard, paired "
                                           "differences, judge agreement, rubric analysis)")
    cmp_p.add_argument("runs", type=Path, nargs="*")
    cmp_p.add_argument("--out", type=Path)
    cmp_p.add_argument("--params", type=Path, help="a file with runs: [...] and options")
    cmp_p.add_argument("--n-boot", type=int, dest="n_boot")
    cmp_p.add_argument("--seed", type=int)
    cmp_p.add_argument("--threshold", type=float, help="judges disagree above this difference (0.2)")
    status_p = sub.add_parser("status", help="a run's state and its batches (batch mode), read from the run "
                                             "directory without touching anything")
    status_p.add_argument("run_dir", type=Path)
    render_p = sub.add_parser("render", help="paper-ready HTML of every executed notebook in a run or compare")
    render_p.add_argument("folder", type=Path)
    render_p.add_argument("--no-input", action="store_true", help="hide the code cells")
    demo_p = sub.add_parser("demo", help="run the shipped samples through the offline baselines")
    demo_p.add_argument("--outputs", type=Path, default=Path("outputs"))
    show_p = sub.add_parser("show", help="print one item's evidence (question, response, verdicts ...) from a run")
    show_p.add_argument("run_dir", type=Path)
    show_p.add_argument("item_id")
    init_p = sub.add_parser("init", help="copy the stage notebooks, example parameters and sample data into "
                                         "a folder, ready for JupyterLab")
    init_p.add_argument("folder", type=Path, nargs="?", default=Path("."), help="default: the current directory")
    init_p.add_argument("--force", action="store_true", help="overwrite files that differ")
    args = parser.parse_args(argv)
    if args.command == "init":
        return init_command(args.folder, args.force)
    try:
        if args.command == "run":
            stages = [s for s in STAGES if s in (args.stage or STAGES)]
            return execute_stages(args.params, args.sets, stages,
                                  wait=args.poll_interval if args.wait else None)
        if args.command == "estimate":
            return estimate_command(args.params, args.sets)
        if args.command == "probe-window":
            return probe_command(args.params, args.sets, args.max_calls)
        if args.command == "compare":
            return compare_command(args.runs, args.out, args.params,
                                   {"n_boot": args.n_boot, "seed": args.seed, "threshold": args.threshold})
        if args.command == "status":
            return status_command(args.run_dir)
        if args.command == "show":
            return show_command(args.run_dir, args.item_id)
        if args.command == "render":
            return render_command(args.folder, args.no_input)
        return demo(args.outputs.resolve())
    except EvalnbError as e:
        print(f"evalnb: error: {redact(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:   # a path the checks could not foresee (a full disk, a race)
        print(f"evalnb: error: {redact(f'{type(e).__name__}: {e}')}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(command())
