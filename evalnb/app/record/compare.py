"""``evalnb compare``, ``evalnb render`` and ``evalnb export``: the compare notebook over finished
runs, through the same notebook path as a run's stages; paper-ready HTML of any executed record;
its tables as LaTeX, Markdown or CSV."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalnb.app import EXIT_ERROR, EXIT_OK, output
from evalnb.app.results import compare_results, compare_text
from evalnb.app.runs.notebooks import COMPARE_NOTEBOOK, execute_alone, failure_cause
from evalnb.config import read_params_file
from evalnb.core.errors import ConfigError
from evalnb.records.stores import read_json_if_exists
from evalnb.comparison.compare import open_compare
from evalnb.pages.render import render_folder


DEFAULT_OUT = "outputs/compare"


def compare_command(runs: Sequence[Path], out: Path | None, params: Path | None,
                    options: dict[str, Any], show_results: bool = True) -> int:
    """Run the compare notebook over finished runs; refuse runs that may not be mixed."""
    from papermill.exceptions import PapermillExecutionError

    config: dict[str, Any] = read_params_file(params) if params else {}
    base = params.parent if params else Path.cwd()
    config["runs"] = [str((base / r).resolve()) for r in config.get("runs", [])] + [str(r.resolve()) for r in runs]
    if config.get("panels"):   # a file's panels, relative to it (--panels: made absolute already)
        config["panels"] = [[str((base / r).resolve()) for r in side] for side in config["panels"]]
    config["out"] = str((out or base / (config.get("out") or DEFAULT_OUT)).resolve())
    config |= {k: v for k, v in options.items() if v is not None}
    for run in config["runs"]:   # a run whose stages did not all finish is not compared
        refuse_unfinished("compare", Path(run))
    cmp = open_compare(**config)   # refuses before anything is written
    check_out(cmp.out, [Path(r) for r in config["runs"]], chosen=out is not None or bool(config.get("out")))
    record = cmp.out / COMPARE_NOTEBOOK.name
    cmp.out.mkdir(parents=True, exist_ok=True)
    try:
        execute_alone(COMPARE_NOTEBOOK, record, {"config": config}, cmp.out)
    except PapermillExecutionError as e:
        print(f"evalnb: compare failed: {failure_cause(record, e)} (record: {record})", file=sys.stderr)
        return EXIT_ERROR
    print(f"evalnb: compare written to {cmp.out}", file=sys.stderr)
    if show_results:
        doc = compare_results(cmp.out)
        output.results(compare_text(doc), doc)
    return EXIT_OK


def check_out(out: Path, runs: Sequence[Path], chosen: bool) -> None:
    """Where a comparison may be written: a new or empty folder, or one compare wrote (its
    compare.json). A folder compare did not write is refused. The default folder, which no
    one chose, is replaced only when it holds a comparison of the same runs: another
    comparison there is not silently lost."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    recorded = read_json_if_exists(out / "compare.json") if out.is_dir() else None
    if recorded is None:
        raise ConfigError(f"compare: {out} exists and was not written by evalnb compare; choose another "
                          "folder with --out, or remove it")
    before = sorted(str(Path(r.get("dir", ""))) for r in recorded.get("runs", []))
    if not chosen and before != sorted(str(r) for r in runs):
        raise ConfigError(f"compare: {out} holds a comparison of other runs ({', '.join(Path(b).name for b in before)}); "
                          "write this one elsewhere with --out DIR, or pass --out "
                          f"{out} to replace it")


def refuse_unfinished(command: str, run_dir: Path) -> None:
    """ConfigError, in one line naming the stage and the command that finishes it, for a run
    directory with a stage that started and did not finish (:mod:`evalnb.records.completion`)."""
    from evalnb.records.completion import refusal

    if (run_dir / "config.json").exists() and (line := refusal(command, run_dir)):
        raise ConfigError(line)


def render_command(folder: Path, no_input: bool) -> int:
    if not folder.is_dir():
        raise ConfigError(f"render: {folder} is not a directory")
    refuse_unfinished("render", folder.resolve())
    pages = render_folder(folder.resolve(), no_input=no_input)
    if not pages:
        raise ConfigError(f"render: no executed notebooks in {folder}")
    for page in pages:
        print(page)
    return EXIT_OK


def export_command(folder: Path, fmt: str, output: Path | None, decimals: int | None = None, fit: str = "text",
                   columns: Sequence[str] | None = None) -> int:
    from evalnb.pages.exports import export

    if not folder.is_dir():
        raise ConfigError(f"export: {folder} is not a directory")
    if decimals is not None and not 0 <= decimals <= 6:
        raise ConfigError(f"export: --decimals must be 0 to 6, got {decimals}")
    for path in export(folder.resolve(), fmt, output, decimals, fit, columns):
        print(path)
    return EXIT_OK
