"""``evalnb verify RUN_DIR|COMPARE_DIR|ARCHIVE``: a record checked without trusting it.

In this process, with no network and no key (no provider is ever made), everything the
record reports is recomputed from its stores and inputs by the code that reported it
(evalnb.pipeline.recompute) and compared with ``scores.json``, ``responses.json``,
``evidence.json``, ``tasks.html``, ``status.json``, the manifest's usage, the figures and
every output of the executed notebooks (evalnb.pages.notebook_outputs); the inputs must
still have the hashes the fingerprint recorded; no file may hold a key-shaped string.

An archive written by ``evalnb pack`` is unpacked into a scratch directory (members checked
first: no absolute path, no ``..``, no link) and its ``SHA256SUMS`` checked before anything
else. A compare directory: every compared run is verified as a run, its fingerprint must be
the one the comparison recorded, and the comparison's tables, figures, ``compare.json``,
CSV files and notebook outputs are recomputed from those runs.

One line per discrepancy on stdout, naming the file and the field, and one per thing that
could not be checked (an input that cannot be read, a compared run that is not there), which
says "could not check". Exit status: 0 everything checked and matching; 1 something does not
match (whatever else could not be checked); 2 nothing found that differs, but something could
not be checked (give the missing input with --set and verify again). Nothing in the record is
written.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import evalnb
from evalnb.app.runs.notebooks import render_html
from evalnb.app.record.pack import ARCHIVE_SUFFIXES, check_sums, unpack
from evalnb.core.errors import ConfigError
from evalnb.records.lock import describe, held_by
from evalnb.core.jsondiff import difference_lines
from evalnb.records.keyscan import scan_file
from evalnb.records.stores import read_json_if_exists
from evalnb.comparison.compare import open_compare
from evalnb.judges import retest as judge_retest
from evalnb.pages.notebook_outputs import check_notebook, injected_config
from evalnb.evidence.headline import headline_table
from evalnb.pipeline.stages import judge_names, judge_status_table, status_table
from evalnb.pipeline.recompute import Recomputed, Unchecked, rebuild
from evalnb.pages.render import provenance, render_notebook

EXIT_OK, EXIT_DIFFERS, EXIT_UNCHECKED = 0, 1, 2
RUN_NOTEBOOKS = ("01_generate.ipynb", "02_judge.ipynb", "03_aggregate.ipynb", "04_report.ipynb")
REPORT_CALLS = ("headline", "status_breakdown", "score_histogram", "judge_distributions", "usage_table",
                "breakdown", "benchmark_figure", "benchmark_tables", "tasks", "batches_table", "standard_errors",
                "run_reliability", "run_length_bias", "judge_retest_table")
COMPARE_CALLS = ("leaderboard", "leaderboard_figure", "pairwise", "paired_differences", "judge_means",
                 "judge_agreement", "disagreements", "panel_reliability", "leave_one_judge_out", "self_preference",
                 "length_bias", "panel_change", "benchmark_analysis", "benchmark_compare_figure", "repeats_table",
                 "save_compare")


def files_of(folder: Path) -> Iterator[Path]:
    """Every regular file under ``folder``, links not followed."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                yield path


def key_lines(folder: Path, label: str) -> list[str]:
    return [str(f) for path in files_of(folder)
            for f in scan_file(path, f"{label}/{path.relative_to(folder)}")]


def same_matplotlib(manifest: dict[str, Any]) -> bool:
    from importlib import metadata
    return bool((manifest.get("packages") or {}).get("matplotlib") == metadata.version("matplotlib"))


def figure_lines(record: Path, scratch: Path, label: str) -> list[str]:
    """Each figure the record holds as PNG equals the one drawn again (PDFs carry their creation
    time: not compared)."""
    lines = []
    for png in sorted((scratch / "figures").glob("*.png")):
        recorded = record / "figures" / png.name
        name = f"{label}/figures/{png.name}"
        if not recorded.exists():
            lines.append(f"{name}: missing")
        elif recorded.read_bytes() != png.read_bytes():
            lines.append(f"{name}: differs from the figure drawn again from the recomputed numbers")
    return lines


