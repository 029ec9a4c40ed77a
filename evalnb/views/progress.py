"""Progress bars that look like progress where they are seen.

In a terminal: tqdm's bar on stderr, as any tool draws it. In a Jupyter kernel (JupyterLab,
papermill, nbclient) tqdm's text bar goes to stderr too, which JupyterLab draws in its error
colour, and its widget bar needs ipywidgets (not a dependency) and leaves widget state that
an executed record shows as ``HBox(children=...)``. There the bar is instead one line of plain
output (``text/plain`` display data) updated in place through its display id: JupyterLab
redraws it as it advances, and an executed record (nbclient applies the updates) keeps only
its final line.

A paper page holds no progress: a bar is how a run is going, not what it found. So the bar in
a notebook is cleared when it closes (its output updated to no data: an executed record, a
saved notebook and its HTML keep nothing of it), and under ``evalnb run``, whose terminal draws
every stage's progress from the counts the stage sends it (:mod:`evalnb.views.progress_channel`),
the stage's notebook draws no bar at all. What the stage did stays in its one outcome line.

Decision: a stage none of whose calls reaches a model (an offline baseline, answers read from a
file, a deterministic scorer) shows no rate and no time left, only its counts and the time it
took: its "calls" take microseconds, and a rate of 50,000 calls/s says nothing about how long a
run with a model takes. A stage with at least one endpoint that calls a model (an API, a local
server, a ``command``) shows tqdm's rate and estimate as usual.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

from evalnb.views import frontend

NOTEBOOK_COLUMNS = 100   # the bar's line in a notebook (no terminal to measure)
# tqdm's own bar without "<remaining, rate": what a stage whose calls reach no model shows.
OFFLINE_BAR = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def say(line: str) -> None:
    """A line about what evalnb did: plain output in a notebook (stderr there is drawn as an
    error), stderr elsewhere (a script's stdout stays its own)."""
    print(line, file=sys.stdout if frontend.in_kernel() else sys.stderr, flush=True)


def progress_bar(*, total: int, desc: str, unit: str = "it", mininterval: float = 1.0,
                 disable: bool = False, offline: bool = False) -> tqdm:
    """A bar for ``total`` steps: :class:`NotebookBar` in a Jupyter kernel, else tqdm on stderr;
    ``offline``: steps that reach no model, drawn without a rate (:data:`OFFLINE_BAR`)."""
    look: dict[str, Any] = {"bar_format": OFFLINE_BAR} if offline else {}
    if frontend.in_kernel() and not disable:
        return NotebookBar(total=total, desc=desc, unit=unit, mininterval=mininterval, **look)
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=mininterval, disable=disable, **look)


class NotebookBar(tqdm):
    """tqdm's text bar as one updated line of a cell's output."""

    # No monitor thread: a redraw from a thread the cell did not start could reach another cell.
    monitor_interval = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._handle: Any = None
        kwargs.update(gui=True, ncols=NOTEBOOK_COLUMNS)   # gui: tqdm itself writes nothing
        super().__init__(*args, **kwargs)
        if not self.disable:
            self.display()

    def display(self, msg: str | None = None, pos: int | None = None) -> None:  # type: ignore[override]
        from IPython.display import display

        data = {"text/plain": msg or self.format_meter(**self.format_dict)}
        if self._handle is None:
            self._handle = display(data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)

    def close(self) -> None:
        if self.disable:
            return
        super().close()   # sets disable; draws nothing in gui mode
        if self._handle is not None:   # cleared: no progress line stays in the record
            self._handle.update({}, raw=True)

    def clear(self, *args: Any, **kwargs: Any) -> None:
        pass


class StageProgress:
    """A stage's calls as they finish: its bar where it runs (the notebook's, or tqdm's), and
    the same counts for the command's terminal (:mod:`evalnb.views.progress_channel`).
    ``offline``: none of the calls reaches a model (no rate is shown, see the module)."""

    def __init__(self, stage: str, *, total: int, pending: int, desc: str, unit: str = "it",
                 mininterval: float = 1.0, offline: bool = False) -> None:
        from evalnb.views.progress_channel import Snapshot, Writer

        self.writer = Writer()
        # With a channel, the command's view draws these counts on its terminal: a second bar of
        # tqdm's own there would only garble it, and one in the stage's notebook would only be
        # progress left in the record (see the module).
        drawn_elsewhere = bool(self.writer.path)
        self.bar = progress_bar(total=pending, desc=desc, unit=unit, mininterval=mininterval,
                                disable=pending == 0 or drawn_elsewhere, offline=offline)
        self.snapshot = Snapshot(stage=stage, total=total, before=total - pending, offline=offline)
        self._backing_off = 0
        self._quota = ""
        self.writer.write(self.snapshot, force=True)

    def finished(self, status: str) -> None:
        """One call recorded, with ``status``."""
        self.snapshot.statuses[status] = self.snapshot.statuses.get(status, 0) + 1
        self.bar.update()
        self.writer.write(self.snapshot)

    def set_done(self, done: int, total: int, waiting: str) -> None:
        """Batch mode: ``done`` of ``total`` calls collected, and what it waits on."""
        self.bar.total = total
        self.bar.n = done
        self.snapshot.total = self.snapshot.before + total
        self.snapshot.statuses = {"collected": done} if done else {}
        self._set_waiting(waiting)

    def backoff(self, change: int) -> None:
        """A call begins (+1) or ends (-1) the wait before a retry."""
        if change > 0:
            self.snapshot.retries += 1
        self._backing_off += change
        self._set_waiting(self._quota)

    def quota(self, names: list[str]) -> None:
        """The endpoints whose calls wait for their quota window now."""
        text = f"quota window: {', '.join(names)}" if names else ""
        if text and not self._quota:
            self.snapshot.quota_waits += 1
        self._quota = text
        self._set_waiting(text)

    def _set_waiting(self, base: str) -> None:
        parts = [base] if base else []
        if self._backing_off:
            parts.append(f"retry backoff: {self._backing_off} call{'s' if self._backing_off != 1 else ''}")
        text = "; ".join(parts)
        if text != self.snapshot.waiting:
            self.snapshot.waiting = text
            self.bar.set_postfix_str(text.replace("quota window", "waiting for quota"), refresh=True)
            self.writer.write(self.snapshot, force=True)

    def close(self, total: int | None = None) -> None:
        """The stage is over (``total``: its calls, when fewer were needed than foreseen)."""
        self.bar.close()
        if total is not None:
            self.snapshot.total = self.snapshot.before + total
        self.snapshot.waiting = ""
        self.snapshot.final = True
        self.writer.write(self.snapshot, force=True)
        self.writer.close()

