"""Whether a stage finished: the ``notebooks`` section of a run's ``manifest.json``.

A stage is done only when it finished. ``evalnb run`` records, per stage:

- ``running`` when it begins executing the stage's notebook;
- ``executed`` once the notebook ran to its last cell (every file its cells write is written
  whole before the cell returns, so all of them are in place);
- ``complete`` once the notebook's HTML is beside it too;
- ``failed`` when a cell raised, ``interrupted`` when the command was stopped (Ctrl-C, the
  kernel died), each with the code cell it reached.

A killed command records nothing more: its stage stays ``running``, and with no process
holding the run directory that reads as ``interrupted`` (:func:`stage_states`). A stage
absent from the section (a run recorded before the section existed) is read from its executed
notebook: complete when papermill ended it with every code cell completed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.types import STAGES
from evalnb.records.manifest import utc_now
from evalnb.records.stores import read_json_if_exists, write_json

SECTION = "notebooks"
FINISHED = ("executed", "complete")


@dataclass(frozen=True)
class StageState:
    stage: str
    state: str            # complete, executed, running, interrupted, failed, not run
    cell: int | None = None    # the code cell reached (1-based), when it did not finish
    cells: int | None = None   # the notebook's code cells

    def words(self) -> str:
        """``interrupted at cell 9 of 20``."""
        where = f" at cell {self.cell} of {self.cells}" if self.cell and self.cells else ""
        return f"{self.state}{where}"


def notebook_name(stage: str) -> str:
    return f"{STAGES.index(stage) + 1:02d}_{stage}.ipynb"


def reached(notebook: Path) -> tuple[int | None, int | None]:
    """The first code cell of an executed notebook that did not complete (1-based), and how
    many code cells it has; (None, n) when every cell completed."""
    try:
        cells = [c for c in json.loads(notebook.read_text("utf-8")).get("cells", []) if c.get("cell_type") == "code"]
    except (OSError, ValueError):
        return None, None
    for i, cell in enumerate(cells, 1):
        if ((cell.get("metadata") or {}).get("papermill") or {}).get("status") != "completed":
            return i, len(cells)
    return None, len(cells)


def record(run_dir: Path, stage: str, state: str) -> None:
    """Record ``state`` for ``stage`` (with the cell reached, for a stage that did not finish)."""
    path = run_dir / "manifest.json"
    manifest = read_json_if_exists(path) or {}
    entry: dict[str, Any] = {"state": state, "at": utc_now()}
    if state in ("failed", "interrupted"):
        cell, cells = reached(run_dir / notebook_name(stage))
        entry.update(cell=cell, cells=cells)
    manifest.setdefault(SECTION, {})[stage] = entry
    write_json(path, manifest)


def stage_states(run_dir: Path, held: bool = False) -> dict[str, StageState]:
    """Each stage's state; ``held``: a process holds the run directory now (a ``running``
    stage is then running, else it was interrupted)."""
    section = (read_json_if_exists(run_dir / "manifest.json") or {}).get(SECTION) or {}
    states = {}
    for stage in STAGES:
        notebook = run_dir / notebook_name(stage)
        entry = section.get(stage)
        if entry is None:
            cell, cells = reached(notebook)
            state = "not run" if not notebook.exists() else "complete" if cells and cell is None else "interrupted"
            states[stage] = StageState(stage, state, cell, cells)
            continue
        state = entry.get("state", "running")
        if state == "running":
            cell, cells = reached(notebook)
            states[stage] = StageState(stage, "running" if held else "interrupted", cell, cells)
        else:
            states[stage] = StageState(stage, state, entry.get("cell"), entry.get("cells"))
    return states


def finished(run_dir: Path, stage: str) -> bool:
    return stage_states(run_dir)[stage].state in FINISHED


def unfinished(run_dir: Path, held: bool = False) -> StageState | None:
    """The first stage that started and did not finish (running, interrupted, or a report
    that failed), or None."""
    for state in stage_states(run_dir, held).values():
        if state.state in ("running", "interrupted") or (state.stage == "report" and state.state == "failed"):
            return state
    return None


def refusal(command: str, run_dir: Path) -> str | None:
    """The one line ``compare``, ``render`` and ``pack`` refuse an unfinished run with, or None."""
    from evalnb.records.lock import describe, held_by

    holder = held_by(run_dir)
    state = unfinished(run_dir, held=holder is not None)
    if state is None:
        return None
    if state.state == "running":
        return (f"{command}: {run_dir}: the {state.stage} stage is running now ({describe(holder or {})}); "
                "wait for it to end, then try again")
    return (f"{command}: {run_dir}: the {state.stage} stage did not finish ({state.words()}); "
            f"`evalnb run {run_dir / 'config.json'}` finishes it")


def sweep_temporary(run_dir: Path) -> list[Path]:
    """Remove the temporary files a killed writer left (``.NAME.XXXX.tmp``: a file written whole
    is written under such a name, then renamed). Called by the run directory's holder, so no
    writer of them is alive; the files they would have replaced are whole."""
    left = [p for p in run_dir.rglob(".*.tmp") if p.is_file()]
    for path in left:
        path.unlink(missing_ok=True)
    return left