def html_lines(folder: Path, scratch: Path, label: str) -> list[str]:
    """Each notebook's HTML beside it, and its paper-ready page under paper/, are the notebook's
    own rendering (the paper page with or without its code, as ``evalnb render`` was asked)."""
    lines = []
    pages = scratch / "html"
    pages.mkdir(exist_ok=True)
    for notebook in sorted(folder.glob("*.ipynb")):
        html = notebook.with_suffix(".html")
        if html.exists():
            copy = pages / notebook.name
            shutil.copyfile(notebook, copy)
            if render_html(copy).read_bytes() != html.read_bytes():
                lines.append(f"{label}/{html.name}: is not the rendering of {notebook.name}")
        paper = folder / "paper" / html.name
        if paper.exists():
            header = provenance(folder)
            if not any(render_notebook(notebook, pages / "paper" / html.name, no_input=hide, header=header).read_bytes()
                       == paper.read_bytes() for hide in (True, False)):
                lines.append(f"{label}/paper/{html.name}: is not the rendering of {notebook.name} (with or without "
                             "its code)")
    return lines


def run_calls(done: Recomputed) -> dict[str, Callable[[], Any]]:
    """Each stage notebook's cell call -> its value, rebuilt (the calling stages' tables from the stores)."""
    calls: dict[str, Callable[[], Any]] = {
        "run.summary": done.run.summary,
        "evalnb.generate": functools.partial(status_table, done.shadow),
        "evalnb.judge": lambda: judge_status_table(done.stores["judge"].values(), judge_names(done.shadow)),
        "evalnb.judge_retest": lambda: judge_status_table(judge_retest.store_records(done.run_dir).values(),
                                                          judge_names(done.shadow)),
        "evalnb.aggregate": functools.partial(headline_table, done.scores)}
    calls |= {f"evalnb.{name}": functools.partial(getattr(evalnb, name), done.shadow) for name in REPORT_CALLS}
    return calls


def verify_run(run_dir: Path, label: str, sets: Sequence[str]) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="evalnb-verify-") as scratch:
        done = rebuild(run_dir, Path(scratch), sets, label)
        if isinstance(done, str):
            return [done] + key_lines(run_dir, label)
        lines = list(done.lines)
        manifest = read_json_if_exists(run_dir / "manifest.json") or {}
        figures = same_matplotlib(manifest)
        if not figures:
            print(f"evalnb verify: {label}: figures not compared (matplotlib differs from the run's)", file=sys.stderr)
        calls = run_calls(done)
        config = read_json_if_exists(run_dir / "config.json")
        present = [n for n in RUN_NOTEBOOKS if (run_dir / n).exists()]
        if not present:   # a run made through the API, its notebooks executed elsewhere (JupyterLab)
            print(f"evalnb verify: {label}: no executed stage notebooks here: their outputs not checked",
                  file=sys.stderr)
        for notebook in RUN_NOTEBOOKS if present else ():
            if (run_dir / notebook).exists():
                check = check_notebook(run_dir / notebook, f"{label}/{notebook}", calls, config=config, figures=figures)
                lines += check.lines
            else:
                lines.append(f"{label}/{notebook}: missing")
        if figures:
            lines += figure_lines(run_dir, Path(scratch), label)
        lines += html_lines(run_dir, Path(scratch), label)
    return lines + key_lines(run_dir, label)


