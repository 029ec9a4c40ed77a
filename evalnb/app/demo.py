"""``evalnb demo`` and ``evalnb init``: the shipped samples end to end with no key, and the
project files (notebooks, parameters, samples, example rater) copied into a folder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from evalnb.app import EXIT_ERROR, EXIT_OK, output
from evalnb.app.results import compare_results, compare_text, run_results, run_text
from evalnb.app.record.compare import compare_command, render_command
from evalnb.app.runs.notebooks import PROJECT
from evalnb.app.project import init_project
from evalnb.app.runs.command import execute_stages
from evalnb.core.types import STAGES

# (parameters file, another offline contestant for a second run of that file, or None)
DEMO_RUNS: tuple[tuple[str, str | None], ...] = (
    ("demo_wildtrace.yaml", None), ("demo_wildtrace.yaml", "lead-3"),
    ("demo_geoktools.yaml", None), ("demo_geoexpertqueries.yaml", None))


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
        worst = max(worst, execute_stages(PROJECT / "params" / name, sets, STAGES, results=False))
        runs[run_name] = run_dir
        print(f"evalnb demo: records in {run_dir}", file=sys.stderr)
    compare_dir = outputs / "demo-compare-wildtrace"
    shutil.rmtree(compare_dir, ignore_errors=True)
    worst = max(worst, compare_command([runs["demo-wildtrace"], runs["demo-wildtrace-lead-3"]],
                                       compare_dir, None, {}, show_results=False))
    for folder in (compare_dir, runs["demo-wildtrace"]):
        render_command(folder, no_input=True)
    print(f"evalnb demo: comparison in {compare_dir}; paper-ready HTML in {compare_dir / 'paper'}",
          file=sys.stderr)
    docs = {name: run_results(path) for name, path in runs.items()}
    ranking = compare_results(compare_dir)
    output.results("\n\n".join([*(run_text(d) for d in docs.values()), compare_text(ranking)]),
                   {"runs": docs, "compare": ranking})
    return worst


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