def verify_compare(folder: Path, label: str, sets: Sequence[str]) -> list[str]:
    """The compared runs, each verified; then the comparison recomputed from them."""
    recorded = read_json_if_exists(folder / "compare.json")
    notebook = folder / "05_compare.ipynb"
    if recorded is None or not notebook.exists():
        return [f"{label}/{'compare.json' if recorded is None else notebook.name}: missing"] + key_lines(folder, label)
    lines: list[str] = []
    for entry in recorded["runs"] + recorded.get("panel_b", []):   # panel_b: compare --panels' second panel
        run_dir = Path(entry["dir"])
        fingerprint = read_json_if_exists(run_dir / "fingerprint.json") if run_dir.is_dir() else None
        if fingerprint is None:
            lines.append(Unchecked(f"{label}/compare.json: runs[{entry.get('label')}]: could not check: "
                                   f"{run_dir} is not there to verify"))
            continue
        if fingerprint.get("sha256") != entry.get("fingerprint"):
            lines.append(f"{label}/compare.json: runs[{entry.get('label')}].fingerprint: recorded "
                         f"{str(entry.get('fingerprint'))[:12]}, the run's is now {str(fingerprint.get('sha256'))[:12]}")
        lines += verify_run(run_dir, str(run_dir), sets)
    if lines:
        return lines + key_lines(folder, label)   # the comparison of runs that do not verify proves nothing
    options = injected_config(json.loads(notebook.read_text("utf-8")))
    with tempfile.TemporaryDirectory(prefix="evalnb-verify-") as scratch:
        cmp = open_compare(**(dict(options or {}) | {"out": scratch, "record_dir": folder}))   # paths as recorded
        calls = {f"evalnb.{name}": functools.partial(getattr(evalnb, name), cmp) for name in COMPARE_CALLS}
        manifest = read_json_if_exists(Path(recorded["runs"][0]["dir"]) / "manifest.json") or {}
        figures = same_matplotlib(manifest)
        check = check_notebook(notebook, f"{label}/{notebook.name}", calls, figures=figures,
                               skip=frozenset({"evalnb.save_compare"}))
        lines += check.lines
        lines += compare_outputs(folder, Path(scratch), label)
        if figures:
            lines += figure_lines(folder, Path(scratch), label)
        lines += html_lines(folder, Path(scratch), label)
    return lines + key_lines(folder, label)


def compare_outputs(folder: Path, scratch: Path, label: str) -> list[str]:
    lines = difference_lines(f"{label}/compare.json", read_json_if_exists(folder / "compare.json"),
                             read_json_if_exists(scratch / "compare.json"))
    for csv in sorted(scratch.glob("*.csv")):
        recorded = folder / csv.name
        if not recorded.exists():
            lines.append(f"{label}/{csv.name}: missing")
        elif recorded.read_bytes() != csv.read_bytes():
            lines.append(f"{label}/{csv.name}: differs from the table recomputed from the runs")
    return lines


def verify_folder(folder: Path, label: str, sets: Sequence[str]) -> list[str]:
    if (folder / "config.json").exists() or (folder / "scores.json").exists():
        return verify_run(folder, label, sets)
    if (folder / "compare.json").exists() or (folder / "05_compare.ipynb").exists():
        return verify_compare(folder, label, sets)
    raise ConfigError(f"verify: {folder} is neither a run directory (config.json) nor a compare directory "
                      "(compare.json)")


def verify_command(target: Path, sets: Sequence[str] = ()) -> int:
    """Print one line per discrepancy and per thing not checked; exit 0, 1 or 2 (module docstring)."""
    if target.is_file() and target.name.endswith(ARCHIVE_SUFFIXES):
        with tempfile.TemporaryDirectory(prefix="evalnb-verify-archive-") as scratch:
            folder, lines = unpack(target, Path(scratch))
            lines += check_sums(folder, f"{target.name}:{folder.name}")
            lines += verify_folder(folder, f"{target.name}:{folder.name}", sets)
    elif target.is_dir():
        if (holder := held_by(target.resolve())) is not None:   # being written: nothing to compare yet
            print(f"evalnb verify: {target}: being written by {describe(holder)}; nothing checked: verify it "
                  "once that process has ended", file=sys.stderr)
            return EXIT_UNCHECKED
        lines = verify_folder(target.resolve(), str(target), sets)
    else:
        raise ConfigError(f"verify: {target} is not a run directory, a compare directory or an archive "
                          f"({', '.join(ARCHIVE_SUFFIXES)})")
    for line in lines:
        print(line)
    unchecked = sum(isinstance(line, Unchecked) for line in lines)
    differ = len(lines) - unchecked
    summary = [f"{differ} discrepanc{'y' if differ == 1 else 'ies'} (does not match)"] if differ else []
    summary += [f"{unchecked} could not check"] if unchecked else []
    print(f"evalnb verify: {target}: " + ("; ".join(summary) or "everything matches"), file=sys.stderr)
    return EXIT_DIFFERS if differ else EXIT_UNCHECKED if unchecked else EXIT_OK
